"""The real-text default (config/config.yaml: 36 vendored SQuAD v1.1 articles, the pretrained
MiniLM, 4 trained models) end to end in fp32, checked against its pins: the main table, the
hybrid table with its pooled measures, and the claims ledger (config/pins.yaml: demo-fp32,
demo-hybrid-fp32, demo-claims-fp32). A regression on real text fails here, on any kind of CPU:
a kind with its own pins must match them, any other kind within the cross-kind tolerance."""

import pytest
import yaml

from dcsr.evaluation.pins import check_variants, report
from test_workflow import snakemake


@pytest.mark.slow
def test_the_real_text_default_matches_its_pins(repo, tmp_path):
    results = tmp_path / "results"
    over = tmp_path / "fp32.yaml"
    fp32 = yaml.safe_load((repo / "benchmarks" / "demo" / "demo_fp32.yaml").read_text())
    over.write_text(yaml.safe_dump({**fp32, "results": str(results)}))
    r = snakemake(repo, tmp_path, "--cores", "2", "--configfile", str(repo / "config" / "config.yaml"), str(over),
                  timeout=3000)
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
