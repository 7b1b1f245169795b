"""The rehearsal's cost curves: per rule, time, CPU time, peak RSS and disk at each
corpus size N, their log-log slopes against N, and the largest run predicted from the smaller.

    python benchmarks/rehearsal/rehearsal.py --run 10000=results-rehearsal-10k --run 100000=results-rehearsal-100k \\
        --run 1000000=results-rehearsal-1m [--json benchmarks/out/rehearsal.json] [--md table.md]

Per job it reads Snakemake's benchmark file (``<results>/benchmarks/<rule>/<name>.tsv``: wall
``s``) and the job's log (``<results>/logs/<rule>/<name>.log``), whose last ``usage:`` line
(:func:`dcsr.cli.log_usage`) gives the exact peak RSS of the script's process and of its largest
child, and their CPU time; the benchmark file's ``max_rss`` and ``cpu_time`` (sampled every
30 s after 15 s) stand in for a job without one. Per rule: jobs, the largest job's wall time,
the rule's summed wall and CPU time, the largest peak RSS of one job, and the MB its outputs
hold on disk (:func:`disk_by_rule`, from run with ``--workdir``).

The prediction for the largest N is affine in N, calibrated on the two smallest runs (a fixed
cost plus a cost per passage: ``v2 + max(0, (v2 - v1) / (N2 - N1)) (N3 - N2)``), the model the
resource plan uses (a job's memory is the process plus its data). ``off`` flags a measurement more than
25% from its prediction. The slope is the least-squares slope of log(value) against log(N)
over all runs: about 0 for a cost that does not grow with N, 1 for one that grows linearly.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import math
import os
import re
from pathlib import Path

USAGE = re.compile(r"usage: peak_rss_mb=([0-9.]+) children_peak_rss_mb=([0-9.]+) cpu_s=([0-9.]+)")
METRICS = ("jobs", "wall_max_s", "wall_sum_s", "cpu_sum_s", "rss_max_mb", "disk_mb")
TOLERANCE = 0.25


def job_records(results: str | Path) -> list[dict]:
    """One record per job of a run: its rule, name, wall and CPU seconds, peak RSS."""
    root = Path(results)
    out = []
    for tsv in sorted((root / "benchmarks").glob("*/**/*.tsv")):
        rel = tsv.relative_to(root / "benchmarks")
        with open(tsv, encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if not rows:
            continue
        row = rows[-1]  # a rerun appends a line: the last is this run's
        rec = {"rule": rel.parts[0], "job": str(rel.with_suffix("")), "wall_s": float(row["s"]),
               "cpu_s": _num(row.get("cpu_time")), "rss_mb": _num(row.get("max_rss")),
               "rss_from": "benchmark (sampled)"}
        log = root / "logs" / rel.with_suffix(".log")
        if log.is_file():
            found = USAGE.findall(log.read_text(encoding="utf-8", errors="replace"))
            if found:
                own, kids, cpu = map(float, found[-1])
                rec["rss_mb"], rec["rss_from"], rec["cpu_s"] = max(own, kids), "log (getrusage)", cpu
        out.append(rec)
    return out


def disk_by_rule(results: str | Path, workdir: str | Path = ".") -> dict[str, float]:
    """MB on disk of the outputs each rule left under ``results``, from Snakemake's metadata
    (``<workdir>/.snakemake/metadata``: one record per output, named by its base64 path, that
    names the rule); temporary outputs (search hits) are gone and count 0. Snakemake's
    ``io_out`` is not used: it counts block writes, and a job's writes still in the page cache
    when it ends are missed."""
    meta = Path(workdir) / ".snakemake" / "metadata"
    prefix = str(results).rstrip("/") + "/"
    out: dict[str, float] = {}
    for dirpath, _, files in os.walk(meta):
        for name in files:
            enc = str(Path(dirpath, name).relative_to(meta)).replace(os.sep, "")
            try:
                path = base64.urlsafe_b64decode(enc + "=" * (-len(enc) % 4)).decode("utf-8")
                rule = json.loads(Path(dirpath, name).read_text(encoding="utf-8"))["rule"]
            except (ValueError, KeyError, UnicodeDecodeError):
                continue
            if not path.startswith(prefix):
                continue
            full = Path(workdir) / path
            size = (sum(f.stat().st_size for f in full.rglob("*") if f.is_file()) if full.is_dir()
                    else full.stat().st_size if full.exists() else 0)
            out[rule] = out.get(rule, 0.0) + size / 1e6
    return out


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def per_rule(records: list[dict]) -> dict[str, dict]:
    rules: dict[str, dict] = {}
    for r in records:
        a = rules.setdefault(r["rule"], {"jobs": 0, "wall_max_s": 0.0, "wall_sum_s": 0.0, "cpu_sum_s": 0.0,
                                         "rss_max_mb": 0.0, "disk_mb": 0.0, "rss_sampled_jobs": 0})
        a["jobs"] += 1
        a["wall_max_s"] = max(a["wall_max_s"], r["wall_s"])
        a["wall_sum_s"] += r["wall_s"]
        a["cpu_sum_s"] += r["cpu_s"]
        a["rss_max_mb"] = max(a["rss_max_mb"], r["rss_mb"])
        a["rss_sampled_jobs"] += r["rss_from"] != "log (getrusage)"
    return rules


def loglog_slope(ns: list[float], values: list[float]) -> float | None:
    pts = [(math.log(n), math.log(v)) for n, v in zip(ns, values) if v > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx else None


def affine_prediction(ns: list[float], values: list[float]) -> float | None:
    """The last run's value from the first two, affine in N: the second value plus the cost per
    passage between the two (none when it fell: a cost does not shrink as the corpus grows)."""
    if len(ns) < 3:
        return None
    (n1, n2, n3), (v1, v2) = ns[:3], values[:2]
    return v2 + max(0.0, (v2 - v1) / (n2 - n1)) * (n3 - n2)


def curves(runs: dict[int, dict[str, dict]]) -> dict[str, dict]:
    ns = sorted(runs)
    out = {}
    for rule in sorted({r for run in runs.values() for r in run}):
        row = {}
        for m in METRICS:
            vals = [runs[n].get(rule, {}).get(m, 0.0) for n in ns]
            pred = affine_prediction(ns, vals) if len(ns) >= 3 else None
            meas = vals[-1]
            row[m] = {"values": vals, "slope": loglog_slope(ns, vals), "predicted": pred,
                      "off": (pred is not None and max(meas, pred) > 0
                              and abs(meas - pred) > TOLERANCE * max(pred, 1e-9))}
        row["rss_sampled_jobs"] = [runs[n].get(rule, {}).get("rss_sampled_jobs", 0) for n in ns]
        out[rule] = row
    return out


def markdown(ns: list[int], table: dict[str, dict]) -> str:
    def f(v: float) -> str:
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"

    lines = []
    head = " / ".join(f"{n:,}" for n in ns)
    for m, title in (("wall_max_s", "largest job, wall s"), ("wall_sum_s", "all jobs, wall s"),
                     ("cpu_sum_s", "all jobs, CPU s"), ("rss_max_mb", "peak RSS of one job, MB"),
                     ("disk_mb", "outputs kept on disk, MB")):
        lines += [f"#### {title}", "",
                  f"| rule | jobs | at N = {head} | slope | predicted at {ns[-1]:,} (affine, from the two smaller) | measured / predicted |",
                  "|---|---:|---:|---:|---:|---:|"]
        for rule, row in table.items():
            c = row[m]
            vals = " / ".join(f(v) for v in c["values"])
            slope = "" if c["slope"] is None else f"{c['slope']:+.2f}"
            pred = "" if c["predicted"] is None else f(c["predicted"])
            ratio = ("" if not c["predicted"] else f"{c['values'][-1] / c['predicted']:.2f}"
                     + (" **off**" if c["off"] else ""))
            jobs = "/".join(str(int(v)) for v in row["jobs"]["values"])
            lines.append(f"| {rule} | {jobs} | {vals} | {slope} | {pred} | {ratio} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True, help="N=results folder of the run at N passages")
    ap.add_argument("--workdir", default=".", help="the folder Snakemake ran in (its .snakemake/metadata)")
    ap.add_argument("--json")
    ap.add_argument("--md")
    a = ap.parse_args()
    runs, records = {}, {}
    for spec in a.run:
        n, _, path = spec.partition("=")
        records[int(n)] = job_records(path)
        runs[int(n)] = per_rule(records[int(n)])
        for rule, mb in disk_by_rule(path, a.workdir).items():
            runs[int(n)].setdefault(rule, {}).update(disk_mb=mb)
    ns = sorted(runs)
    table = curves(runs)
    md = markdown(ns, table)
    print(md)
    if a.md:
        Path(a.md).write_text(md + "\n", encoding="utf-8")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"runs": {str(n): records[n] for n in ns}, "curves": table}, indent=1) + "\n")


if __name__ == "__main__":
    main()
