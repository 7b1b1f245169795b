"""BEIR-format collections as corpora and test sets (dcsr.data.beir), SQuAD written as one, and
the config that adds one to the attribution matrix (config/beir-example.yaml)."""

import copy
import csv
import json
import random
from pathlib import Path

import ir_measures
import pytest
import yaml
from snakemake.utils import validate

from dcsr.data.beir import (convert_corpus, convert_queries, read_beir_qrels, read_doc_ids, read_query_ids,
                            squad_to_beir, write_original_id_run)
from dcsr.data.formats import iter_passages, iter_qas, write_corpus, write_qas
from dcsr.data.runs import write_trec
from dcsr.errors import InputError
from dcsr.evaluation.metrics import evaluate_qrels_run, evaluate_run
from dcsr.evaluation.trec_eval import beir_run_by_question, measure_beir_run, measure_run, read_qrels
from dcsr.fixtures.beir import write_demo_beir
from dcsr.pipeline.squad_beir import check_same_corpus, check_same_questions
from test_workflow import snakemake

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"


def lexical_run(questions, passages, k=100):
    """A small in-process retriever: idf-weighted shared tokens, ranked; scores strictly fall with
    the rank (1000 - rank), so that no tie lets trec_eval's docid order differ from ours."""
    import math

    from dcsr.data.answers import tokens

    index = {}
    for pid, text in passages:
        for t in set(tokens(text)):
            index.setdefault(t, []).append(pid)
    idf = {t: math.log(len(passages) / len(ps)) for t, ps in index.items()}
    order = [pid for pid, _ in passages]
    run = {}
    for q, question in enumerate(questions):
        score = dict.fromkeys(order, 0.0)
        for t in set(tokens(question)):
            for pid in index.get(t, ()):
                score[pid] += idf[t]
        ranked = sorted(order, key=lambda p: (-score[p], p))[:k]
        run[q] = [(pid, 1000.0 - r) for r, pid in enumerate(ranked)]
    return run


@pytest.fixture(scope="module")
def squad_beir(tmp_path_factory):
    """SQuAD's vendored articles as a BEIR folder, its DPR-format twin and one run of its test
    questions (ids of the DPR conversion, which are the BEIR corpus's _ids)."""
    from dcsr.data.squad import squad_to_dpr

    tmp = tmp_path_factory.mktemp("squad-beir")
    stats = squad_to_beir(SQUAD, tmp / "beir")
    data = squad_to_dpr(SQUAD)
    write_corpus(tmp / "corpus.tsv", data.passages)
    write_qas(tmp / "test.qa.csv", data.test)
    run = lexical_run([qa.question for qa in data.test], [(p.id, p.text) for p in data.passages])
    write_trec(tmp / "run.trec", run, tag="lexical")
    return tmp, stats, run


def test_squad_as_beir_success_at_100_is_answer_match_top_100(squad_beir):
    """qrels from DPR's answer matching: on the same run, ir_measures' Success@k against them is
    our answer-match top-k, question by question; Recall@100 (the share of the relevant passages
    found) is another number, reported beside it. On the demo's own runs: tests/test_demo.py
    (check_squad_as_beir)."""
    tmp, stats, run = squad_beir
    beir = tmp / "beir"
    assert "DPR's string matching" in (beir / "README.md").read_text()
    assert stats["queries"] == 1907 and stats["queries_with_qrels"] < stats["queries"]
    top = evaluate_run(tmp / "run.trec", tmp / "test.qa.csv", tmp / "corpus.tsv", tmp / "m.json", tmp / "q.jsonl",
                       ks=(1, 20, 100))
    qids = [json.loads(line)["_id"] for line in (beir / "queries.jsonl").read_text().splitlines()]
    qrels = read_beir_qrels(beir / "qrels" / "test.tsv")
    original = {qids[q]: [(str(pid), s) for pid, s in hits] for q, hits in run.items()}
    # every question of the test set in the mean (one without qrels counts 0, as it is a miss in top-k)
    measured = measure_run(original, qrels, ["Success@100", "Success@20", "Success@1", "R@100"], questions=len(qids))
    assert measured["Success@100"] == pytest.approx(top["top100"], abs=1e-9)
    assert measured["Success@20"] == pytest.approx(top["top20"], abs=1e-9)
    assert measured["Success@1"] == pytest.approx(top["top1"], abs=1e-9)
    per_question = {m.query_id: m.value for m in ir_measures.iter_calc(
        [ir_measures.parse_measure("Success@100")],
        [ir_measures.Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()],
        [ir_measures.ScoredDoc(q, d, s) for q, hits in original.items() for d, s in hits])}
    first_hits = [json.loads(line)["first_hit"] for line in (tmp / "q.jsonl").read_text().splitlines()]
    assert [per_question.get(q, 0.0) for q in qids] == [float(h is not None and h <= 100) for h in first_hits]
    # recall is the share of the relevant passages, which are many for a SQuAD answer: not top-k
    assert measured["R@100"] < measured["Success@100"] - 10
    print(f"Success@100 {measured['Success@100']:.2f} = top-100 {top['top100']:.2f}; R@100 {measured['R@100']:.2f}")


def test_a_run_of_the_test_set_is_measured_against_beir_qrels_in_its_own_ranking(squad_beir):
    """measure_beir_run: a run of the pipeline's test set (question i, passage ids) against the
    BEIR qrels file, every question in the mean. It measures the run's ranking, its rank column,
    which top-k reads, even where every score is the same; order="score" reads the scores, as
    trec_eval reads the file, and orders equal ones by docid."""
    tmp, _stats, run = squad_beir
    beir = tmp / "beir"
    query_ids = check_same_questions(beir, tmp / "test.qa.csv")
    write_trec(tmp / "flat.trec", {q: [(pid, 1.0) for pid, _ in hits] for q, hits in run.items()}, tag="flat")
    top = evaluate_run(tmp / "flat.trec", tmp / "test.qa.csv", tmp / "corpus.tsv", tmp / "flat.json",
                       ks=(1, 20, 100))
    ours = measure_beir_run(tmp / "flat.trec", query_ids, beir / "qrels" / "test.tsv")
    for k in (1, 20, 100):
        assert ours[f"Success@{k}"] == pytest.approx(top[f"top{k}"], abs=1e-9)
    assert 0 < ours["nDCG@10"] <= 100 and ours["R@100"] < ours["Success@100"]
    by_docid = measure_beir_run(tmp / "flat.trec", query_ids, beir / "qrels" / "test.tsv", order="score")
    assert by_docid["Success@100"] == pytest.approx(top["top100"], abs=1e-9)  # the same 100 hits
    assert by_docid["Success@1"] < top["top1"] - 5  # the first hit is the largest docid, not the run's


def test_each_questions_value_is_what_the_mean_is_made_of(squad_beir):
    """beir_run_by_question: nDCG@10 of each test question, in order, 0 where the qrels judge
    nothing; their mean is measure_beir_run's, in either order of ties."""
    tmp, stats, _run = squad_beir
    beir = tmp / "beir"
    query_ids = check_same_questions(beir, tmp / "test.qa.csv")
    judged = read_beir_qrels(beir / "qrels" / "test.tsv")
    for order in ("rank", "score"):
        values = beir_run_by_question(tmp / "run.trec", query_ids, beir / "qrels" / "test.tsv", order=order)["nDCG@10"]
        mean = measure_beir_run(tmp / "run.trec", query_ids, beir / "qrels" / "test.tsv", ["nDCG@10"], order=order)
        assert len(values) == len(query_ids) and 100 * sum(values) / len(values) == pytest.approx(mean["nDCG@10"],
                                                                                                   abs=1e-9)
        assert all(v == 0.0 for q, v in zip(query_ids, values) if q not in judged)


def test_the_page_compares_dcsr_with_dpr_each_with_bm25_and_zero_shot_with_in_domain():
    """comparison_pairs and paired_comparisons on made-up per-question values: the claims
    ledger's paired comparison of each pair (compare_paired, seeded), Holm over all of them."""
    from dcsr.evaluation.claims import compare_paired, holm
    from dcsr.pipeline.squad_beir import ScoredRun, comparison_pairs, paired_comparisons

    models = {"untrained": {"method": "dpr", "init": "minilm"},
              **{f"{m}-{g}": {"method": m, "init": "minilm", "train_on": f"squad-{g}"}
                 for g in "ab" for m in ("dpr", "dcsr")}}
    rng = random.Random(3)
    rows = [ScoredRun(r, d, models.get(r, {}).get("train_on"), f"{r}.{d}.trec", {}, {}, {},
                      [rng.random() for _ in range(40)])
            for d in ("squad-a", "squad-b") for r in ("bm25", *models)]
    pairs = [(kind, base.retriever, other.retriever, other.dataset) for kind, base, other in
             comparison_pairs(rows, models)]
    assert pairs[:4] == [("DCSR vs DPR", f"dpr-{g}", f"dcsr-{g}", d) for d in ("squad-a", "squad-b") for g in "ab"]
    assert [p[2] for p in pairs if p[0] == "vs BM25" and p[3] == "squad-a"] == list(models)
    assert [p[1:] for p in pairs if p[0] == "zero-shot vs in-domain"] == [
        ("dpr-a", "dpr-b", "squad-a"), ("dcsr-a", "dcsr-b", "squad-a"),
        ("dpr-b", "dpr-a", "squad-b"), ("dcsr-b", "dcsr-a", "squad-b")]
    found = paired_comparisons(rows, models, seed=1)
    assert len(found) == len(pairs) == 4 + 10 + 4
    by = {(r.retriever, r.dataset): r for r in rows}
    first = found[0]
    assert first.comparison == compare_paired(by["dpr-a", "squad-a"].by_question, by["dcsr-a", "squad-a"].by_question,
                                              seed=1)
    assert [c.p_holm for c in found] == holm([c.comparison.p_value for c in found])


def test_the_comparisons_table_writes_p_and_bounds_on_the_side_its_reading_took():
    """A Holm p of 0.0496 is not written 0.05, nor a lower bound of 0.004 written +0.00, beside
    a reading of "higher" that needed p < 0.05 and a bound above 0."""
    from dcsr.evaluation.claims import Comparison
    from dcsr.pipeline.squad_beir import PairedComparison, comparisons_table

    c = Comparison(questions=100, baseline=50.0, method=50.5, difference=0.5, low=0.004, high=1.0,
                   only_baseline=10, only_method=25, p_value=0.018)
    pc = PairedComparison("vs BM25", "squad-a", "bm25", "dpr", c, p_holm=0.0496)
    assert pc.reading == "higher"
    row = comparisons_table([pc]).splitlines()[-1]
    assert row == "| dpr - bm25 | vs BM25 | squad-a | +0.50 | [+0.004, +1.00] | 10 / 25 | 0.018 | 0.0496 | higher |"


def test_the_beir_folder_must_hold_the_runs_questions_in_order_and_its_corpus(squad_beir):
    tmp, _stats, _run = squad_beir
    qas = list(iter_qas(tmp / "test.qa.csv"))
    write_qas(tmp / "moved.qa.csv", qas[1:] + qas[:1])
    with pytest.raises(InputError, match="not the 1907 questions of .* in order .first difference at question 0"):
        check_same_questions(tmp / "beir", tmp / "moved.qa.csv")
    check_same_corpus(tmp / "beir", tmp / "corpus.tsv")
    write_corpus(tmp / "fewer.tsv", list(iter_passages(tmp / "corpus.tsv"))[:-1])
    with pytest.raises(InputError, match="1935 documents are not the 1934 passages"):
        check_same_corpus(tmp / "beir", tmp / "fewer.tsv")


def test_the_pipeline_reads_a_beir_folder_and_scores_with_its_original_ids(squad_beir):
    """The folder as the pipeline's corpus (integer ids and the mapping back) and test set (the
    judged queries, no answers); a run in the pipeline's ids is scored against the qrels with the
    original ids, and the run written with them (original_id_run) gives ir_measures the same."""
    tmp, _stats, run = squad_beir
    beir, out = tmp / "beir", tmp / "pipeline"
    n = convert_corpus(beir, out / "psgs_w100.tsv", out / "beir-doc-ids.tsv")
    passages = list(iter_passages(out / "psgs_w100.tsv"))
    assert n == len(passages) == 1935 and [p.id for p in passages] == list(range(n))
    doc_ids = read_doc_ids(out / "beir-doc-ids.tsv")
    assert doc_ids[0] == "1"  # the DPR conversion's passage 1, first in corpus.jsonl
    judged = convert_queries(beir, "test", out / "beir-doc-ids.tsv", out / "t.queries.tsv", out / "t.query-ids.tsv",
                             out / "t.qrels")
    queries = list(iter_qas(out / "t.queries.tsv"))
    qids = read_query_ids(out / "t.query-ids.tsv")
    assert len(queries) == len(qids) == judged == 1884 and all(qa.answers == [] for qa in queries)
    # the lexical run of the DPR questions, as a run of the pipeline's test set: its questions, its ids
    all_ids = [json.loads(line)["_id"] for line in (beir / "queries.jsonl").read_text().splitlines()]
    position = {q: i for i, q in enumerate(all_ids)}
    to_pipeline = {int(doc): pid for pid, doc in doc_ids.items()}
    ours = {i: [(to_pipeline[pid], s) for pid, s in run[position[q]]] for i, q in enumerate(qids)}
    write_trec(out / "run.trec", ours, tag="lexical")
    metrics = evaluate_qrels_run(out / "run.trec", out / "t.queries.tsv", out / "t.qrels", out / "t.query-ids.tsv",
                                 out / "beir-doc-ids.tsv", out / "metrics.json", out / "questions.jsonl")
    assert metrics["judged_by"] == "qrels" and metrics["questions"] == 1884 and "top100" not in metrics
    qrels = read_beir_qrels(beir / "qrels" / "test.tsv")
    original = {q: [(str(pid), s) for pid, s in run[position[q]]] for q in qids}
    expected = measure_run(original, qrels, ["nDCG@10", "R@100", "RR@10"], questions=len(qids))
    for m in ("nDCG@10", "R@100", "RR@10"):
        assert metrics[f"{m} (qrels)"] == pytest.approx(expected[m], abs=1e-9)
    # the run with its original ids, read by ir_measures from the file, against BEIR's own qrels file
    assert write_original_id_run(out / "run.trec", out / "t.query-ids.tsv", out / "beir-doc-ids.tsv",
                                 out / "run.original-ids.run") == sum(len(h) for h in ours.values())
    from_file = ir_measures.calc_aggregate([ir_measures.parse_measure(m) for m in ("nDCG@10", "R@100", "RR@10")],
                                           list(ir_measures.read_trec_qrels(str(out / "t.qrels"))),
                                           list(ir_measures.read_trec_run(str(out / "run.original-ids.run"))))
    for m, v in from_file.items():
        assert 100 * v == pytest.approx(metrics[f"{m} (qrels)"], abs=1e-9)
    assert read_qrels(out / "t.qrels") == {q: qrels[q] for q in qids}
    # per question: the relevant hits marked, the first one's rank
    rec = json.loads((out / "questions.jsonl").read_text().splitlines()[0])
    assert rec["query_id"] == qids[0] and rec["answers"] == [] and rec["judged_by"] == "qrels"
    assert rec["has_answer"] == [doc_ids[pid] in qrels[qids[0]] for pid in rec["hits"]]


def test_a_queries_file_is_not_scored_by_answers(tmp_path):
    write_qas(tmp_path / "x.queries.tsv", [])
    (tmp_path / "x.queries.tsv").write_text("what is it?\t[]\n")
    (tmp_path / "run.trec").write_text("0 Q0 1 1 1.0 t\n")
    with pytest.raises(InputError, match="judged by qrels"):
        evaluate_run(tmp_path / "run.trec", tmp_path / "x.queries.tsv", tmp_path / "c.tsv", tmp_path / "m.json")
    # and an empty answer list stays an error in any other question file
    (tmp_path / "qa.csv").write_text("what is it?\t[]\n")
    with pytest.raises(InputError, match="has no answers"):
        list(iter_qas(tmp_path / "qa.csv"))


# --------------------------------------------------------------------------- the config


def deep_merge(base: dict, over: dict) -> dict:
    """Snakemake's merge of --configfile overlays: mappings key by key, anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def example_config(**over) -> dict:
    config = {}
    for name in ("generated.yaml", "beir-example.yaml"):
        config = deep_merge(config, yaml.safe_load((REPO / "config" / name).read_text()))
    config = deep_merge(config, over)
    validate(config, str(REPO / "config" / "schema.yaml"))
    return config


@pytest.fixture()
def in_workdir(tmp_path, monkeypatch):
    """A working directory holding the example's BEIR folder (generated: dcsr.fixtures.beir)."""
    write_demo_beir(tmp_path / "beir" / "squad-dev36")
    monkeypatch.chdir(tmp_path)
    return tmp_path


class Wildcards(dict):
    __getattr__ = dict.__getitem__


def test_the_example_adds_a_zero_shot_beir_test_set_to_the_matrix_and_a_table(in_workdir):
    from dcsr.pipeline.plan import Plan

    plan = Plan(example_config(), basedir=REPO)
    assert plan.beir_corpora() == ["squad-beir"] and plan.beir_datasets() == ["squad-beir"]
    assert plan.dataset_file("squad-beir", "test") == "results/data/squad-beir/squad-beir-test.queries.tsv"
    assert "squad-beir" not in plan.source_datasets()  # no training or dev set: not in Table 1 / Appendix B
    assert "squad-beir.dev" not in plan.config["datasets"]  # no dev questions for the hybrid's weight
    # every family's encoder pair is searched on it, zero-shot
    cells = plan.attribution_cells()
    assert ("dpr-trivia", "dcsr", "squad-beir") not in cells and ("dpr-trivia", "dpr-chat", "squad-beir") in cells
    assert plan.attribution_spec()["qrels_test_sets"] == ["squad-beir"]
    # scored against its qrels with the original ids, which scoring reads as inputs
    wc = Wildcards(corpus="squad-beir", qmodel="dpr", pmodel="dpr", dataset="squad-beir")
    assert plan.gold_args(wc) == ["--qrels", "results/data/squad-beir/squad-beir-test.qrels",
                                  "--query-ids", "results/data/squad-beir/squad-beir-test.query-ids.tsv",
                                  "--doc-ids", "results/data/squad-beir/beir-doc-ids.tsv"]
    assert set(plan.judgment_inputs(wc)) == {"qrels", "query_ids", "doc_ids"}
    assert plan.gold_args(Wildcards(dataset="encyclopedia")) == [] and plan.judgment_inputs(Wildcards(dataset="chat")) == {}
    # the runs with their original ids are targets, the hybrid's too; pooled qrels are not asked for it
    finals = plan.final_outputs()
    assert "results/runs/squad-beir/hybrid-rrf/dpr/dpr/squad-beir.original-ids.run" in finals
    assert "results/runs/squad-beir/dpr-chat/dpr-trivia/squad-beir.original-ids.run" in finals
    assert plan.original_id_inputs(Wildcards(corpus="squad-beir", retriever="bm25/bm25", dataset="squad-beir"))["run"] \
        == "results/runs/squad-beir/bm25/bm25/squad-beir.trec"


@pytest.mark.parametrize("over, key, message", [
    ({"models": {"dpr-beir": {"method": "dpr", "init": "minilm", "train_on": "squad-beir"}}},
     "config: models.dpr-beir.train_on",
     "is a BEIR collection judged by qrels alone, with no training set: DCSR needs answer spans"),
    ({"claims": [{"claim": "x", "test_set": "squad-beir", "metric": "top20", "baseline": "bm25", "method": "dpr"}]},
     "config: claims.0.test_set", "is a BEIR test set, judged by qrels: a claim compares top-k answer recall"),
    ({"tables": {"beir": {"rows": [{"label": "L", "retriever": "hybrid", "question": "dpr", "passage": "dpr"}]}}},
     "config: tables.beir.rows.0", "a hybrid row with linear fusion chooses its weight on dev questions"),
    ({"datasets": {"squad-beir": {"corpus": "squad-beir", "beir": {"split": "dev"}}}}, "config: datasets.squad-beir.beir.split",
     "qrels/dev.tsv' does not exist"),
    ({"corpora": {"squad-beir": {"beir": "beir/nowhere"}}}, "config: corpora.squad-beir.beir", "is not a folder"),
    ({"search": {"k": 20}, "evaluate": {"ks": [1, 5, 20]}}, "config: search.k",
     "is 20, but the tables read hits to rank 101 (R@100 against a BEIR test set's qrels, over 100 documents once a "
     "hit that is the query itself is left out, as BEIR fetches top_k + 1): a run of 20 hits would count every "
     "deeper rank as a miss; raise search.k to at least 101"),
    ({"search": {"k": 100}}, "config: search.k", "is 100, but the tables read hits to rank 101"),
    ({"datasets": {"squad-beir": {"corpus": "demo", "beir": {"split": "test"}}}}, "config: datasets.squad-beir.beir",
     "corpus 'demo' has no 'beir' folder"),
    ({"datasets": {"squad-beir": {"corpus": "squad-beir", "beir": {"split": "test"}, "match": "string"}}},
     "config: datasets.squad-beir.match", "is judged by its qrels, not by answer matching"),
])
def test_what_a_beir_test_set_cannot_be_is_refused_at_dag_build(in_workdir, over, key, message):
    from dcsr.pipeline.plan import Plan

    config = example_config(**over)
    if "claims" in over:
        config["claims"] = over["claims"]
    if "tables" in over:
        config["tables"]["beir"]["rows"] = over["tables"]["beir"]["rows"]
    with pytest.raises(InputError) as e:
        Plan(config, basedir=REPO)
    assert str(e.value).startswith(key + ": ") and message in str(e.value)


def test_training_on_a_beir_collection_with_train_qrels_is_refused_saying_why(in_workdir):
    from dcsr.pipeline.plan import Plan

    write_demo_beir(in_workdir / "beir" / "squad-dev36", train_qrels=True)
    for method in ("dcsr", "dpr"):
        model = {"method": method, "init": "minilm", "train_on": ["squad-beir"]}
        with pytest.raises(InputError) as e:
            Plan(example_config(models={"on-beir": model}), basedir=REPO)
        assert str(e.value).startswith("config: models.on-beir.train_on.0: dataset 'squad-beir' is a BEIR collection; "
                                       "its training qrels (qrels/train.tsv)")
        assert "DCSR needs answer spans" in str(e.value) and "DPR training from qrels is not implemented" in str(e.value)


def test_the_example_config_plans_its_jobs_in_a_dry_run(repo, in_workdir):
    r = snakemake(repo, in_workdir, "-n", "--quiet", "rules", "--configfile", str(repo / "config" / "generated.yaml"),
                  str(repo / "config" / "beir-example.yaml"), timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    counts = {p[0]: int(p[1]) for p in (line.split() for line in out.splitlines()) if len(p) == 2 and p[1].isdigit()}
    assert counts["prepare_beir"] == 1 and counts["prepare_beir_dataset"] == 1
    # BM25, DPR and its RRF hybrid of the table, and every attribution pair (3 x 3 of each family, BM25)
    assert counts["original_id_run"] == 1 + 1 + 1 + 2 * 9 - 1


# --------------------------------------------------------------------------- the attribution report


def test_the_pair_matrix_and_table_2_name_a_beir_test_sets_measures(tmp_path):
    from dcsr.attribution.inputs import AttributionSpec, read_pair_matrix, write_pair_matrix
    from dcsr.attribution.report import write_marginalization, write_tandem_table

    families = {"DPR": {"a": "dpr-a", "b": "dpr-b"}}
    cells, rng = [], random.Random(3)
    for q in ("dpr-a", "dpr-b", "bm25"):
        for p in ("dpr-a", "dpr-b", "bm25"):
            if (q == "bm25") != (p == "bm25"):
                continue
            for t in ("a", "b", "zs"):
                path = tmp_path / f"{q}-{p}-{t}.json"
                metrics = ({"questions": 9, "judged_by": "qrels", "nDCG@10 (qrels)": rng.uniform(0, 100),
                            "R@100 (qrels)": rng.uniform(0, 100), "RR@10 (qrels)": rng.uniform(0, 100)} if t == "zs"
                           else {"questions": 9, "top1": rng.uniform(0, 50), "top5": rng.uniform(50, 100)})
                path.write_text(json.dumps(metrics))
                cells.append((q, p, t, path))
    write_pair_matrix(cells, tmp_path / "matrix.csv")
    rows = list(csv.DictReader(open(tmp_path / "matrix.csv")))
    assert {r["metric"] for r in rows if r["test_set"] == "zs"} == {"nDCG@10 (qrels)", "R@100 (qrels)", "RR@10 (qrels)"}
    assert {r["metric"] for r in rows if r["test_set"] == "a"} == {"top1", "top5"}
    spec = AttributionSpec.from_dict({"test_sets": ["a", "b", "zs"], "metrics": ["top1", "top5"], "families": families,
                                      "qrels_test_sets": ["zs"]})
    matrix = read_pair_matrix(tmp_path / "matrix.csv")
    write_tandem_table(matrix, spec, REPO / "config" / "paper_numbers.yaml", tmp_path / "t2.csv", tmp_path / "t2.md")
    table = list(csv.DictReader(open(tmp_path / "t2.csv")))
    assert {r["metric"] for r in table if r["test_set"] == "zs"} == {"nDCG@10 (qrels)", "R@100 (qrels)", "RR@10 (qrels)"}
    average = {r["row"]: float(r["ours"]) for r in table if r["test_set"] == "Average" and r["metric"] == "top1"}
    a_b = {r["row"]: float(r["ours"]) for r in table if r["test_set"] in ("a", "b") and r["metric"] == "top1"}
    assert average["BM25"] == pytest.approx((matrix.score("bm25", "bm25", "a", "top1")
                                             + matrix.score("bm25", "bm25", "b", "top1")) / 2)
    assert a_b and "nDCG@10 (qrels) / R@100 (qrels) / RR@10 (qrels)" in (tmp_path / "t2.md").read_text()
    write_marginalization(matrix, spec, "DPR", tmp_path / "m.csv", tmp_path / "m.md", tmp_path / "m.png",
                          tmp_path / "h.png", tmp_path / "h.csv")
    heat = list(csv.DictReader(open(tmp_path / "h.csv")))
    assert {r["metric"] for r in heat if r["test_set"] == "zs"} == {"nDCG@10 (qrels)"}
    assert {r["metric"] for r in heat if r["test_set"] == "a"} == {"top1"}


# --------------------------------------------------------------------------- a real run


@pytest.mark.slow
def test_the_example_runs_bm25_dpr_and_a_hybrid_on_a_generated_beir_collection(repo, in_workdir, tiny_bert):
    """config/beir-example.yaml over config/generated.yaml and config/ci.yaml (tiny encoders), its
    table and its runs with original ids made for real (the full matrix is the end-to-end test's)."""
    results = in_workdir / "results"
    over = in_workdir / "over.yaml"
    over.write_text(yaml.safe_dump({"results": str(results), "encoders": {"tiny": str(tiny_bert)}}))
    runs = [results / "runs" / "squad-beir" / r / "squad-beir.original-ids.run"
            for r in ("bm25/bm25", "dpr/dpr", "hybrid-rrf/dpr/dpr")]
    r = snakemake(repo, in_workdir, "--cores", "2", "--configfile", str(repo / "config" / "generated.yaml"),
                  str(repo / "config" / "ci.yaml"), str(repo / "config" / "beir-example.yaml"), str(over),
                  "--", str(results / "tables" / "beir.md"), *map(str, runs))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    rows = list(csv.DictReader(open(results / "tables" / "beir.csv")))
    got = {(row["row"], row["test_set"], row["metric"]) for row in rows}
    assert ("BM25", "squad-beir", "nDCG@10 (qrels)") in got and ("BM25", "encyclopedia", "top20") in got
    assert not any(t == "squad-beir" and m.startswith("top") for _r, t, m in got)
    assert "Top-20 (answer match)" in (results / "tables" / "beir.md").read_text()
    qrels = list(ir_measures.read_trec_qrels(str(results / "data" / "squad-beir" / "squad-beir-test.qrels")))
    for run, label in zip(runs, ("BM25", "DPR (encyclopedia)", "BM25 + DPR (RRF)")):
        assert run.read_text().split()[0].startswith("test-")  # the collection's own query ids ...
        assert run.read_text().split()[2].startswith("demo-")  # ... and document ids
        measured = ir_measures.calc_aggregate([ir_measures.parse_measure("nDCG@10")], qrels,
                                              list(ir_measures.read_trec_run(str(run))))
        table = {row["metric"]: float(row["ours"]) for row in rows if row["row"] == label and row["test_set"] == "squad-beir"}
        assert 100 * next(iter(measured.values())) == pytest.approx(table["nDCG@10 (qrels)"], abs=0.005)


def test_a_hit_that_is_the_query_itself_is_left_out_as_beirs_evaluation_does(tmp_path):
    """In a collection whose queries are documents too (ArguAna, Quora), a query finds itself first;
    BEIR's evaluation (ignore_identical_ids=True, its default) and Pyserini's --remove-query drop such
    a hit. Query q1 is also document q1: with it dropped, q1's relevant d1 is first (nDCG@10 1.0, not
    1/log2(3)), in the metrics, the per-question records and measure_beir_run alike."""
    beir, out = tmp_path / "beir", tmp_path / "out"
    (beir / "qrels").mkdir(parents=True)
    out.mkdir()
    docs = [("q1", "the first query as a document"), ("d1", "the answer to q1"), ("d2", "the answer to q2")]
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in docs))
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "first?"}\n{"_id": "q2", "text": "second?"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    convert_corpus(beir, out / "psgs_w100.tsv", out / "doc-ids.tsv")
    convert_queries(beir, "test", out / "doc-ids.tsv", out / "t.queries.tsv", out / "q-ids.tsv", out / "q.qrels")
    write_trec(out / "run.trec", {0: [(0, 3.0), (1, 2.0), (2, 1.0)], 1: [(2, 3.0), (0, 2.0)]}, tag="t")
    metrics = evaluate_qrels_run(out / "run.trec", out / "t.queries.tsv", out / "q.qrels", out / "q-ids.tsv",
                                 out / "doc-ids.tsv", out / "m.json", out / "q.jsonl")
    assert metrics["nDCG@10 (qrels)"] == pytest.approx(100.0) and metrics["identical_ids_dropped"] == 1
    first = json.loads((out / "q.jsonl").read_text().splitlines()[0])
    assert (first["hits"], first["has_answer"], first["first_hit"]) == ([1, 2], [True, False], 1)
    doc_ids = read_doc_ids(out / "doc-ids.tsv")
    assert measure_beir_run(out / "run.trec", ["q1", "q2"], beir / "qrels" / "test.tsv", ["nDCG@10"],
                            doc_ids=doc_ids)["nDCG@10"] == pytest.approx(100.0)
    # the run written with the original ids holds the hits the numbers measure (trec_eval on it agrees)
    write_original_id_run(out / "run.trec", out / "q-ids.tsv", out / "doc-ids.tsv", out / "run.original-ids.run")
    lines = (out / "run.original-ids.run").read_text().split("\n")
    assert [line.split()[:3] for line in lines if line][:2] == [["q1", "Q0", "d1"], ["q1", "Q0", "d2"]]
    # a question outside the test set keeps its hits, for original_id_run to refuse naming it
    from dcsr.data.beir import drop_identical_ids

    assert drop_identical_ids({5: [(1, 1.0), (99, 0.4)]}, ["q0", "q1"], {1: "d1"}) == ({5: [(1, 1.0), (99, 0.4)]}, 0)


def test_collections_beir_loads_load_here_as_beir_reads_them(tmp_path, caplog):
    """What BEIR's own loader reads: FiQA's documents with neither title nor text (left out: nothing
    of them to match), ArguAna's qrel naming a document the corpus lacks (kept, so R@100 counts it
    as a relevant document no run retrieves, as pytrec_eval does in BEIR), and title-only documents
    (the title once, as text: BEIR encodes "title text".strip())."""
    beir, out = tmp_path / "beir", tmp_path / "out"
    (beir / "qrels").mkdir(parents=True)
    out.mkdir()
    docs = [{"_id": "d1", "title": "", "text": "Paris is the capital of France."},
            {"_id": "e1", "title": "", "text": ""},
            {"_id": "d2", "title": "Berlin", "text": ""},
            {"_id": "d3", "title": "Rome", "text": "Rome is the capital of Italy."}]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "capital of France?"}\n'
                                        '{"_id": "q2", "text": "capital of Germany?"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\tgone\t1\nq2\td2\t1\n"
                                              "q2\td3\t0\n")
    with caplog.at_level("WARNING"):
        assert convert_corpus(beir, out / "psgs_w100.tsv", out / "doc-ids.tsv") == 3
        convert_queries(beir, "test", out / "doc-ids.tsv", out / "t.queries.tsv", out / "t.query-ids.tsv",
                        out / "t.qrels")
    assert "1 documents with neither text nor title left out (the first: line 2, 'e1')" in caplog.text
    assert "1 of 4 judgments name a document the corpus lacks (the first: line 3, 'gone')" in caplog.text
    passages = {p.id: (p.title, p.text) for p in iter_passages(out / "psgs_w100.tsv")}
    assert read_doc_ids(out / "doc-ids.tsv") == {0: "d1", 1: "d2", 2: "d3"}
    assert passages[1] == ("", "Berlin")  # the title once, as text
    assert read_qrels(out / "t.qrels")["q1"] == {"d1": 1, "gone": 1}
    write_trec(out / "run.trec", {0: [(0, 2.0), (2, 1.0)], 1: [(1, 2.0), (2, 1.0)]}, tag="t")
    metrics = evaluate_qrels_run(out / "run.trec", out / "t.queries.tsv", out / "t.qrels", out / "t.query-ids.tsv",
                                 out / "doc-ids.tsv", out / "m.json")
    assert metrics["R@100 (qrels)"] == pytest.approx(75.0)  # q1 finds 1 of its 2 relevant documents, q2 its 1


def test_the_demo_s_conversion_command_converts_its_test_set(tmp_path):
    """tests/test_demo.py converts each SQuAD test set of the real-text default with the options
    prepare_squad_dataset had (dcsr.pipeline.squad_beir.conversion_command): the source as found,
    which the rule passes apart from its recorded options, then the seed, split and articles."""
    import subprocess

    from dcsr.pipeline.plan import Plan
    from dcsr.pipeline.squad_beir import conversion_command
    from test_plan import load

    plan = Plan(load("config.yaml"), basedir=REPO)
    command = conversion_command(plan, "squad-a", tmp_path / "squad-a")
    assert command[2:4] == ["--source", plan.squad_source("squad")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert len((tmp_path / "squad-a" / "queries.jsonl").read_text().splitlines()) == 965


def _small_beir(beir: Path, corpus_ids=("d1", "d2"), qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"):
    (beir / "qrels").mkdir(parents=True, exist_ok=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": f"text of {d}"}) + "\n"
                                               for d in corpus_ids), encoding="utf-8")
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "first?"}\n{"_id": "q2", "text": "second?"}\n')
    (beir / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")


@pytest.mark.parametrize("bad, shown", [("d\x00x", "U+0000"), ("\x1b[31md", "U+001B"),
                                        ("d\u202ex", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
                                        ("d\u2066x", "U+2066 (LEFT-TO-RIGHT ISOLATE)")])
def test_an_id_with_a_control_character_is_refused_naming_its_line(tmp_path, bad, shown):
    """A NUL, an ANSI escape or a bidi override in an ``_id`` (or a qrels id) went into the
    pipeline's id mapping and TREC runs, invisible, and read apart by other tools (C strings end
    at the NUL); refused with the file and line, nothing written."""
    beir, out = tmp_path / "beir", tmp_path / "out"
    _small_beir(beir, corpus_ids=("d1", bad))
    with pytest.raises(InputError) as e:
        convert_corpus(beir, out / "psgs_w100.tsv", out / "doc-ids.tsv")
    assert str(e.value).startswith(f"{beir / 'corpus.jsonl'}:2: document '_id' {bad!r} holds the control "
                                   f"character {shown}")
    assert not out.exists()
    _small_beir(beir, qrels=f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\t{bad}\t1\n")
    convert_corpus(beir, out / "psgs_w100.tsv", out / "doc-ids.tsv")
    with pytest.raises(InputError, match=rf"test\.tsv:3: corpus-id .* holds the control character"):
        convert_queries(beir, "test", out / "doc-ids.tsv", out / "t.queries.tsv", out / "q-ids.tsv", out / "q.qrels")
    # letters of any script stay ids, with the format characters words need (a zero-width
    # non-joiner in Persian, a soft hyphen, a zero-width joiner, a left-to-right mark)
    kept = ("dé-ü_٣", "می\u200cخواهم", "Ab\u00adc", "a\u200db", "a\u200eb")
    _small_beir(beir, corpus_ids=("d1", *kept))
    convert_corpus(beir, out / "psgs_w100.tsv", out / "doc-ids.tsv")
    assert read_doc_ids(out / "doc-ids.tsv") == dict(enumerate(("d1", *kept)))


@pytest.mark.parametrize("score", ["1_0", "\u0663", "\u00a01", "+1", "1.0", ""])
def test_a_beir_qrels_score_that_is_not_plain_digits_is_refused(tmp_path, score):
    """Python's int() read '1_0' as 10 and the Arabic-Indic digit three as 3: a score silently
    changed. A score is plain ASCII digits, with a minus sign for BEIR's negative judgments."""
    _small_beir(tmp_path, qrels=f"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t{score}\n")
    with pytest.raises(InputError) as e:
        read_beir_qrels(tmp_path / "qrels" / "test.tsv")
    assert str(e.value) == (f"{tmp_path / 'qrels' / 'test.tsv'}:3: score {score!r} is not an integer (plain digits, "
                            "as 0, 1 or 2)")
    _small_beir(tmp_path, qrels="query-id\tcorpus-id\tscore\nq1\td1\t2 \nq2\td2\t -1\n")  # spaces, as BEIR reads them
    assert read_beir_qrels(tmp_path / "qrels" / "test.tsv") == {"q1": {"d1": 2}, "q2": {"d2": -1}}


def test_qrels_are_split_as_beirs_loader_splits_them(tmp_path):
    """BEIR's GenericDataLoader reads qrels with csv (tab-separated, QUOTE_MINIMAL): a quoted
    "d2" is the document d2. Split on tabs alone, it was '"d2"', a document the corpus lacks: the
    judgment was kept with a warning and the query silently scored 0."""
    _small_beir(tmp_path, qrels='query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\t"d2"\t"1"\n')
    assert read_beir_qrels(tmp_path / "qrels" / "test.tsv", documents={"d1", "d2"}) == {"q1": {"d1": 1},
                                                                                    "q2": {"d2": 1}}


def test_an_id_mapping_is_read_as_utf8_and_its_ids_checked(tmp_path):
    """The id mappings beside a converted collection (beir-doc-ids.tsv, *.query-ids.tsv) may come
    with results written elsewhere: a byte that is not UTF-8 gave a UnicodeDecodeError traceback,
    and an _id 'd 1 x' forged columns in the TREC run written with the original ids
    ('q1 Q0 d 1 x 1 1.0 run'). Both are refused with the file and line, and no run is written."""
    beir, out = tmp_path / "beir", tmp_path / "out"
    _small_beir(beir)
    convert_corpus(beir, out / "psgs_w100.tsv", out / "doc-ids.tsv")
    convert_queries(beir, "test", out / "doc-ids.tsv", out / "t.queries.tsv", out / "q-ids.tsv", out / "q.qrels")
    write_trec(out / "run.trec", {0: [(0, 1.0)], 1: [(1, 1.0)]}, tag="run")
    good_docs, good_queries = (out / "doc-ids.tsv").read_bytes(), (out / "q-ids.tsv").read_bytes()
    for name, content, message in [
            ("doc-ids.tsv", b"id\t_id\n0\td1\n1\td\xff2\n",
             "doc-ids.tsv:3: not UTF-8 text (byte 0xff at byte offset 15)"),
            ("doc-ids.tsv", b"id\t_id\n0\td 1 x\n1\td2\n",
             "doc-ids.tsv:2: document _id 'd 1 x' holds whitespace"),
            ("doc-ids.tsv", b"id\t_id\n0\td1\tx\n1\td2\n", "doc-ids.tsv:2: expected '<integer><TAB><_id>'"),
            ("doc-ids.tsv", b"id\t_id\n0\td1\n1\td2\r\n", "doc-ids.tsv:3: document _id 'd2\\r' holds whitespace"),
            ("doc-ids.tsv", b"id\t_id\n0\td\x1b[2J\n1\td2\n", "doc-ids.tsv:2: document _id 'd\\x1b[2J' holds the "
                                                             "control character U+001B"),
            ("doc-ids.tsv", "id\t_id\n0\td1\n\u0661\td2\n".encode(), "doc-ids.tsv:3: expected '<integer><TAB><_id>'"),
            ("q-ids.tsv", b"qid\t_id\n0\tq1 Q0\n1\tq2\n", "q-ids.tsv:2: query _id 'q1 Q0' holds whitespace"),
            ("q-ids.tsv", b"qid\t_id\n0\tq\xc01\n1\tq2\n", "q-ids.tsv:2: not UTF-8 text")]:
        (out / name).write_bytes(content)
        with pytest.raises(InputError) as e:
            write_original_id_run(out / "run.trec", out / "q-ids.tsv", out / "doc-ids.tsv", out / "orig.run")
        assert str(e.value).startswith(f"{out}/{message}"), str(e.value)
        assert not (out / "orig.run").exists()
        (out / "doc-ids.tsv").write_bytes(good_docs)
        (out / "q-ids.tsv").write_bytes(good_queries)
    assert write_original_id_run(out / "run.trec", out / "q-ids.tsv", out / "doc-ids.tsv", out / "orig.run") == 2
    assert (out / "orig.run").read_text() == "q1 Q0 d1 1 1.0 run\nq2 Q0 d2 1 1.0 run\n"


def test_the_squad_readme_shows_a_source_name_as_text_not_html(tmp_path):
    """The README squad_to_beir writes named the source file raw in its Markdown: a source named
    '<img src=x onerror=alert(1)>.json.gz' was an image tag to every viewer that renders HTML. It
    is a code span now, which no backtick in the name can close."""
    import shutil

    from markdown_it import MarkdownIt

    from dcsr.data.beir import md_code_span

    source = tmp_path / "<img src=x onerror=alert(1)> `x`.json.gz"
    shutil.copy(SQUAD, source)
    squad_to_beir(source, tmp_path / "beir")
    html = MarkdownIt("commonmark").render((tmp_path / "beir" / "README.md").read_text(encoding="utf-8"))
    assert "<img" not in html
    assert "Converted from <code>&lt;img src=x onerror=alert(1)&gt; `x`.json.gz</code> by" in html
    for text in ("a`b", "`a", "a``", " a ", "<b>\n\n<i>x</i>"):
        rendered = MarkdownIt("commonmark").render(f"x {md_code_span(text)} y")
        assert rendered.count("<code>") == 1 and "<b>" not in rendered and "<i>" not in rendered, rendered
        assert rendered.startswith("<p>x <code>") and rendered.endswith("</code> y</p>\n"), rendered
