"""Where a pipeline run's time went: job time by rule, from Snakemake's benchmark files.

    python benchmarks/demo/job_times.py --results results [--out benchmarks/out/job_times.json]

Every rule writes ``<results>/benchmarks/<rule>/<name>.tsv`` (Snakemake's ``benchmark:``: wall
seconds ``s``, peak RSS ``max_rss`` in MB). Prints, per rule, the jobs, the summed and the
longest job time, and the peak RSS, longest first; and the total.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def job_times(results: str) -> dict:
    out = {}
    for tsv in sorted(Path(results, "benchmarks").glob("*/**/*.tsv")):
        rule = tsv.relative_to(Path(results, "benchmarks")).parts[0]
        with open(tsv, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        for row in rows[-1:]:  # a rerun appends a line: the last is this run's
            r = out.setdefault(rule, {"jobs": 0, "seconds": 0.0, "longest": 0.0, "max_rss_mb": 0.0})
            s = float(row["s"])
            r["jobs"] += 1
            r["seconds"] += s
            r["longest"] = max(r["longest"], s)
            try:
                r["max_rss_mb"] = max(r["max_rss_mb"], float(row["max_rss"]))
            except (KeyError, ValueError):
                pass
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["seconds"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    times = job_times(a.results)
    total = sum(r["seconds"] for r in times.values())
    print(f"{'rule':<26} {'jobs':>5} {'job s':>8} {'longest':>8} {'RSS MB':>8}")
    for rule, r in times.items():
        print(f"{rule:<26} {r['jobs']:>5} {r['seconds']:>8.1f} {r['longest']:>8.1f} {r['max_rss_mb']:>8.0f}")
    print(f"{'total':<26} {sum(r['jobs'] for r in times.values()):>5} {total:>8.1f}")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"results": a.results, "rules": times, "total_s": total}, indent=1) + "\n")


if __name__ == "__main__":
    main()
