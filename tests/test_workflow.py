"""The real DAG: lint, a dry run, and one end-to-end run on a tiny config."""

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
# The hang guard of the two long runs (the real-text default, the miniature paper run): 85 minutes,
# CI's 90 less its install. On a 2-core AMD EPYC Zen 1 (family 23 model 1: AVX2 on 128-bit units)
# the real-text default took more than the 50 minutes these runs had before (docs/testing.md).
CI_TIMEOUT = 5100


def run_bounded(cmd, timeout, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True)`` that, past ``timeout`` seconds, stops
    the command and every process it started (in a session of its own), then fails with the end of
    its output. ``subprocess.run``'s own timeout kills only the command: a Snakemake killed alone
    leaves its jobs running, and they slow every test after it on a 2-core machine."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out = err = ""
        for sig in (signal.SIGTERM, signal.SIGKILL):  # Snakemake stops its jobs and removes their outputs on TERM
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                out, err = proc.communicate(timeout=30)
                break
            except subprocess.TimeoutExpired:
                pass
        pytest.fail(f"{Path(cmd[0]).name} ran past {timeout} s and was stopped with all it started:\n"
                    f"{(out + err)[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def snakemake(repo, workdir, *args, timeout=1800):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    return run_bounded([SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args],
                       timeout, cwd=workdir, env=env)


def dry_run_job_counts(repo, workdir, *configfiles) -> dict[str, int]:
    """``{rule: jobs}`` of a dry run over ``configfiles``."""
    r = snakemake(repo, workdir, "-n", "--quiet", "rules", "--configfile", *configfiles)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    counts = {}
    for line in (r.stdout + r.stderr).splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] == "Z"  # killed, not yet reaped
    except FileNotFoundError:
        return True


def test_a_run_past_its_timeout_is_stopped_with_all_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    parent = ("import pathlib, subprocess, sys, time; "
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
              f"pathlib.Path({str(pid_file)!r}).write_text(str(child.pid)); print('started', flush=True); time.sleep(120)")
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"(?s)ran past 3 s and was stopped.*started"):
        run_bounded([sys.executable, "-c", parent], 3)
    assert time.monotonic() - start < 60
    child = int(pid_file.read_text())
    for _ in range(50):
        if _gone(child):
            break
        time.sleep(0.1)
    assert _gone(child), "the command's child is still running after its timeout"
    assert run_bounded([sys.executable, "-c", "print('done')"], 60).stdout == "done\n"


def test_lint_has_no_findings(repo, tmp_path):
    r = snakemake(repo, tmp_path, "--lint")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Congratulations, your workflow is in a good condition!" in r.stdout + r.stderr


def test_dry_run_lists_every_stage(repo, tmp_path):
    """The default config (real text: the vendored SQuAD subset) plans every stage, from the
    SQuAD JSON to the tables, the matrix, the ledger and the dev choice of HasAns's temperature."""
    r = snakemake(repo, tmp_path, "-n", "--quiet", "rules")
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout + r.stderr
    for rule in ["prepare_squad", "prepare_squad_dataset", "index_bm25", "mine_bm25_negatives", "search_bm25",
                 "export_encoder", "train_biencoder", "embed_shard", "embed_questions", "index_shard",
                 "search_shard", "merge_runs", "choose_temperature", "evaluate_topk", "make_table",
                 "collect_pair_matrix", "claims_ledger"]:
        assert rule in out, f"{rule} missing from the dry run:\n{out}"
    # the generated data stays a named config
    r = snakemake(repo, tmp_path, "-n", "--quiet", "rules", "--configfile", str(repo / "config" / "generated.yaml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "generate_corpus" in r.stdout + r.stderr and "generate_dataset" in r.stdout + r.stderr


def test_config_type_error_names_the_key(repo, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("embed: {shards: two, batch_size: 8}\n")
    r = snakemake(repo, tmp_path, "-n", "--configfile", str(repo / "config" / "generated.yaml"), str(bad))
    assert r.returncode != 0
    assert "config: embed.shards: expected int, found 'two'" in r.stdout + r.stderr
    assert not (tmp_path / "results").exists()


def check_hybrid_outputs(results):
    """The hybrid table of config/generated.yaml: BM25 fused with DPR (linear, weight chosen on the
    dev questions) and with DCSR (RRF), each fused run made from the two runs it names."""
    from dcsr.data.runs import read_trec
    from dcsr.retrieval.fusion import fuse_runs

    rows = list(csv.DictReader(open(results / "tables" / "hybrid.csv")))
    got = {(r["row"], r["metric"]): float(r["ours"]) for r in rows}
    assert {r for r, _ in got} == {"BM25", "DPR", "BM25 + DPR (linear)", "BM25 + DCSR (RRF)"}
    # MRR@10 and nDCG@10 of every row against one set of judgments: the pool of the table's own
    # runs on encyclopedia (BM25, DPR, the two hybrids and the DCSR run RRF fuses); the matrix's
    # pairs and the other tables' rows are not in it
    from dcsr.evaluation.trec_eval import measure_run, read_qrels

    pool = json.loads((results / "qrels" / "hybrid" / "demo" / "encyclopedia.pool.json").read_text())
    assert pool["depth"] == 100 and 0 < pool["relevant"] < pool["judged"]
    assert sorted("/".join(Path(r).parts[-4:]) for r in pool["runs"]) == sorted([
        "demo/bm25/bm25/encyclopedia.questions.jsonl", "demo/dpr/dpr/encyclopedia.questions.jsonl",
        "demo/dcsr/dcsr/encyclopedia.questions.jsonl", "hybrid-linear/dpr/dpr/encyclopedia.questions.jsonl",
        "hybrid-rrf/dcsr/dcsr/encyclopedia.questions.jsonl"]), pool["runs"]
    qrels = read_qrels(results / "qrels" / "hybrid" / "demo" / "encyclopedia.qrels")
    dpr = measure_run(read_trec(results / "runs" / "demo" / "dpr" / "dpr" / "encyclopedia.trec"), qrels, ["nDCG@10"],
                      pool["questions"])
    assert got[("DPR", "nDCG@10 (pooled answer-match)")] == pytest.approx(dpr["nDCG@10"], abs=0.006)
    assert "Pooled qrels encyclopedia.qrels: the top 100 of" in (results / "tables" / "hybrid.md").read_text()
    choice = json.loads((results / "fusion" / "demo" / "dpr" / "dpr" / "encyclopedia.json").read_text())
    assert 0.0 <= choice["weight"] <= 1.0 and len(choice["grid"]) == 11
    assert choice["questions"] > 0 and "dev questions" in choice["criterion"]
    linear = json.loads((results / "metrics" / "demo" / "hybrid-linear" / "dpr" / "dpr" / "encyclopedia.json").read_text())
    assert linear["fusion_weight"] == choice["weight"] and linear["fusion"] == "linear"
    assert got[("BM25 + DPR (linear)", "top5")] == pytest.approx(linear["top5"], abs=0.005)
    # the RRF run is exactly the fusion of the BM25 and DCSR runs of the table
    rrf_run = results / "runs" / "demo" / "hybrid-rrf" / "dcsr" / "dcsr" / "encyclopedia.trec"
    bm25 = read_trec(results / "runs" / "demo" / "bm25" / "bm25" / "encyclopedia.trec")
    dense = read_trec(results / "runs" / "demo" / "dcsr" / "dcsr" / "encyclopedia.trec")
    assert {q: [p for p, _ in h] for q, h in read_trec(rrf_run).items()} == {
        q: [p for p, _ in h] for q, h in fuse_runs(bm25, dense, "rrf", k=100).items()}
    assert "| Dense weight |" in (results / "tables" / "hybrid.md").read_text()


# Hostile but legal config text (issue 25): a results folder whose name holds a space, quotes,
# $(...) and a ';', and a table title and claim texts holding quotes and a </script>.
# Every command must treat them as text: no marker file appears, nothing is written outside
# results: and Snakemake's .snakemake/, and the report runs no script of the config's.
# (a backquote is refused in results: since the report quotes the path as an RST literal:
# tests/test_report_text.py; so the command substitution here is $(...))
HOSTILE_DIR = "out dir; $(touch INJECTED-1) 'q' \"qq\""
SCRIPT = "</script><script>window.injected=1</script>"


def hostile_overlay(repo, results, tiny_bert) -> dict:
    claims = yaml.safe_load((repo / "config" / "generated.yaml").read_text())["claims"]
    for c in claims:
        c["claim"] += f' ("quoted" & {SCRIPT})'
    return {"results": str(results), "encoders": {"tiny": str(tiny_bert)}, "claims": claims,
            "tables": {"dpr_dcsr": {"title": f"BM25, DPR and DCSR's \"top-k\" $(touch INJECTED-3) {SCRIPT}"}}}


def script_elements(html: str) -> list[str]:
    """The text of every <script> element of a page, as a browser's parser splits them."""
    from html.parser import HTMLParser

    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.inside, self.found = False, []

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self.inside = True
                self.found.append("")

        def handle_endtag(self, tag):
            if tag == "script":
                self.inside = False

        def handle_data(self, data):
            if self.inside:
                self.found[-1] += data

    parser = Scripts()
    parser.feed(html)
    return parser.found


@pytest.mark.slow
def test_pipeline_end_to_end_on_tiny_config(repo, tmp_path, tiny_bert):
    over = tmp_path / "over.yaml"
    results = tmp_path / HOSTILE_DIR / "results"
    overlay = hostile_overlay(repo, results, tiny_bert)
    over.write_text(yaml.safe_dump(overlay))
    r = snakemake(repo, tmp_path, "--cores", "2", "--configfile", str(repo / "config" / "generated.yaml"), str(repo / "config" / "ci.yaml"), str(over))
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    # no command ran from a config value, and every output is under results:
    assert not [p for p in tmp_path.rglob("INJECTED*")] and not list(Path.cwd().glob("INJECTED*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([".snakemake", "over.yaml", HOSTILE_DIR])
    assert [p.name for p in (tmp_path / HOSTILE_DIR).iterdir()] == ["results"]
    # the regression pins (config/pins.yaml, run "ci"): every cell as pinned on this kind of CPU
    # (ci@<machine>), or as on one of the kinds it was pinned on; each moved cell named
    from dcsr.evaluation.pins import check_variants, report

    check = check_variants(repo / "config" / "pins.yaml", "ci", results / "tables" / "dpr_dcsr.csv")
    print(f"pins {check.variant}:\n" + report(check.cells, check.problems))
    assert not check.unpinned and not check.failures(), (
        f"pinned numbers moved (config/pins.yaml, run {check.variant}):\n" + "\n".join(check.failures())
        + "\n\n" + report(check.cells, check.problems))
    # the kind its embedding jobs recorded: this CPU in fp32 with torch (config/ci.yaml)
    from dcsr.evaluation.pins import kind_key, table_kind

    assert table_kind(results / "tables" / "dpr_dcsr.csv") == kind_key("cpu", "fp32", "torch")
    rows = list(csv.DictReader(open(results / "tables" / "dpr_dcsr.csv")))
    got = {(row["row"], row["test_set"], row["metric"]): float(row["ours"]) for row in rows}
    labels = ("BM25", "Untrained MiniLM (passages)", "Untrained MiniLM (sentences + HasAns)", "DPR", "DCSR")
    test_sets = ("encyclopedia", "trivia", "chat")
    # every row on every test set (DCSR Table 2 style), each metric once
    assert len(rows) == len(got) == len(labels) * len(test_sets) * 4
    assert {(r, t) for r, t, _ in got} == {(r, t) for r in labels for t in test_sets}
    for value in got.values():
        assert 0.0 <= value <= 100.0
    # recall is monotone in k for every row
    for row in labels:
        for ts in test_sets:
            vals = [got[(row, ts, f"top{k}")] for k in (1, 5, 20, 100)]
            assert vals == sorted(vals), (row, ts, vals)
    # the tiny corpus has fewer than 100 passages per question's reach: top-100 sees them all
    assert all(got[("BM25", ts, "top100")] == 100.0 for ts in test_sets)
    # the DPR row's columns are the in-domain models (Single): its trivia cell is dpr-trivia's run
    trivia_dpr = json.loads((results / "metrics" / "demo" / "dpr-trivia" / "dpr-trivia" / "trivia.json").read_text())
    assert got[("DPR", "trivia", "top5")] == pytest.approx(trivia_dpr["top5"], abs=0.005)
    # a DCSR run records the HasAns temperature it ranked with (the config's 1.0), and the table shows it
    dcsr_run = json.loads((results / "metrics" / "demo" / "dcsr" / "dcsr" / "encyclopedia.json").read_text())
    assert dcsr_run["hasans_temperature"] == 1.0 and "hasans_temperature" not in trivia_dpr
    assert "| HasAns T |" in (results / "tables" / "dpr_dcsr.md").read_text()
    # built on a tiny random BERT: the table and the ledger say they test plumbing only
    assert "test the pipeline's plumbing" in (results / "tables" / "dpr_dcsr.md").read_text()
    assert "test the pipeline's plumbing" in (results / "claims.md").read_text()
    # every rule wrote a log, and the trained models have the documented layout
    for model, method in (("dpr", "dpr"), ("dcsr", "dcsr")):
        assert (results / "logs" / "train_biencoder" / f"{model}.log").stat().st_size > 0
        for part in ("question_encoder", "passage_encoder", "dcsr.json"):
            assert (results / "models" / model / part).exists()
        assert json.loads((results / "models" / model / "dcsr.json").read_text())["method"] == method
    # DCSR trains on sentences: its log reports the questions it could use
    assert "questions have an answer-bearing sentence" in (results / "logs" / "train_biencoder" / "dcsr.log").read_text()
    # DCSR's index holds one vector per sentence: more vectors than passages, passage ids repeat
    ids = np.concatenate([np.load(results / "embeddings" / "demo" / "dcsr" / f"shard-{i}.ids.npy") for i in (0, 1)])
    sents = np.concatenate([np.load(results / "embeddings" / "demo" / "dcsr" / f"shard-{i}.sents.npy") for i in (0, 1)])
    dpr_ids = np.concatenate([np.load(results / "embeddings" / "demo" / "dpr" / f"shard-{i}.ids.npy") for i in (0, 1)])
    assert len(ids) > len(dpr_ids) and set(ids) == set(dpr_ids) and sents.min() == 0
    # the DCSR run ranks distinct passages (HasAns), 100 per question
    run = (results / "runs" / "demo" / "dcsr" / "dcsr" / "encyclopedia.trec").read_text().splitlines()
    first_q = [line.split()[2] for line in run if line.split()[0] == run[0].split()[0]]
    assert len(first_q) == len(set(first_q)) == min(100, len(dpr_ids))
    md = (results / "tables" / "dpr_dcsr.md").read_text()
    assert "| DCSR | encyclopedia |" in md and "| DCSR | chat |" in md
    check_hybrid_outputs(results)
    # DCSR Table 1 (questions per gold passage) and Figure 4 (dev accuracy per epoch, DPR and DCSR)
    table1 = list(csv.DictReader(open(results / "tables" / "table1_questions_per_passage.csv")))
    assert {r["row"] for r in table1} == {"encyclopedia", "trivia", "chat"} and "encyclopedia (ours)" in (results / "tables" / "table1_questions_per_passage.md").read_text()
    assert (results / "figures" / "validation-encyclopedia.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curves = list(csv.DictReader(open(results / "figures" / "validation-encyclopedia.csv")))
    assert {r["label"] for r in curves} == {"dpr", "dcsr"}
    check_attribution_outputs(results)
    # the claims ledger: each claim of config.yaml, a paired comparison of two of the table's runs
    claims = list(csv.DictReader(open(results / "claims.csv")))
    configured = overlay["claims"]
    # each claim at the paper's k and at the scaled k, the p-values Holm-adjusted over all of them
    # the scaled k's depth names its computation from the corpus's size (dcsr.evaluation.claims.scaled_k)
    passages = len(np.load(results / "store" / "demo" / "ids.npy", mmap_mode="r"))
    assert [(c["claim"], c["depth"], c["metric"]) for c in claims] == [
        (c["claim"], depth, c[key]) for c in configured
        for depth, key in (("paper k", "metric"), (f"scaled k ({c['metric']} x {passages:,} / 21,015,324)", "scaled_metric"))]
    labels_of = {"dpr": "DPR", "dpr-trivia": "DPR", "dcsr": "DCSR", "dcsr-trivia": "DCSR", "bm25": "BM25"}
    for c in claims:
        assert c["verdict"] in ("holds", "does not hold", "inconclusive at this scale")
        assert float(c["p_value"]) <= float(c["p_holm"]) <= 1
        if c["verdict"] == "inconclusive at this scale":  # its power: every claim has its paper's difference
            assert int(c["questions_needed"]) > 0
        else:
            assert c["detectable"] == c["questions_needed"] == ""
        assert float(c["ci_low"]) <= float(c["difference"]) <= float(c["ci_high"])
        for side in ("baseline", "method"):  # each side's value is its cell of the table
            assert float(c[f"{side}_value"]) == pytest.approx(got[(labels_of[c[side]], c["test_set"], c["metric"])], abs=0.006)
        assert float(c["method_value"]) - float(c["baseline_value"]) == pytest.approx(float(c["difference"]), abs=0.02)
    # the Snakemake report of the finished run holds every table and every figure
    report = tmp_path / "report.html"
    r = snakemake(repo, tmp_path, "--report", str(report), "--configfile", str(repo / "config" / "generated.yaml"),
                  str(repo / "config" / "ci.yaml"), str(over))
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    html = report.read_text(encoding="utf-8")
    tables = sorted(p.name for p in (results / "tables").glob("*.csv"))
    figures = sorted(p.name for p in (results / "figures").glob("*.png"))
    assert len(tables) == 11 and len(figures) == 9, (tables, figures)
    assert [t for t in tables + figures + ["claims.csv"] if t not in html] == []
    assert "trained on encyclopedia" in html  # the description lists the models of the config
    # the report carries the hostile title and claims as text, never as a script of their own
    scripts = script_elements(html)
    assert len(scripts) > 5 and "window.injected=1" not in [s.strip() for s in scripts]
    assert any("window.injected" in s for s in scripts)  # the text is there, inside the report's data


def check_attribution_outputs(results):
    """The encoder attribution analysis of config.yaml + ci.yaml: K = 3 domains, DPR and DCSR
    families, a sweep of trivia at 40% and 100%."""
    tests = ("encyclopedia", "trivia", "chat")
    metrics = yaml.safe_load((Path(__file__).parents[1] / "config" / "generated.yaml").read_text())["attribution"]["metrics"]
    # attribution Table 1: the questions of each dataset's three files, beside the paper's
    sizes = {(r["row"], r["statistic"]): r["ours"] for r in csv.DictReader(open(results / "tables" / "attribution_table1.csv"))}
    assert {row for row, _ in sizes} == set(tests)
    test_lines = (results / "data" / "demo" / "encyclopedia-test.qa.csv").read_text().splitlines()
    assert int(sizes[("encyclopedia", "test")]) == len([line for line in test_lines if line.strip()])
    assert "| encyclopedia (ours) |" in (results / "tables" / "attribution_table1.md").read_text()
    m0 = metrics[0]
    families = {"DPR": {"encyclopedia": "dpr", "trivia": "dpr-trivia", "chat": "dpr-chat"},
                "DCSR": {"encyclopedia": "dcsr", "trivia": "dcsr-trivia", "chat": "dcsr-chat"}}
    matrix = {}
    for r in csv.DictReader(open(results / "attribution" / "pair_matrix.csv")):
        matrix[(r["question_encoder"], r["passage_encoder"], r["test_set"], r["metric"])] = float(r["value"])
    # the matrix is complete: every (question encoder, passage encoder) of a family on every test set
    for fam in families.values():
        for q in fam.values():
            for p in fam.values():
                for t in tests:
                    for m in metrics:
                        assert (q, p, t, m) in matrix, (q, p, t, m)
    # and each cell is the metrics file of that pair's run
    cell = json.loads((results / "metrics" / "demo" / "dpr-chat" / "dpr" / "encyclopedia.json").read_text())
    assert matrix[("dpr-chat", "dpr", "encyclopedia", m0)] == pytest.approx(cell[m0])
    # a marginal is the mean of its row (question encoder) or column (passage encoder) of the matrix
    for fam_name, fam in families.items():
        rows = list(csv.DictReader(open(results / "tables" / f"attribution_marginals-{fam_name}.csv")))
        assert {(r["dataset"], r["metric"]) for r in rows} == {(t, m) for t in tests for m in metrics}
        for r in rows:
            t, m, own = r["dataset"], r["metric"], fam[r["dataset"]]
            row = [matrix[(own, p, t, m)] for p in fam.values()]
            col = [matrix[(q, own, t, m)] for q in fam.values()]
            assert float(r["question_marginal"]) == pytest.approx(sum(row) / 3, abs=1e-3)
            assert float(r["passage_marginal"]) == pytest.approx(sum(col) / 3, abs=1e-3)
            assert float(r["tandem"]) == pytest.approx(matrix[(own, own, t, m)], abs=1e-3)
        assert (results / "figures" / f"attribution_marginals-{fam_name}.png").read_bytes()[:4] == b"\x89PNG"
        assert (results / "figures" / f"pair_matrix-{fam_name}.png").read_bytes()[:4] == b"\x89PNG"
    # Table 2 has BM25 and the six in-tandem bi-encoders, each on every test set plus the average
    t2 = list(csv.DictReader(open(results / "tables" / "attribution_table2.csv")))
    assert {r["row"] for r in t2} == {"BM25"} | {f"{f}-{d}" for f, fam in families.items() for d in fam}
    assert {r["test_set"] for r in t2} == set(tests) | {"Average"}
    # the sweep: dpr-trivia-40pct trained on its nested sample, with both curves and Table 4
    sample = json.loads((results / "samples" / "trivia" / "train-40pct.json").read_text())
    full = json.loads((results / "bm25" / "negatives" / "trivia-train.json").read_text())
    assert len(sample) == round(0.4 * len(full)) and all(r in full for r in sample)
    sweep = list(csv.DictReader(open(results / "figures" / "data_efficiency.csv")))
    assert {(r["model"], float(r["fraction"])) for r in sweep} == {("dpr-trivia-40pct", 0.4), ("dpr-trivia", 1.0)}
    for r in sweep:
        if r["model"] == "dpr-trivia-40pct":
            col = [matrix[(q, "dpr-trivia-40pct", "trivia", r["metric"])] for q in families["DPR"].values()]
            assert float(r["passage_marginal"]) == pytest.approx(sum(col) / 3, abs=1e-3)
    t4 = list(csv.DictReader(open(results / "tables" / "attribution_table4.csv")))
    assert {r["row"] for r in t4} >= {"trivia-100%"}
    # Table 3 / Figure 4 statistics, and DCSR against DPR per side
    t3 = list(csv.DictReader(open(results / "tables" / "attribution_table3.csv")))
    assert {(r["dataset"], float(r["fraction"])) for r in t3} == {(d, 1.0) for d in tests} | {("trivia", 0.4)}
    compare = list(csv.DictReader(open(results / "tables" / "attribution_compare.csv")))
    assert {r["side"] for r in compare} == {"question", "passage", "tandem"}
    assert (results / "figures" / "data_efficiency.png").read_bytes()[:4] == b"\x89PNG"
    assert (results / "figures" / "coverage.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_killed_training_resumes_when_snakemake_runs_again(repo, tmp_path, tiny_bert):
    import json
    import signal
    import time

    results = tmp_path / "results"
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({
        "results": str(results), "encoders": {"tiny": str(tiny_bert)},
        "train": {"max_steps": 200, "epochs": 40, "checkpoint_every_steps": 10},
    }))
    target = str(results / "models" / "dpr")
    # the target goes first: --configfile takes every following argument as a file
    args = [target, "--cores", "2", "--configfile", str(repo / "config" / "generated.yaml"), str(repo / "config" / "ci.yaml"), str(over)]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.Popen([SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(tmp_path), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    state = results / "checkpoints" / "dpr" / "last" / "trainer_state.pt"
    deadline = time.time() + 600
    while not state.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert state.exists(), "training never wrote a checkpoint"
    os.killpg(proc.pid, signal.SIGKILL)  # the whole job: snakemake and the training process
    proc.wait()
    assert not (results / "models" / "dpr").exists(), "a killed run must leave no final model"

    # A hard kill leaves Snakemake's lock behind: unlock once, as the README says, then rerun.
    assert snakemake(repo, tmp_path, "--unlock", *args).returncode == 0
    r = snakemake(repo, tmp_path, "--rerun-incomplete", *args)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    log = (results / "logs" / "train_biencoder" / "dpr.log").read_text()
    assert "resuming from step" in log, log[-2000:]
    meta = json.loads((results / "models" / "dpr" / "dcsr.json").read_text())
    assert meta["step"] == 200


def test_paper_attribution_dag_is_the_matrix_without_waste(repo, tmp_path):
    """config/paper-attribution.yaml, dry run over empty stand-ins of DPR's files: one corpus
    encoding and one search job per passage encoder and shard, K x K x T runs per family, the
    sweep's extra pairs."""
    cfg = yaml.safe_load((repo / "config" / "paper-attribution.yaml").read_text())
    for c in cfg["corpora"].values():
        (tmp_path / c["path"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / c["path"]).touch()
    for ds in cfg["datasets"].values():
        for path in ds["files"].values():
            (tmp_path / path).touch()
    counts = dry_run_job_counts(repo, tmp_path, str(repo / "config" / "paper-attribution.yaml"))
    k, t, shards, fractions = 5, 5, cfg["embed"]["shards"], 6  # fractions below 100%
    sweeps = len(cfg["attribution"]["sweep"]["datasets"])
    passage_encoders = 2 * k + sweeps * fractions  # DPR and DCSR families, and the sweep's encoders
    # a sweep encoder is searched as question encoder against the K 100% indexes on its dataset (K),
    # and its index by the K 100% question encoders on its dataset (K) and by each test set's
    # own question encoder (T, one of them already counted)
    pairs = 2 * k * k * t + sweeps * fractions * (k + k + t - 1)
    assert counts["train_biencoder"] == passage_encoders
    assert counts["embed_shard"] == passage_encoders * shards  # never K^2 corpus encodings
    assert counts["index_shard"] == passage_encoders * shards
    assert counts["merge_runs"] == pairs
    # one search job per passage-encoder shard, loading the shard index once for all its pairs
    assert counts["search_shard"] == passage_encoders * shards
    assert counts["evaluate_topk"] == t  # BM25 on each test set; merge_runs scores the dense runs
    # one job per question encoder, loading it once for all its test sets
    assert counts["embed_questions"] == passage_encoders
    assert counts["sample_training_set"] == sweeps * fractions
    for rule in ("collect_pair_matrix", "make_attribution_table2", "make_attribution_table4", "plot_data_efficiency",
                 "compare_families", "make_coverage_table"):
        assert counts[rule] == 1
    assert counts["plot_marginalization"] == 2


def test_squad_attribution_overlay_adds_two_article_domains(repo, tmp_path):
    """config/attribution-squad.yaml over the default config, dry run on a small SQuAD JSON: the
    two article groups become test sets with their own in-domain DPR and DCSR models, searched
    on the SQuAD corpus by every encoder of both families, the generated domains unchanged."""
    arts = []
    for i in range(8):
        ctx = " ".join(f"w{i}x{k}" for k in range(30))
        arts.append({"title": f"A{i}", "paragraphs": [{"context": ctx, "qas": [
            {"id": f"{i}-{k}", "question": f"q {i} {k}?", "answers": [{"text": f"w{i}x{k}", "answer_start": ctx.index(f"w{i}x{k} ")}]}
            for k in range(3)]}]})
    (tmp_path / "squad.json").write_text(json.dumps({"version": "1.1", "data": arts}))
    over = yaml.safe_load((repo / "config" / "attribution-squad.yaml").read_text())
    over["corpora"]["squad"]["squad"]["source"] = str(tmp_path / "squad.json")
    over["datasets"]["squad-a"]["squad"]["articles"] = "0:4"
    over["datasets"]["squad-b"]["squad"]["articles"] = "4:8"
    (tmp_path / "over.yaml").write_text(yaml.safe_dump(over))
    counts = dry_run_job_counts(repo, tmp_path, str(repo / "config" / "generated.yaml"), str(tmp_path / "over.yaml"))
    assert counts["prepare_squad"] == 1 and counts["prepare_squad_dataset"] == 2
    # 3 generated + 2 SQuAD domains per family; each family's 5 x 5 pairs on 5 test sets
    default = yaml.safe_load((repo / "config" / "generated.yaml").read_text())
    sweep_samples = sum(1 for f in default["attribution"]["sweep"]["fractions"] if f < 1.0)
    assert counts["train_biencoder"] == 2 * 5 + sweep_samples  # + the default sweep's samples below 100%
    # every passage encoder of a family indexes both corpora (its pairs reach both)
    shards = default["embed"]["shards"]
    assert counts["embed_shard"] % shards == 0 and counts["embed_shard"] >= 2 * 10 * shards


def test_multi_node_training_is_srun_torchrun_with_a_rendezvous(repo, tmp_path):
    """train.nodes > 1: one job over N nodes asking for G GPUs per node (gres), srun starting
    one torchrun per node; without GPUs the config error names the key."""
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"results": str(tmp_path / "results"), "train": {"gpus": 4, "nodes": 2}}))
    r = snakemake(repo, tmp_path, str(tmp_path / "results" / "models" / "dpr"), "-n", "-p", "--cores", "16",
                  "--configfile", str(repo / "config" / "generated.yaml"), str(over))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    job = out[out.index("rule train_biencoder"):]
    job = job[:job.index("2> ")]
    assert "gres=gpu:4" in job and "nodes=2" in job and "gpu=0" in job and "threads: 8" in job
    assert "srun --nodes 2 --ntasks-per-node 1" in job
    assert "torchrun --nnodes 2 --nproc_per_node 4 --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d" in job
    assert "--rdzv_endpoint $(hostname):$((29500 + SLURM_JOB_ID % 20000))" in job  # a port of the job's own
    over.write_text(yaml.safe_dump({"results": str(tmp_path / "results"), "train": {"gpus": 0, "nodes": 2}}))
    r = snakemake(repo, tmp_path, str(tmp_path / "results" / "models" / "dpr"), "-n",
                  "--configfile", str(repo / "config" / "generated.yaml"), str(over))
    assert r.returncode != 0
    assert "config: train.nodes: model dpr trains over 2 nodes" in r.stdout + r.stderr


def test_subsets_variants_and_multi_training_dag(repo, tmp_path):
    """An overlay on the default config with all four experiment-matrix features: a seeded half
    of the corpus and the first 100 passages of that half (a subset of a subset); encyclopedia
    over the half, trivia's dev questions as a test set, and those over the first 100; DPR and
    DCSR trained on all three datasets at once (DCSR validated on trivia's dev set alone: dev_on);
    and the Appendix B table."""
    over = {
        "corpora": {"demo-half": {"subset": {"of": "demo", "fraction": 0.5, "seed": 7}},
                    "demo-first": {"subset": {"of": "demo-half", "first": 100}}},
        "datasets": {"encyclopedia-half": {"corpus": "demo-half", "like": "encyclopedia"},
                     "trivia-dev": {"corpus": "demo", "like": "trivia", "questions": "dev"},
                     "trivia-dev-first": {"corpus": "demo-first", "like": "trivia-dev"}},
        "models": {"dpr-multi": {"method": "dpr", "init": "minilm", "train_on": ["encyclopedia", "trivia", "chat"]},
                   "dcsr-multi": {"method": "dcsr", "init": "minilm", "train_on": ["encyclopedia", "trivia", "chat"],
                                  "dev_on": "trivia"}},  # as DCSR's Multi validates on SQuAD's dev set alone
        "tables": {"variants": {"title": "variants", "test_sets": ["encyclopedia-half", "trivia-dev", "trivia-dev-first"],
                                "rows": [{"label": "BM25", "retriever": "bm25"},
                                         {"label": "DPR Multi", "question": "dpr-multi", "passage": "dpr-multi"},
                                         {"label": "DCSR Multi", "question": "dcsr-multi", "passage": "dcsr-multi"}]}},
    }
    (tmp_path / "over.yaml").write_text(yaml.safe_dump(over))
    configs = (str(repo / "config" / "generated.yaml"), str(tmp_path / "over.yaml"))
    base = dry_run_job_counts(repo, tmp_path, configs[0])
    counts = dry_run_job_counts(repo, tmp_path, *configs)
    assert counts["subset_corpus"] == 2
    # trivia's, shared by both of its dev variants (the base config's one: encyclopedia's, where
    # the hybrid table's linear fusion chooses its weight)
    assert base["make_dev_questions"] == 1 and counts["make_dev_questions"] == 2
    assert counts["merge_training_sets"] == 2
    assert counts["train_biencoder"] == base["train_biencoder"] + 2
    # variants are searched, never trained on: no extra mining, and Table 1 / Appendix B count each dataset once
    assert counts["mine_bm25_negatives"] == base["mine_bm25_negatives"] == 3
    assert counts["make_table1"] == counts["make_appendix_b"] == 1
    # a BM25 index per corpus; BM25 on each new test set, and the two Multi models' corpus encodings
    assert counts["index_bm25"] == 3 and counts["split_sentences"] == 3
    assert counts["search_bm25"] == base["search_bm25"] + 3
    shards = yaml.safe_load((repo / "config" / "generated.yaml").read_text())["embed"]["shards"]
    assert counts["embed_shard"] == base["embed_shard"] + 2 * 3 * shards
    assert counts["merge_runs"] == base["merge_runs"] + 2 * 3
    assert counts["plot_validation"] == base["plot_validation"] + 1  # the two Multi models share one figure

    r = snakemake(repo, tmp_path, "-n", "-p", "--configfile", *configs)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    commands = [line for line in out.splitlines() if "workflow/scripts/" in line]

    def command(script, *parts):
        found = [c for c in commands if f"/{script}" in c and all(p in c for p in parts)]
        assert len(found) == 1, (script, parts, found)
        return found[0]

    command("subset_corpus.py", "--corpus results/data/demo-half/psgs_w100.tsv --first 100",
            "--output results/data/demo-first/psgs_w100.tsv")
    command("subset_corpus.py", "--fraction 0.5 --seed 7", "--output results/data/demo-half/psgs_w100.tsv")
    command("make_dev_questions.py", "--dev results/data/demo/trivia-dev.json --output results/data/demo/trivia-dev.qa.csv")
    command("search_bm25.py", "--index results/bm25/demo-first/index --questions results/data/demo/trivia-dev.qa.csv")
    command("search_bm25.py", "--index results/bm25/demo-half/index --questions results/data/demo/encyclopedia-test.qa.csv")
    command("train_biencoder.py", "--train results/train/dcsr-multi/train.json --dev results/train/dcsr-multi/dev.json",
            "--sentences results/sentences/demo/sentences.tsv")
    merge = command("merge_training_sets.py", "dpr-multi")
    assert ("--train results/bm25/negatives/encyclopedia-train.json results/bm25/negatives/trivia-train.json"
            " results/bm25/negatives/chat-train.json --dev results/data/demo/encyclopedia-dev.json"
            " results/data/demo/trivia-dev.json results/data/demo/chat-dev.json --train-out") in merge
    assert "/chat-train.json --dev results/data/demo/trivia-dev.json --train-out" in command("merge_training_sets.py",
                                                                                             "dcsr-multi")
    for script in ("make_table1.py", "make_appendix_b.py"):
        spec = json.loads(command(script).split("--spec '")[1].split("' --paper")[0])
        assert [row["label"] for row in spec["rows"]] == ["encyclopedia", "trivia", "chat"]
    assert "validation-encyclopedia+trivia+chat.png" in command("plot_validation.py", "dpr-multi", "dcsr-multi")


def test_seeds_and_the_dev_temperature_plan_their_jobs(repo, tmp_path):
    """models.<m>.seeds: 3 trains m three times and the ledger reads every seed's run;
    dcsr.temperature: dev adds one choose_temperature job per DCSR run on a test set, each
    fed by a search of that test set's dev questions, and the merge of the test run reads it."""
    base = dry_run_job_counts(repo, tmp_path, str(repo / "config" / "generated.yaml"))
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({"models": {"dpr": {"seeds": 3}}, "dcsr": {"temperature": "dev"}}))
    counts = dry_run_job_counts(repo, tmp_path, str(repo / "config" / "generated.yaml"), str(over))
    assert counts["train_biencoder"] == base["train_biencoder"] + 2
    assert base.get("choose_temperature", 0) == 0 and counts["choose_temperature"] > 0
    assert counts["make_dev_questions"] >= 1
    r = snakemake(repo, tmp_path, "-n", "-p", "--configfile", str(repo / "config" / "generated.yaml"), str(over))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "results/models/dpr.seed3" in out and "results/metrics/demo/dpr.seed2/dpr.seed2/encyclopedia.questions.jsonl" in out
    merge = out[out.index("results/runs/demo/dcsr/dcsr/encyclopedia.trec --k"):]
    assert "--temperature-file results/temperature/demo/dcsr/dcsr/encyclopedia.json" in merge.split("\n")[0]
    assert "results/hits/demo/dcsr/shard-0/dcsr/encyclopedia.dev.npz" in out
