"""Run some jobs of a Snakemake dry run on a machine that has no Snakemake: a lent GPU node, say
(not a test; benchmarks/index-compression/index-compression.md uses it).

``parse`` reads the text of ``snakemake -n -p ... TARGET`` (each job's rule, input, output, log,
benchmark and shell command, exactly as Snakemake would run it) and keeps the jobs of the named
rules; ``run`` runs them in waves, each job after the jobs whose outputs it reads (``--parallel``
of a wave at a time), with the output, log and benchmark folders made first, as Snakemake does. Each job's wall time
goes to its benchmark file (the ``s`` column that ``benchmarks/rehearsal/rehearsal.py`` reads; peak RSS and
CPU time are in the job's log, ``usage:``):

    snakemake -n -p --configfile C.yaml -- TARGET > dry.txt
    python benchmarks/index-compression/replay_jobs.py parse dry.txt --rules embed_shard,index_shard --root "$PWD" > jobs.json
    python benchmarks/index-compression/replay_jobs.py run jobs.json          # on the other machine, in the repo's root
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

FIELDS = ("input", "output", "log", "benchmark")


def parse(text: str, rules: set[str], root: str) -> list[dict]:
    jobs, job = [], None
    for line in text.splitlines():
        head = line.split()
        if len(head) == 2 and head[0] in ("rule", "localrule") and head[1].endswith(":"):
            job = {"rule": head[1][:-1], **{f: [] for f in FIELDS}}
            continue
        if job is None:
            continue
        key, _, value = line.strip().partition(": ")
        if key in FIELDS:
            job[key] = [v.strip() for v in value.split(", ") if v.strip()]
        elif line.startswith("Shell command: "):
            cmd = line[len("Shell command: "):]
            job["cmd"] = cmd.replace(root.rstrip("/") + "/", "") if root else cmd
            if job["rule"] in rules:
                jobs.append(job)
            job = None
    return jobs


def waves(jobs: list[dict]) -> list[list[dict]]:
    """The jobs in waves: each job reads only outputs (files or folders) of earlier waves."""
    def reads(a, b):
        return any(i == o or i.startswith(o.rstrip("/") + "/") for i in a["input"] for o in b["output"])

    left, out = list(jobs), []
    while left:
        ready = [j for j in left if not any(reads(j, k) for k in left if k is not j)]
        if not ready:
            raise SystemExit("the jobs read each other's outputs in a cycle")
        out.append(ready)
        left = [j for j in left if j not in ready]
    return out


def run(jobs: list[dict], parallel: int = 1) -> None:
    """Run ``jobs`` wave by wave, up to ``parallel`` of a wave at a time."""
    n = 0
    for wave in waves(jobs):
        for start in range(0, len(wave), parallel):
            batch = wave[start:start + parallel]
            running = []
            for job in batch:
                n += 1
                for p in job["output"] + job["log"] + job["benchmark"]:
                    Path(p).parent.mkdir(parents=True, exist_ok=True)
                print(f"[{n}/{len(jobs)}] {job['rule']}: {', '.join(job['output'])}", flush=True)
                running.append((job, time.perf_counter(), subprocess.Popen(["bash", "-c", "set -euo pipefail; " + job["cmd"]])))
            for job, t, proc in running:
                code = proc.wait()
                wall = time.perf_counter() - t
                if code:
                    for log in job["log"]:
                        print(Path(log).read_text(errors="replace")[-3000:] if Path(log).is_file() else "", file=sys.stderr)
                    raise SystemExit(f"{job['rule']} failed ({code}): {job['cmd']}")
                for bench in job["benchmark"]:
                    Path(bench).write_text("s\th:m:s\tmax_rss\tcpu_time\n"
                                           f"{wall:.4f}\t{time.strftime('%H:%M:%S', time.gmtime(wall))}\t-\t-\n")
                print(f"    {job['rule']} {wall:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parse")
    p.add_argument("dry_run", help="the text of snakemake -n -p (- for standard input)")
    p.add_argument("--rules", required=True, help="comma-separated rule names to keep")
    p.add_argument("--root", default="", help="the working directory of the dry run: made relative in commands")
    r = sub.add_parser("run")
    r.add_argument("jobs", help="the JSON that parse wrote")
    r.add_argument("--parallel", type=int, default=1, help="jobs of one wave run at a time")
    a = ap.parse_args()
    if a.cmd == "parse":
        text = sys.stdin.read() if a.dry_run == "-" else Path(a.dry_run).read_text()
        json.dump(parse(text, set(a.rules.split(",")), a.root), sys.stdout, indent=1)
    else:
        run(json.loads(Path(a.jobs).read_text()), a.parallel)


if __name__ == "__main__":
    main()
