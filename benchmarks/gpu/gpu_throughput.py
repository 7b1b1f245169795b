"""Passage-embedding throughput on one device with the pipeline's own encoding (dcsr.retrieval.embed), on real text.

Passages: the vendored 36 SQuAD dev articles cut into DPR's 100-word passages (1,935: config.yaml's
``squad`` corpus), repeated to ``--passages``. Encoder: bert-base's shape with random weights (throughput
depends on the shape, not the weights; no model hub here) and bert-base-uncased's tokenizer where cached,
else the MiniLM package's (the same uncased WordPiece vocabulary: 30,522 entries, the same special ids).
Paths: DPR's (``encode_texts``, title/text pairs, CLS) and DCSR's (``encode_sentence_passages``: a
``<sent>`` marker before each blingfire sentence, one vector per marker). Per path:
- mean real tokens per passage (DCSR's with its markers), FLOPs per passage;
- tokenize-only passages/s: the host side alone (tokenize, pad, collate: one Python thread, the Rust
  tokenizer on one core or all, TOKENIZERS_PARALLELISM false / true) with an encoder that computes
  nothing: the GPU goes no faster than the thread feeding it. Timed runs use ``--tokenizers-parallelism``
  (default true; the pipeline's scripts default to false, dcsr.cli);
- per ``--compile`` setting and ``--batch-sizes`` (then the middle size with no tokenizing thread):
  passages/s (median of ``--repeats`` after a warm-up, timed as ``first_call_s``: compilation), TFLOP/s
  achieved and its share of ``--peak-tflops``, padding tokens run besides, peak GPU memory;
- ``--profile``: torch.profiler's top ops of one batch (by self CUDA time; CPU time on a CPU);
- ``--backends torch torch-cast``: also the last batch size (with the tokenizing thread) and the profile
  with the passage encoder's weights cast to the compute precision (``embed.backend: torch-cast``).

FLOPs of a passage of T real tokens, encoder of n layers, width h, FFN width i (a multiply-add is 2):
    2 * T * n * (4 h^2 + 2 h i)    linear layers: Q, K, V, output (4 h^2), FFN (2 h i); = 2 * params * T
  + 4 * n * T^2 * h               attention: Q K^T and A V, T^2 h multiply-adds each per layer
(embeddings, norms, softmax, GELU: elementwise, left out; padding not counted). bert-base, T = 150: 26.3
GFLOP. ``--vectors`` > 0 also times exact inner-product search for resource_plan.py's flags.

    python benchmarks/gpu/gpu_throughput.py --passages 30000 --repeats 2 --compile both --profile --vectors 0 \
        --out benchmarks/out/gpu_throughput.json
    python benchmarks/gpu/gpu_throughput.py --passages 48 --layers 2 --hidden 64 --heads 2 --intermediate 128 \
        --batch-sizes 16 --vectors 0 --out /tmp/smoke.json       # a CPU smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
SQUAD = Path(__file__).resolve().parents[2] / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"


def flops(lengths: np.ndarray, layers: int, hidden: int, intermediate: int) -> float:
    """The forward FLOPs of passages of ``lengths`` real tokens (the module docstring's formula)."""
    t = lengths.astype(np.float64)
    return float((2 * t * layers * (4 * hidden**2 + 2 * hidden * intermediate) + 4 * layers * t**2 * hidden).sum())


def padded_tokens(lengths: np.ndarray, keep: np.ndarray, batch_size: int, multiple: int) -> int:
    """Tokens the encoder runs, padding included, batched as dcsr.retrieval.embed batches (per chunk,
    length-sorted, rows without a vector left out, lengths rounded up to ``multiple``)."""
    from dcsr.retrieval.batching import length_sorted_batches
    from dcsr.retrieval.embed import TOKENIZE_CHUNK

    total = 0
    for lo in range(0, len(lengths), TOKENIZE_CHUNK):
        part, kept = lengths[lo:lo + TOKENIZE_CHUNK], keep[lo:lo + TOKENIZE_CHUNK]
        for rows in length_sorted_batches(part, batch_size):
            rows = rows[kept[rows]]
            total += len(rows) * -(-int(part[rows].max(initial=0)) // multiple) * multiple
    return total


class NullEncoder:
    """A BiEncoder stand-in that computes nothing: encoding with it times the host side alone."""

    def __init__(self, hidden: int):
        self.hidden_size = hidden

    def encode_passages(self, input_ids, attention_mask, token_type_ids=None, pool_positions=None, **_):
        return torch.zeros(len(input_ids) if pool_positions is None else len(pool_positions), self.hidden_size)


def tokenizer_dir() -> tuple[str, str]:
    """``(name, folder)`` of bert-base-uncased's tokenizer where the Hugging Face cache holds it, else of
    the MiniLM package's (the same vocabulary); the folder holds its vocab.txt (make_tiny_bert's vocabulary)."""
    from transformers.utils import cached_file

    from dcsr.models.checkpoints import VOCAB_OF_TINY, resolve_checkpoint

    try:
        vocab = cached_file("bert-base-uncased", "vocab.txt", local_files_only=True)
        return "bert-base-uncased", str(Path(vocab).parent)
    except (OSError, ValueError, TypeError):
        return VOCAB_OF_TINY, resolve_checkpoint(VOCAB_OF_TINY)


def top_ops(fn, cuda: bool, top: int = 15) -> list[dict]:
    """torch.profiler's ``top`` ops of one call of ``fn`` by self device time (CPU time on a CPU)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        fn()
        torch.cuda.synchronize() if cuda else None
    dev = lambda e, k: getattr(e, f"{k}device_time_total", getattr(e, f"{k}cuda_time_total", 0))  # noqa: E731
    key = (lambda e: dev(e, "self_")) if cuda else (lambda e: e.self_cpu_time_total)
    events = list(prof.key_averages())
    whole = sum(key(e) for e in events) or 1
    return [{"op": e.key, "calls": e.count, "self_ms": key(e) / 1e3, "share": key(e) / whole,
             "device_total_ms": dev(e, "") / 1e3, "cpu_total_ms": e.cpu_time_total / 1e3}
            for e in sorted(events, key=key, reverse=True)[:top]]


def search(a, result: dict) -> float:
    """Exact inner-product search's vector-queries/s (FAISS; torch on a GPU without faiss-gpu)."""
    import faiss
    from benchmarks_common import timed

    rng = np.random.default_rng(0)
    xb, xq = (rng.standard_normal((n, 768), dtype=np.float32) for n in (a.vectors, a.queries))
    gpu = hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0
    index = faiss.index_cpu_to_all_gpus(faiss.IndexFlatIP(768)) if gpu else faiss.IndexFlatIP(768)
    index.add(xb)
    _, times = timed(lambda: index.search(xq, a.k), a.repeats)
    rate = a.vectors * a.queries / statistics.median(times)
    result["search"] = {"vectors": a.vectors, "queries": a.queries, "k": a.k, "faiss_gpu": gpu, "seconds": times,
                        "vector_queries_per_s": rate}
    if not gpu and torch.cuda.is_available():  # what faiss-gpu's Flat does: an fp16 GEMM, then top-k
        base, q = torch.from_numpy(xb).to("cuda", torch.float16), torch.from_numpy(xq).to("cuda", torch.float16)
        _, times = timed(lambda: [torch.topk(c @ base.T, a.k, dim=1) for c in q.split(1024)], a.repeats)
        rate = a.vectors * a.queries / statistics.median(times)
        result["search_torch_cuda"] = {"dtype": "float16", "seconds": times, "vector_queries_per_s": rate}
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=10000, help="SQuAD's 1,935 passages repeated to this many")
    ap.add_argument("--max-length", "--passage-max-length", type=int, default=256)
    ap.add_argument("--max-sentences", type=int, default=10, help="DCSR's markers per passage")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 512, 1024])
    ap.add_argument("--compile", choices=("off", "on", "both"), default="off", help="torch.compile(dynamic=True)")
    ap.add_argument("--backends", nargs="+", choices=("torch", "torch-cast"), default=["torch"],
                    help="embed.backend: torch (fp32 weights, autocast) and/or torch-cast (the passage encoder's "
                         "weights cast to the compute precision once); torch-cast runs the last batch size alone, "
                         "with the tokenizing thread, and is left out where the precision is fp32 (nothing to cast)")
    ap.add_argument("--precision", default="auto", help="embed.precision (auto: bf16 on an H100)")
    ap.add_argument("--paths", nargs="+", choices=("dpr", "dcsr"), default=["dpr", "dcsr"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=790.0, help="the device's dense peak (H100 bf16: 790)")
    ap.add_argument("--profile", action="store_true", help="torch.profiler's top ops of one batch per path")
    ap.add_argument("--tokenizers-parallelism", choices=("true", "false"), default="true",
                    help="TOKENIZERS_PARALLELISM for the timed runs (the pipeline's scripts default to false)")
    for name, default in (("layers", 12), ("hidden", 768), ("heads", 12), ("intermediate", 3072)):
        ap.add_argument(f"--{name}", type=int, default=default, help="the encoder's shape (default bert-base's)")
    ap.add_argument("--vectors", type=int, default=2_000_000, help="index size for the search measurement (0: none)")
    ap.add_argument("--queries", type=int, default=4096)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--keep-checkpoint", default=None, help="write the random encoder here (train_steps.py --init)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks_common import emit, machine, timed

    import dcsr.retrieval.batching as batching
    import dcsr.retrieval.embed as embed
    from dcsr.data.sentences import split_sentences
    from dcsr.data.squad import squad_to_dpr
    from dcsr.models.biencoder import build_biencoder, tokenize_passages
    from dcsr.models.markers import encode_passages_with_markers, ensure_sentence_marker
    from dcsr.models.precision import resolve
    from dcsr.models.tiny import make_tiny_bert

    device = embed.pick_device("auto")
    cuda, cpu = device.type == "cuda", torch.device("cpu")
    precision = resolve(a.precision, device.type)
    shape = dict(layers=a.layers, hidden=a.hidden, heads=a.heads, intermediate=a.intermediate)
    base = squad_to_dpr(SQUAD).passages
    unique = len(base)
    base = base[:a.passages]
    spans_base = [split_sentences(p.text) for p in base]
    pick = np.arange(a.passages) % len(base)
    titles, texts, spans = [base[i].title for i in pick], [base[i].text for i in pick], [spans_base[i] for i in pick]
    with tempfile.TemporaryDirectory() as tmp:
        tok_name, tok_dir = tokenizer_dir()
        ckpt = make_tiny_bert(Path(a.keep_checkpoint or Path(tmp) / "encoder"), tok_dir, **shape)
        tokenizer, model = build_biencoder(str(ckpt), pooling="cls")
    model.to(device).eval()
    attention = embed.use_sdpa(model) if cuda else [model.passage_model.config._attn_implementation]
    marker = ensure_sentence_marker(tokenizer)
    # real tokens per passage (DCSR's with its markers), in run order: passage j is base[j % len(base)]
    enc = tokenize_passages(tokenizer, [p.title for p in base], [p.text for p in base], a.max_length, padding=False)
    marked = encode_passages_with_markers(tokenizer, [p.title for p in base], [p.text for p in base], spans_base,
                                          a.max_length, a.max_sentences, marker)
    lengths = {"dpr": np.array([len(x) for x in enc["input_ids"]])[pick],
               "dcsr": np.array([len(e[0]) for e in marked])[pick]}
    vectors = {"dpr": np.ones(a.passages, dtype=np.int64), "dcsr": np.array([len(e[2]) for e in marked])[pick]}
    multiple = embed.CUDA_PAD_MULTIPLE if cuda else 1

    def run(path, m, batch_size, dev=device, n=a.passages, precision=precision, **kw):
        if path == "dpr":
            return embed.encode_texts(m, tokenizer, texts[:n], titles[:n], "passage", a.max_length, batch_size, dev,
                                      precision=precision, progress=False, **kw)
        return embed.encode_sentence_passages(m, tokenizer, titles[:n], texts[:n], spans[:n], a.max_length,
                                              a.max_sentences, batch_size, dev, precision=precision, progress=False,
                                              **kw)

    result = {"date": date.today().isoformat(), "machine": machine(), "device": str(device), "precision": precision,
              "peak_tflops": a.peak_tflops, "passages": a.passages, "max_length": a.max_length,
              "tokenizers_parallelism": a.tokenizers_parallelism,
              "corpus": {"source": str(SQUAD.relative_to(SQUAD.parents[2])), "unique_passages": unique,
                         "passage_words": 100, "sentence_splitter": "blingfire"},
              "encoder": {**shape, "vocab": model.passage_model.config.vocab_size, "tokenizer": tok_name,
                          "attention": attention[0], "pooling": "cls", "pad_multiple": multiple,
                          "in_flight": batching.IN_FLIGHT},
              "paths": {}}
    compiles = {"off": [False], "on": [True], "both": [False, True]}[a.compile]
    models = {"torch": (model, precision)}
    if "torch-cast" in a.backends and embed.resolve_backend("torch-cast", device.type, precision) == "torch-cast":
        import copy

        twin = copy.deepcopy(model)  # the passage encoder's weights in the compute precision, run without autocast
        models["torch-cast"] = (twin, embed.cast_passage_encoder(twin, precision))
    result["backends"] = [b for b in models if b in a.backends]
    total = {path: flops(lengths[path][vectors[path] > 0], a.layers, a.hidden, a.intermediate) for path in a.paths}
    for path in a.paths:
        host = {}
        for parallel in ("false", "true"):  # the Rust tokenizer on one core, or on all of them
            os.environ["TOKENIZERS_PARALLELISM"] = parallel
            t = time.perf_counter()
            run(path, NullEncoder(a.hidden), a.batch_sizes[0], cpu, prefetch=0, pad_multiple=multiple)
            host[parallel] = time.perf_counter() - t
        os.environ["TOKENIZERS_PARALLELISM"] = a.tokenizers_parallelism
        result["paths"][path] = {
            "tokens_per_passage_mean": float(lengths[path].mean()),
            "gflop_per_passage_mean": total[path] / a.passages / 1e9,
            "vectors_per_passage": float(vectors[path].mean()),
            "tokenize_only": {f"tokenizers_parallelism_{k}": {"seconds": v, "passages_per_s": a.passages / v}
                              for k, v in host.items()}, "runs": []}
    for compiled, backend in [(c, b) for c in compiles for b in result["backends"]]:
        m, run_precision = models[backend]
        if compiled:
            embed.compile_encoders(m)
        for path in a.paths:
            real = int(lengths[path][vectors[path] > 0].sum())
            # each batch size as the pipeline runs it, then the middle one with no tokenizing thread (prefetch 0)
            middle = a.batch_sizes[len(a.batch_sizes) // 2]
            sizes = a.batch_sizes if backend == "torch" else a.batch_sizes[-1:]  # torch-cast: the last size alone
            for batch_size, prefetch in [(b, None) for b in sizes] + [(middle, 0)] * (backend == "torch"):
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
                first, times = timed(lambda: run(path, m, batch_size, prefetch=prefetch, precision=run_precision),
                                     a.repeats)
                tflops = total[path] / statistics.median(times) / 1e12
                result["paths"][path]["runs"].append({
                    "backend": backend, "compile": compiled, "batch_size": batch_size,
                    "prefetch": embed.prefetch_depth(prefetch, batch_size, device),
                    "first_call_s": first, "seconds": times, "passages_per_s": a.passages / statistics.median(times),
                    "tflops": tflops, "peak_share": tflops / a.peak_tflops,
                    "padded_share": 1 - real / padded_tokens(lengths[path], vectors[path] > 0, batch_size, multiple),
                    "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if cuda else None})
                print(path, result["paths"][path]["runs"][-1], flush=True)
            if a.profile and compiled == compiles[0]:
                size = a.batch_sizes[len(a.batch_sizes) // 2]
                result.setdefault("profile", {})[path if backend == "torch" else f"{path} {backend}"] = {
                    "batch_size": size, "compile": compiled, "backend": backend,
                    "by": "self CUDA time" if cuda else "self CPU time",
                    "top_ops": top_ops(lambda: run(path, m, size, n=min(size, a.passages), precision=run_precision),
                                       cuda)}
    for p in result["paths"].values():
        p["best"] = max(p["runs"], key=lambda r: r["passages_per_s"])
    flags = ""
    for path, flag in (("dpr", "--gpu-embed-passages-per-s"), ("dcsr", "--gpu-embed-passages-per-s-dcsr")):
        eager = [r for r in result["paths"].get(path, {}).get("runs", []) if not r["compile"] and r["backend"] == "torch"]
        if eager:
            flags += f" {flag} {max(r['passages_per_s'] for r in eager):.0f}"
    if a.vectors > 0:
        flags += f" --gpu-search-vector-queries-per-s {search(a, result):.3g}"
    result["resource_plan_flags"] = flags.strip()
    emit(result, a.out)


if __name__ == "__main__":
    main()
