"""config/paper.yaml is the papers' complete experiment matrix, proven without the data: a dry
run (nothing downloaded) lists every job, counted here from the matrix itself; and
config/paper-mini.yaml runs the same DAG on miniature files served from 127.0.0.1."""
import csv
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from dcsr.data.formats import read_biencoder
from test_workflow import CI_TIMEOUT, dry_run_job_counts, run_bounded

# The matrix of config/paper.yaml, table by table (the README's "Paper scale" lists it too).
DATASETS = ["nq", "trivia", "squad", "wq", "curated"]
SINGLE = {m: [f"{m}-{d}" for d in ("nq", "trivia", "squad")] for m in ("dpr", "dcsr")}  # Table 2 Single
MULTI = ["dpr-multi", "dcsr-multi"]                                                      # Table 2 Multi
HARD = ["dpr-nq-dprhard", "dcsr-nq-dprhard", "dcsr-nq-dcsrhard", "dcsr-trivia-dcsrhard"]  # Tables 3, 5
RECIPE = ["dpr-nq-dprhard-recipe"]  # Table 3: DPR's own recipe, NQ + the adversarial file
SAMPLING = [f"dcsr-{d}-bm25x{n}" for n in (1, 2) for d in ("nq", "trivia", "squad")]     # Table 4
DPR_PRIOR = [f"att-dpr-{d}" for d in DATASETS]                                           # attribution, DPR
DCSR_PRIOR = [f"dcsr-{d}" for d in DATASETS]                                             # attribution, DCSR
SWEEP = [f"att-dpr-{d}-{p}pct" for d in ("nq", "trivia", "squad") for p in (10, 25, 40, 55, 70, 85)]
SWEEP_CI = ["att-dpr-nq-25pct", "att-dpr-nq-70pct"]  # config/paper-mini-ci.yaml
MODELS = set(SINGLE["dpr"] + SINGLE["dcsr"] + MULTI + HARD + RECIPE + SAMPLING + DPR_PRIOR + DCSR_PRIOR + SWEEP)

# (passage encoder, corpus) pairs: the shard jobs of each pair are its corpus's shards
ON_WIKI = set(SINGLE["dpr"] + SINGLE["dcsr"] + MULTI + ["dpr-nq-dprhard", "dcsr-nq-dcsrhard", "dcsr-trivia-dcsrhard"] + RECIPE
              + DPR_PRIOR + DCSR_PRIOR + SWEEP)                      # Tables 2, 3, 7 (21M), 8; attribution
ON_1OF20 = set(SINGLE["dpr"] + SINGLE["dcsr"] + SAMPLING + HARD)     # Tables 4, 5, 6, 7 (1.05M: the same 1/20)
ON_FIRST = {"dpr-nq", "dpr-trivia", "dcsr-nq", "dcsr-trivia"}        # Table 7, the first 0.1M


def attribution_pairs(sweep=SWEEP):
    """The attribution pairs: each family's K x K on the 5 test sets; each sweep encoder against the
    100% family on its dataset, both ways, and its index with every test set's own question encoder."""
    pairs = {(q, p, t) for prior in (DPR_PRIOR, DCSR_PRIOR) for q in prior for p in prior for t in DATASETS}
    for m in sweep:
        d = m.split("-")[2]
        pairs |= {(m, p, d) for p in DPR_PRIOR} | {(q, m, d) for q in DPR_PRIOR} | {(f"att-dpr-{t}", m, t) for t in DATASETS}
    return pairs


def expected_runs():
    """Dense (question encoder, passage encoder, test set) runs: the tables' cells and the
    attribution pairs."""
    t2 = {(m, m, d) for fam in SINGLE.values() for m, d in zip(fam, ("nq", "trivia", "squad"))}
    t2 |= {(m, m, d) for m in MULTI for d in ("nq", "trivia", "squad")}
    t3 = {("dpr-nq-dprhard",) * 2 + ("nq",), ("dcsr-nq-dcsrhard",) * 2 + ("nq",), ("dcsr-trivia-dcsrhard",) * 2 + ("trivia",),
          ("dpr-nq-dprhard-recipe",) * 2 + ("nq",)}
    t4 = {(m, m, f"{m.split('-')[1]}-1of20") for m in SINGLE["dpr"] + SINGLE["dcsr"] + SAMPLING}
    t5 = {(m, m, f"{m.split('-')[1]}-1of20") for m in HARD + ["dpr-nq", "dpr-trivia"]}
    t6 = {(m, m, "trivia-1of20") for m in SINGLE["dpr"] + SINGLE["dcsr"]}
    t7 = {(m, m, f"{m.split('-')[1]}-{size}") for m in ON_FIRST for size in ("first0.1m", "1of20")}  # 1.05M: t4's runs
    t7 |= {(m, m, m.split("-")[1]) for m in ON_FIRST}
    t8 = {(m, m, d) for m in ("dpr-squad", "dcsr-squad") for d in ("squad", "squad-dev")}
    return t2 | t3 | t4 | t5 | t6 | t7 | t8 | attribution_pairs()


def shard_jobs(shards_wiki, shards_1of20, shards_first01):
    return len(ON_WIKI) * shards_wiki + len(ON_1OF20) * shards_1of20 + len(ON_FIRST) * shards_first01


def check_counts(counts, shards):
    assert counts["download_resource"] == 17  # the corpus, 5 x (train, dev), NQ adv-hn, 5 test sets
    assert counts["subset_corpus"] == 2 and counts["split_sentences"] == 3
    assert counts["passage_store"] == 3  # one per corpus: runs are scored from it (wiki, the 1/20 = first 1.05M, first 0.1M)
    assert counts["train_biencoder"] == len(MODELS) == 44
    assert counts["embed_questions"] == len(MODELS)  # every model is some table's or pair's question encoder
    assert counts["merge_training_sets"] == len(MULTI + RECIPE)
    assert counts["mine_dense_negatives"] == 2  # DCSR-hard: dcsr-nq and dcsr-trivia mine their own training sets
    assert counts["sample_training_set"] == len(SWEEP)
    assert counts["make_dev_questions"] == 1  # SQuAD dev as a test set (Table 8)
    assert counts["search_bm25"] == counts["evaluate_topk"] == 5  # BM25 on the 5 test sets (Table 2, attribution)
    assert counts["merge_runs"] == len(expected_runs()) == 541
    for rule in ("embed_shard", "index_shard", "search_shard"):
        assert counts[rule] == shard_jobs(*shards), rule
    assert counts["make_table"] == 7  # DCSR Tables 2-8
    # every training set: 5 datasets, nq-advhn, nq+trivia+squad (DCSR's Multi), nq+trivia+wq+curated (DPR's), nq+nq-advhn
    assert counts["plot_validation"] == 9
    for rule in ("make_table1", "make_appendix_b", "make_coverage_table", "collect_pair_matrix",
                 "make_attribution_table2", "make_attribution_table4", "plot_data_efficiency", "compare_families"):
        assert counts[rule] == 1, rule
    assert counts["plot_marginalization"] == 2


def test_paper_config_dry_run_is_the_experiment_matrix(repo, tmp_path):
    cfg = yaml.safe_load((repo / "config" / "paper.yaml").read_text())
    assert set(cfg["models"]) | set(SWEEP) == MODELS
    counts = dry_run_job_counts(repo, tmp_path, str(repo / "config" / "paper.yaml"))
    # 21,015,324 passages at <= 1M per shard: 22; the 1/20, the first 1,050,768: 2; the first 0.1M: 1
    check_counts(counts, (22, 2, 1))
    assert not (tmp_path / "downloads").exists()  # a dry run downloads nothing


@pytest.mark.parametrize("name", ["paper.yaml", "paper-dpr.yaml", "paper-attribution.yaml"])
def test_the_paper_configs_clip_the_global_gradient_as_dpr_clips_each_gpus_share(repo, name):
    """DPR's code (train_dense_encoder.py) takes the loss over the global batch on every GPU, lets
    DDP average the gradients (each GPU then holds the global gradient / 8) and clips that at 2.0;
    we clip the global gradient itself, whatever the process count (two processes train as one:
    test_train.py::test_two_processes_match_one), so DPR's recipe is 2.0 x its 8 GPUs (128 questions / 16 a GPU)."""
    train = yaml.safe_load((repo / "config" / name).read_text())["train"]
    dpr_gpus = train["batch_size"] * train["gpus"] // 16
    assert (train["batch_size"], train["gpus"], dpr_gpus) == (16, 8, 8)
    assert train["max_grad_norm"] == 2.0 * dpr_gpus
    # DPR ranks each GPU's share of the dev questions among that GPU's passages (validate_average_rank)
    assert train["val_av_rank_shards"] == dpr_gpus


@pytest.mark.parametrize("name", ["paper.yaml", "paper-dpr.yaml", "paper-attribution.yaml"])
def test_the_paper_configs_feed_the_encoders_as_dpr_and_dcsr(repo, name):
    """DPR's and DCSR's code (BiEncoder.create_biencoder_input: ctx_segments = torch.zeros_like)
    feed every token type 0, a passage's text included (the tokenizer's pair gives the text type
    1), and their questions through normalize_question (JsonQADataset._process_query, the
    retriever's QASrc._process_question)."""
    train = yaml.safe_load((repo / "config" / name).read_text())["train"]
    assert (train["token_types"], train["question_text"]) == ("zeros", "dpr")


def test_paper_mini_is_the_same_dag(repo, tmp_path):
    """The overlay changes sizes, not the DAG: the same rules with the same counts, but for
    the shards (578 passages at <= 600 per shard: one shard per corpus). CI's cut of it
    (config/paper-mini-ci.yaml: the sweep on one dataset at two fractions) plans every rule of it,
    with fewer sweep models and their jobs only."""
    mini = [str(repo / "config" / "paper.yaml"), str(repo / "config" / "paper-mini.yaml")]
    counts = dry_run_job_counts(repo, tmp_path, *mini)
    check_counts(counts, (1, 1, 1))
    cut = dry_run_job_counts(repo, tmp_path, *mini, str(repo / "config" / "paper-mini-ci.yaml"))
    assert set(cut) == set(counts) and cut["total"] < 0.7 * counts["total"]
    fewer = len(SWEEP) - len(SWEEP_CI)
    for rule, jobs in counts.items():
        expected = {"train_biencoder": jobs - fewer, "embed_questions": jobs - fewer, "embed_shard": jobs - fewer,
                    "index_shard": jobs - fewer, "search_shard": jobs - fewer, "sample_training_set": len(SWEEP_CI),
                    "merge_runs": jobs - len(attribution_pairs()) + len(attribution_pairs(SWEEP_CI)),
                    "total": cut["total"]}.get(rule, jobs)
        assert cut[rule] == expected, rule


def read_csv(path: Path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow
def test_paper_mini_runs_end_to_end(repo, tmp_path):
    """Every table and figure of both papers from miniature DPR files downloaded from 127.0.0.1, on
    CI's cut of the miniature DAG (every rule; the sweep's models of one dataset at two fractions)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1",
           "DCSR_CACHE": str(tmp_path / "cache")}
    work = tmp_path / "pm"
    r = run_bounded([sys.executable, str(repo / "workflow" / "scripts" / "run_paper_mini.py"), "--workdir", str(work),
                     "--overlay", str(repo / "config" / "paper-mini-ci.yaml"), "--", "--cores", "2", "--quiet", "rules"],
                    CI_TIMEOUT, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-5000:]
    check_paper_mini_outputs(repo, work)


def check_paper_mini_outputs(repo, work, sweep=SWEEP_CI):
    results = work / "results"
    # the downloads went through the lock file, one entry per file with its size and sha256
    lock = json.loads((work / "downloads" / "downloads.lock.json").read_text())
    assert len(lock) == 17 and all(e["size"] > 0 and len(e["sha256"]) == 64 for e in lock.values())
    paper = yaml.safe_load((repo / "config" / "paper_numbers.yaml").read_text())
    for n in range(2, 9):
        rows = read_csv(results / "tables" / f"dcsr_table{n}.csv")
        assert rows and all(r["ours"] != "" for r in rows), n
        # the paper's numbers beside ours, for every row the paper has
        with_paper = [r for r in rows if r["paper"]]
        assert with_paper, n
        assert any(r["paper_source"].startswith(paper[f"dcsr_table{n}"]["source"]) for r in with_paper), n
    t2 = {(r["row"], r["test_set"], r["metric"]): r for r in read_csv(results / "tables" / "dcsr_table2.csv")}
    assert t2[("DCSR (Single)", "squad", "top20")]["paper"] == "63.7"
    # BM25's paper cells come from the attribution paper's Table 2, whose Trivia cell looks swapped: said under it
    assert t2[("BM25", "trivia", "top20")]["paper"] == "62.4"
    assert "- Note: the attribution paper's BM25 cells on Trivia" in (results / "tables" / "dcsr_table2.md").read_text()
    t7 = {(r["row"], r["test_set"]) for r in read_csv(results / "tables" / "dcsr_table7.csv")}
    assert ("DPR 0.10M", "nq (nq-first0.1m)") in t7 and ("DCSR 21.0M", "trivia") in t7
    # Table 7's 1.05M rows are Table 4's runs on the 1/20, the first 1.05M, as the paper's cells are equal
    t4 = {(r["row"], r["test_set"], r["metric"]): r["ours"] for r in read_csv(results / "tables" / "dcsr_table4.csv")}
    t7_cells = {(r["row"], r["test_set"], r["metric"]): r["ours"] for r in read_csv(results / "tables" / "dcsr_table7.csv")}
    for metric in ("top20", "top100"):
        assert t7_cells[("DPR 1.05M", "nq (nq-1of20)", metric)] == t4[("DPR", "nq (nq-1of20)", metric)] != ""
    # the subsets are the sizes the config asks for, ids in corpus order
    first = [line.split("\t")[0] for line in (results / "data" / "wiki-first0.1m" / "psgs_w100.tsv").read_text().splitlines()[1:]]
    assert first == [str(i) for i in range(1, 61)]
    one20 = [line.split("\t")[0] for line in (results / "data" / "wiki-1of20" / "psgs_w100.tsv").read_text().splitlines()[1:]]
    assert one20 == [str(i) for i in range(1, 291)]  # the miniature's 1/20: its first 1.05M, 290 of 578
    # DCSR-hard trained on negatives its own checkpoint mined, sentence-specific
    mined = json.loads((results / "negatives" / "dcsr-nq" / "nq-train.json").read_text())
    assert mined and all("sentence" in c for r in mined for c in r["hard_negative_ctxs"])
    for name in ("table1_questions_per_passage", "dcsr_appendix_b", "attribution_table2", "attribution_table3",
                 "attribution_table4", "attribution_compare", "attribution_marginals-DPR", "attribution_marginals-DCSR"):
        assert read_csv(results / "tables" / f"{name}.csv"), name
        assert (results / "tables" / f"{name}.md").read_text().startswith("#"), name
    for fig in ("data_efficiency", "coverage", "attribution_marginals-DPR", "attribution_marginals-DCSR",
                "pair_matrix-DPR", "validation-nq", "validation-nq+trivia+squad", "validation-nq+trivia+wq+curated"):
        assert (results / "figures" / f"{fig}.png").stat().st_size > 1000, fig
    # the models trained and encoded as DPR's and DCSR's code: every token type 0, their question text
    metas = [json.loads(p.read_text()) for p in (results / "models").glob("*/dcsr.json")]
    assert {(m["token_types"], m["question_text"]) for m in metas} == {("zeros", "dpr")}
    # DCSR's Multi validates on SQuAD's dev set alone (dev_on: squad), as DCSR's train_multiset.sh;
    # DPR's multiset model (NQ, Trivia, WQ, TREC) on its four dev sets
    def dev_questions(*files):
        return [r["question"] for f in files for r in read_biencoder(work / "downloads" / f, False)]

    def merged_dev(model):
        return [r["question"] for r in read_biencoder(results / "train" / model / "dev.json", False)]

    assert merged_dev("dcsr-multi") == dev_questions("biencoder-squad1-dev.json.gz")
    assert merged_dev("dpr-multi") == dev_questions(*(f"biencoder-{d}-dev.json.gz" for d in
                                                      ("nq", "trivia", "webquestions", "curatedtrec")))
    pool = [line for line in (results / "logs" / "train_biencoder" / "dpr-multi.log").read_text().splitlines()
            if "4 training sets" in line]
    assert pool and "one shuffled pool (multiset_batches: mixed" in pool[0], pool
    # CuratedTREC's test question whose pattern does not compile (as 3 of DPR's file): never found, as
    # DPR scores it (bad_patterns: never_found), counted in every run's metrics and named in the logs
    curated = sorted((results / "metrics" / "wiki").glob("*/*/curated.json"))
    assert len(curated) > 10 and (results / "metrics" / "wiki" / "bm25" / "bm25" / "curated.json") in curated
    for path in curated:
        assert json.loads(path.read_text())["regex"] == {"bad_patterns": "never_found", "answers_never_found": 1,
                                                         "questions_never_found": 1}, path
        first = json.loads(path.with_suffix(".questions.jsonl").read_text().splitlines()[0])
        assert first["first_hit"] is None, path  # whatever the run retrieved
    bm25_log = (results / "logs" / "evaluate_topk" / "wiki" / "bm25" / "bm25" / "curated.log").read_text()
    assert "curatedtrec-test.qa.csv:1: answer 0 (" in bm25_log and "never found, as DPR's code scores it" in bm25_log
    # and said under the attribution tables over it (through the pair matrix's counts), as under a retrieval table
    for table in ("attribution_table2", "attribution_marginals-DPR", "attribution_compare"):
        md = (results / "tables" / f"{table}.md").read_text()
        assert md.count("do not compile after DPR's NFD normalization") == 1 and "1 of its " in md, table
    # every pair of the matrix was searched and scored
    matrix = read_csv(results / "attribution" / "pair_matrix.csv")
    assert len({(r["question_encoder"], r["passage_encoder"], r["test_set"]) for r in matrix
                if r["question_encoder"] != "bm25"}) == len(attribution_pairs(sweep))
