"""Hybrid retrieval against its parts on the demo (not a test): each hybrid row of a table
against BM25 and against the dense run it fuses, on the same test questions, with the 95%
bootstrap interval of the difference and the sign test of the claims ledger
(dcsr.evaluation.claims.compare_runs).

    python benchmarks/hybrid/hybrid.py --results results --corpus squad --table hybrid [--ks 1 5 20 100]

Reads the table's config from config/config.yaml (or --config) and the per-question results
that merge_runs, evaluate_topk and fuse_runs write.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dcsr.evaluation.claims import compare_runs
from dcsr.evaluation.tables import table_cells
from dcsr.yamlutil import strict_load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default="results")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--table", default="hybrid")
    ap.add_argument("--corpus", default="squad")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 5, 20, 100])
    a = ap.parse_args()
    table = strict_load(Path(a.config))["tables"][a.table]  # bounded: no alias bomb, no YTE
    metrics = Path(a.results) / "metrics" / a.corpus

    def per_question(cell, fusion=None, bm25=False):
        if bm25:
            return metrics / "bm25" / "bm25" / f"{cell.dataset}.questions.jsonl"
        pair = Path(cell.qmodel) / cell.pmodel / f"{cell.dataset}.questions.jsonl"
        return metrics / f"hybrid-{fusion}" / pair if fusion else metrics / pair

    print("| hybrid | test set | against | k | hybrid | other | difference [95% CI] | only other / only hybrid | p |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cell in table_cells(table):
        if not cell.fusion:
            continue
        label = table["rows"][cell.row]["label"]
        hybrid = per_question(cell, cell.fusion)
        for name, other in (("BM25", per_question(cell, bm25=True)), (f"{cell.qmodel} alone", per_question(cell))):
            for k in a.ks:
                c = compare_runs(other, hybrid, k)
                print(f"| {label} | {cell.column} | {name} | {k} | {c.method:.1f} | {c.baseline:.1f} | "
                      f"{c.difference:+.1f} [{c.low:+.1f}, {c.high:+.1f}] | {c.only_baseline} / {c.only_method} | "
                      f"{c.p_value:.2g} |")


if __name__ == "__main__":
    main()
