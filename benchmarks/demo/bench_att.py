"""Step time of the demo's training with attention dropout on or off: the first ``--steps`` (10)
batches of ``dpr-a`` (or ``dcsr-a``) through the trainer's own ``Trainer.step``, one thread, the
median of steps 3 to the last (benchmarks/demo/demo.md, "Attention dropout off").

    python benchmarks/demo/bench_att.py AMP ATTENTION METHOD [--steps 10] [--threads 1] \\
        [--train results/bm25/negatives/squad-a-train.json] [--dev results/data/squad/squad-a-dev.json]
    python benchmarks/demo/bench_att.py bf16 1 dpr     # as the demo trains (attention dropout 0.1)
    python benchmarks/demo/bench_att.py bf16 0 dpr     # train.attention_dropout: 0

AMP is the ``amp`` setting (off, bf16, auto); ATTENTION is 1 (the checkpoint's attention
dropout, MiniLM's 0.1) or 0 (none: torch's fused attention kernel); METHOD is dpr or dcsr. The
settings and data are those of ``prof_train.py`` beside it (make the data as its docstring says).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from prof_train import RESULTS, demo_trainer  # benchmarks/demo/ is on sys.path when run as a script


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("amp", help="off, bf16 or auto")
    ap.add_argument("attention", type=int, choices=[0, 1], help="1: attention dropout as the checkpoint's; 0: none")
    ap.add_argument("method", choices=["dpr", "dcsr"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--train", type=Path, default=RESULTS / "bm25" / "negatives" / "squad-a-train.json")
    ap.add_argument("--dev", type=Path, default=RESULTS / "data" / "squad" / "squad-a-dev.json")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    over = {"amp": a.amp, "max_steps": a.steps, **({} if a.attention else {"attention_dropout": 0})}
    seconds = []
    with tempfile.TemporaryDirectory(prefix="bench-att-") as tmp:
        trainer = demo_trainer(a.train, a.dev, Path(tmp), a.method, **over)
        for batch in trainer.epoch_batches():
            t = time.perf_counter()
            trainer.step(batch)
            seconds.append(time.perf_counter() - t)
            print(f"step {len(seconds)}: {seconds[-1]:.2f} s", flush=True)
    timed = seconds[2:] or seconds
    print(f"{a.method}, amp {a.amp}, attention dropout {'on' if a.attention else 'off'}, "
          f"{torch.get_num_threads()} thread(s): median step {statistics.median(timed):.2f} s "
          f"(steps {len(seconds) - len(timed) + 1}-{len(seconds)})")


if __name__ == "__main__":
    main()
