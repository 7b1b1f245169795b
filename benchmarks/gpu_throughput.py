"""The GPU throughputs the full-scale resource plan needs (docs/resource-plan.md), on one device.

No model hub is reachable, so the encoder is bert-base-uncased's *shape* with random weights
(12 layers, 768 wide, MiniLM's = BERT's uncased vocabulary): throughput depends on the shape,
not the weights. Measures, each a median of ``--repeats`` runs after a warm-up:
- passage embedding with the pipeline's own ``dcsr.retrieval.embed.encode_texts`` (length-sorted batches,
  title/text pairs, fp16 autocast on CUDA), passages/s at ``--passage-max-length``;
- FAISS exact inner-product search (GPU when faiss sees one), vector-queries/s; with a CPU-only
  FAISS on a GPU machine, also torch's fp16 GEMM + top-k on the GPU (what faiss-gpu's Flat does);
and prints the resource_plan.py flags to pass. Training steps/s: run benchmarks/train_steps.py
with ``--init`` the checkpoint this script writes (``--keep-checkpoint DIR``), under
``torchrun --nproc_per_node 8`` for the paper's batch 16 x 8.

    python benchmarks/gpu_throughput.py --passages 20000 --out benchmarks/out/gpu_throughput.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch

WORDS = ("the of and in to a was is for on as by with he that at from his it an were are which this also be has "
         "had or first new one their after its who her they two been city other when time she school national "
         "team later born year film world war university states united football season members album river").split()


def synthetic_passages(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """100-word passages of common English words (the length is what matters)."""
    rng = np.random.default_rng(seed)
    words = np.array(WORDS)
    texts = [" ".join(rng.choice(words, 100)) for _ in range(n)]
    titles = [" ".join(rng.choice(words, 2)).title() for _ in range(n)]
    return titles, texts


def timed(fn, repeats: int) -> list[float]:
    fn()  # warm-up: CUDA context, kernels, allocator
    out = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return out


def torch_exact_search(index, xq: np.ndarray, k: int, repeats: int) -> dict:
    """Exact inner-product top-k on the GPU in torch, fp16 vectors: what faiss-gpu's ``Flat``
    does (one GEMM, then a k-selection), for a machine whose FAISS has no GPU build."""
    xb = torch.from_numpy(index.reconstruct_n(0, index.ntotal)).to("cuda", torch.float16)
    q = torch.from_numpy(xq).to("cuda", torch.float16)

    def search():
        for chunk in q.split(1024):
            torch.topk(chunk @ xb.T, k, dim=1)

    times = timed(search, repeats)
    return {"vectors": int(index.ntotal), "queries": len(xq), "k": k, "dtype": "float16", "seconds": times,
            "vector_queries_per_s": index.ntotal * len(xq) / statistics.median(times)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=20000)
    ap.add_argument("--passage-max-length", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vectors", type=int, default=2_000_000, help="index size for the search measurement")
    ap.add_argument("--queries", type=int, default=4096)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--shape", choices=("bert-base", "tiny"), default="bert-base", help="tiny: a CPU smoke run")
    ap.add_argument("--keep-checkpoint", default=None, help="write the random bert-base-shaped checkpoint here")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks_common import emit, machine  # benchmarks/ is on sys.path when run as a script

    import faiss

    from dcsr.retrieval.embed import encode_texts, pick_device
    from dcsr.models.biencoder import build_biencoder
    from dcsr.models.checkpoints import VOCAB_OF_TINY, resolve_checkpoint
    from dcsr.models.tiny import make_tiny_bert

    shape = dict(hidden=768, layers=12, heads=12, intermediate=3072) if a.shape == "bert-base" else {}
    device = pick_device("auto")
    result = {"date": date.today().isoformat(), "machine": machine(), "device": str(device), "shape": a.shape}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = make_tiny_bert(Path(a.keep_checkpoint or Path(tmp) / "bert-base-shaped"),
                              resolve_checkpoint(VOCAB_OF_TINY), **shape)
        tokenizer, model = build_biencoder(str(ckpt))
        model.to(device).eval()
        titles, texts = synthetic_passages(a.passages)
        times = timed(lambda: encode_texts(model, tokenizer, texts, titles, "passage", a.passage_max_length,
                                           a.batch_size, device, precision="fp16" if device.type == "cuda" else "fp32", progress=False), a.repeats)
        result["embed"] = {"passages": a.passages, "max_length": a.passage_max_length, "batch_size": a.batch_size,
                           "fp16": device.type == "cuda", "seconds": times,
                           "passages_per_s": a.passages / statistics.median(times)}
    dim = 768
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((a.vectors, dim), dtype=np.float32)
    xq = rng.standard_normal((a.queries, dim), dtype=np.float32)
    index = faiss.IndexFlatIP(dim)
    gpu = hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0
    if gpu:
        index = faiss.index_cpu_to_all_gpus(index)
    index.add(xb)
    del xb
    times = timed(lambda: index.search(xq, a.k), a.repeats)
    rate = a.vectors * a.queries / statistics.median(times)
    result["search"] = {"vectors": a.vectors, "queries": a.queries, "k": a.k, "faiss_gpu": gpu, "seconds": times,
                        "vector_queries_per_s": rate}
    if not gpu and torch.cuda.is_available():
        result["search_torch_cuda"] = torch_exact_search(index, xq, a.k, a.repeats)
        rate = result["search_torch_cuda"]["vector_queries_per_s"]
    result["resource_plan_flags"] = (f"--gpu-embed-passages-per-s {result['embed']['passages_per_s']:.0f} "
                                     f"--gpu-search-vector-queries-per-s {rate:.3g}")
    emit(result, a.out)


if __name__ == "__main__":
    main()
