"""The real-text default (config/config.yaml: 36 vendored SQuAD v1.1 articles, the pretrained
MiniLM, 4 trained models) end to end in fp32, checked against its pins: the main table, the
hybrid table with its pooled measures, and the claims ledger (config/pins.yaml: demo-fp32,
demo-hybrid-fp32, demo-claims-fp32). A regression on real text fails here, on any kind of CPU:
a kind with its own pins must match them, any other kind within the cross-kind tolerance.
Then the same runs are scored on SQuAD written as a BEIR collection (issue 42)."""

import pytest
import yaml

from dcsr.evaluation.pins import check_variants, report
from dcsr.pipeline.squad_beir import load_plan, markdown_table, score_on_squad_beir, success_differs_from_top_k
from test_workflow import CI_TIMEOUT, snakemake


def check_squad_as_beir(repo, results, out):
    """The run's SQuAD test sets as BEIR collections (dcsr.pipeline.squad_beir, the numbers of
    benchmarks/beir/beir.md): every BM25, dense and hybrid run measured with ir_measures against
    their answer-match qrels. Success@1/20/100 must be the run's answer-match top-1/20/100 (one
    measure, two tools), and nDCG@10 a number in (0, 100]. It reads the runs: seconds."""
    test_sets, rows = score_on_squad_beir(load_plan(repo / "config" / "config.yaml", results, repo), out)
    print(markdown_table(rows))
    assert {r.dataset for r in rows} == set(test_sets) == {"squad-a", "squad-b"}
    assert {r.retriever.split("/")[0] for r in rows} >= {"bm25", "untrained", "dpr-a", "dcsr-b", "hybrid-rrf"}
    problems = success_differs_from_top_k(rows, tolerance=1e-9)
    assert not problems, "Success@k against SQuAD-as-BEIR's qrels is not answer-match top-k:\n" + "\n".join(problems)
    assert all(0 < r.measured["nDCG@10"] <= 100 for r in rows), [(r.run, r.measured["nDCG@10"]) for r in rows]


@pytest.mark.slow
def test_the_real_text_default_matches_its_pins(repo, tmp_path):
    results = tmp_path / "results"
    over = tmp_path / "fp32.yaml"
    fp32 = yaml.safe_load((repo / "benchmarks" / "demo" / "demo_fp32.yaml").read_text())
    over.write_text(yaml.safe_dump({**fp32, "results": str(results)}))
    r = snakemake(repo, tmp_path, "--cores", "2", "--configfile", str(repo / "config" / "config.yaml"), str(over),
                  timeout=CI_TIMEOUT)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    moved = []
    for run, table in (("demo-fp32", "tables/dpr_dcsr.csv"), ("demo-hybrid-fp32", "tables/hybrid.csv"),
                       ("demo-claims-fp32", "claims.csv")):
        # the kind its embedding shards recorded (fp32 torch on this CPU); on the kind the ledger was
        # pinned on, its verdicts are compared too (elsewhere a near-tie may move a p-value across 0.05)
        check = check_variants(repo / "config" / "pins.yaml", run, results / table)
        print(f"pins {check.variant}:\n" + report(check.cells, check.problems))
        moved += [f"{check.variant}: {f}" for f in check.failures()]
    assert not moved, "pinned numbers of the real-text default moved:\n" + "\n".join(moved)
    check_squad_as_beir(repo, results, tmp_path / "beir")
