"""Top-k of each training seed of the named models of a results folder, with the mean and the
standard deviation over seeds: the spread behind a claims ledger's seed differences.

    python benchmarks/squad/seed_table.py --results results-squad --corpus squad --dataset squad dpr dcsr

Reads ``metrics/<corpus>/<m>/<m>/<dataset>.json`` and the same for ``<m>.seed2``, ``<m>.seed3``...
(the runs of a model with ``seeds: N``) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

KS = ("top1", "top5", "top20", "top100")


def seed_rows(results: Path, corpus: str, dataset: str, model: str) -> list[dict]:
    """The metrics of each seed's run of ``model`` that exists (seed 1 is the model itself)."""
    rows, seed = [], 1
    while True:
        name = model if seed == 1 else f"{model}.seed{seed}"
        f = results / "metrics" / corpus / name / name / f"{dataset}.json"
        if not f.exists():
            return rows
        rows.append(json.loads(f.read_text(encoding="utf-8")))
        seed += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    print("| model | seed | " + " | ".join(k.replace("top", "top-") for k in KS) + " |")
    print("|---|---|" + "---:|" * len(KS))
    for m in a.models:
        rows = seed_rows(a.results, a.corpus, a.dataset, m)
        if not rows:
            raise SystemExit(f"{a.results}: no metrics of {m} on {a.dataset}")
        for i, r in enumerate(rows, 1):
            print(f"| {m} | {i} | " + " | ".join(f"{r[k]:.1f}" for k in KS) + " |")
        if len(rows) > 1:
            cells = [f"{statistics.mean(r[k] for r in rows):.1f} ({statistics.stdev(r[k] for r in rows):.1f})" for k in KS]
            print(f"| {m} | mean (sd) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
