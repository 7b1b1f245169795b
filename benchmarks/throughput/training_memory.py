"""How much memory a training process holds for its training set, with and without the random
negatives it never reads (dcsr.training.samples.SampleBuilder.slim).

Every process of a training run (8 under torchrun in the paper configs) reads the whole training
set. This writes a DPR biencoder file of ``--records`` generated records shaped as DPR's
(``--positives`` gold passages, ``--negatives`` random and ``--hard`` BM25 passages a question, each
``--words`` words with a title and DPR's fields), then reads it in a fresh process per mode:

- ``whole``: every record as written (``read_biencoder`` and ``with_positives``: the reading the
  training loop did before ``slim``);
- ``slim``: ``dcsr.training.samples.read_training_records`` with DPR's builder at the paper
  configs' ``other_negatives: 0``, as the loop reads it now.

Each prints the process's RSS after reading (what it holds) and its peak, less the RSS before
reading, in MiB, per record (KiB) and scaled to ``--scale`` records (GiB). Run from the repository root:

    PYTHONPATH=src .venv/bin/python benchmarks/throughput/training_memory.py --records 5000
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from benchmarks_common import machine  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def write_records(path: Path, n: int, positives: int, negatives: int, hard: int, words: int, seed: int) -> None:
    from dcsr.data.formats import write_biencoder

    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(5000)]
    pid = iter(range(10**9))

    def ctx(score: float) -> dict:
        return {"title": " ".join(rng.choices(vocab, k=3)).title(), "text": " ".join(rng.choices(vocab, k=words)),
                "score": score, "title_score": 0, "passage_id": str(next(pid))}

    def records():
        for i in range(n):
            yield {"dataset": "nq_train_psgs_w100", "question": " ".join(rng.choices(vocab, k=9)) + "?",
                   "answers": [rng.choice(vocab)], "positive_ctxs": [ctx(1000.0) for _ in range(positives)],
                   "negative_ctxs": [ctx(0.0) for _ in range(negatives)],
                   "hard_negative_ctxs": [ctx(10.0) for _ in range(hard)]}

    write_biencoder(path, records())


def measure(path: str, mode: str) -> dict:
    from dcsr.data.formats import read_biencoder
    from dcsr.training.samples import read_training_records, with_positives
    from dcsr.training.samples import SampleBuilder, validate_settings

    builder = SampleBuilder(validate_settings({"other_negatives": 0}))
    before = rss_mb()
    if mode == "whole":
        records = with_positives(read_biencoder(path, require_positive=False), path, print)
    else:
        records = read_training_records(path, builder, print)
    held = rss_mb() - before
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    return {"mode": mode, "records": len(records), "held_mb": round(held, 1), "peak_mb": round(peak, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5000)
    ap.add_argument("--positives", type=int, default=1)
    ap.add_argument("--negatives", type=int, default=50, help="random negatives a question (DPR's files: 50)")
    ap.add_argument("--hard", type=int, default=30, help="BM25 hard negatives a question")
    ap.add_argument("--words", type=int, default=100, help="words a passage (DPR's psgs_w100: 100)")
    ap.add_argument("--scale", type=int, default=58880, help="records to scale to (DPR's NQ training set: 58,880)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "out" / "training-memory"))
    ap.add_argument("--measure", nargs=2, metavar=("FILE", "MODE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.measure:
        print(json.dumps(measure(*a.measure)))
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"train-{a.records}-{a.positives}-{a.negatives}-{a.hard}-{a.words}.json"
    if not path.exists():
        write_records(path, a.records, a.positives, a.negatives, a.hard, a.words, seed=0)
    size_mb = path.stat().st_size / 2**20
    print(f"{machine()}; {path.name}: {size_mb:.1f} MiB on disk, {size_mb / a.records * a.scale / 1024:.2f} GiB "
          f"at {a.scale:,} records")
    for mode in ("whole", "slim"):
        r = subprocess.run([sys.executable, __file__, "--measure", str(path), mode], capture_output=True, text=True,
                           check=True, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
        res = json.loads(r.stdout.strip().splitlines()[-1])
        per = res["held_mb"] / res["records"]
        print(f"{mode}: {res['records']} records held {res['held_mb']:.1f} MiB (peak {res['peak_mb']:.1f} MiB), "
              f"{per * 1024:.1f} KiB a record; at {a.scale:,} records {per * a.scale / 1024:.2f} GiB a process")


if __name__ == "__main__":
    main()
