"""Where one training step of the demo's ``dpr-a`` goes: ``torch.profiler`` over the trainer's own
``Trainer.step`` (forward, backward, optimizer) on the demo's first batch, 16 questions and 32
passages (each question's positive and one BM25 hard negative), one thread by default.

The training settings are ``train:`` of ``config/config.yaml`` (batch 16, lengths 64 / 192,
``amp: auto``: bf16 on a CPU with AMX or AVX-512 BF16, else fp32), DCSR's ``dcsr:`` keys with
``--method dcsr``. The data are the demo's squad-a training and dev files; make them once with

    snakemake --cores 2 --profile profiles/local results/bm25/negatives/squad-a-train.json

then (benchmarks/demo/demo.md, "What 8 minutes would take" and "Attention dropout off"):

    python benchmarks/demo/prof_train.py [--amp off|bf16] [--attention-dropout 0] [--threads 1] \\
        [--train results/bm25/negatives/squad-a-train.json] [--dev results/data/squad/squad-a-dev.json]

It prints the batch's padded shapes and real tokens, the step's time, and the profiler's table
sorted by self CPU time. ``--warmup N`` runs N steps before the profiled one (default 0: the
first step, as the page's numbers). Nothing is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[2]
RESULTS = Path("results")


def demo_trainer(train: Path, dev: Path, tmp: Path, method: str = "dpr", config: Path = REPO / "config" / "config.yaml",
                 **overrides):
    """A :class:`dcsr.training.loop.Trainer` of the demo's training settings (``config``'s
    ``train:``, and its ``dcsr:`` keys for ``method`` dcsr) plus ``overrides``, set up (data,
    model from ``encoders.minilm``, optimizer) and ready to step; it writes under ``tmp`` only."""
    from dcsr.settings import DCSR_TRAIN, LAUNCH
    from dcsr.training.distributed import setup_distributed
    from dcsr.training.loop import Trainer
    from dcsr.training.methods import builder_class
    from dcsr.training.samples import validate_settings

    cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
    settings = {k: v for k, v in cfg["train"].items() if k not in LAUNCH}
    if method == "dcsr":
        settings.update({k: v for k, v in cfg["dcsr"].items() if k in DCSR_TRAIN})
    settings.update(overrides)
    builder = builder_class(method)
    ctx, _ = setup_distributed()
    trainer = Trainer(validate_settings(settings, builder.SETTINGS), train, dev, cfg["encoders"]["minilm"],
                      tmp / "out", tmp / "ckpt", lambda msg: None, builder, ctx)
    trainer.setup()
    return trainer


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=Path, default=RESULTS / "bm25" / "negatives" / "squad-a-train.json")
    ap.add_argument("--dev", type=Path, default=RESULTS / "data" / "squad" / "squad-a-dev.json")
    ap.add_argument("--method", default="dpr", choices=["dpr", "dcsr"])
    ap.add_argument("--amp", default=None, help="off, bf16 (default: the config's, auto)")
    ap.add_argument("--attention-dropout", type=float, default=None, help="0: torch's fused attention (default: "
                                                                          "the checkpoint's 0.1)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0, help="steps before the profiled one")
    ap.add_argument("--rows", type=int, default=25, help="rows of the profiler's table")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    over = {k: v for k, v in {"amp": a.amp, "attention_dropout": a.attention_dropout}.items() if v is not None}
    with tempfile.TemporaryDirectory(prefix="prof-train-") as tmp:
        trainer = demo_trainer(a.train, a.dev, Path(tmp), a.method, **over)
        batches = iter(trainer.epoch_batches())
        for _ in range(a.warmup):
            trainer.step(next(batches))
        batch = next(batches)
        p_mask = batch.p["attention_mask"]
        print(f"{a.method}, amp {trainer.amp_dtype or 'off (fp32)'}, {torch.get_num_threads()} thread(s); batch: "
              f"{tuple(batch.q['input_ids'].shape)} question tokens, {tuple(batch.p['input_ids'].shape)} passage "
              f"tokens, {int(p_mask.sum())} real of {p_mask.numel()} ({1 - p_mask.float().mean():.0%} padding)")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            t = time.perf_counter()
            trainer.step(batch)
            seconds = time.perf_counter() - t
    print(f"step {seconds:.2f} s (profiled)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.rows))


if __name__ == "__main__":
    main()
