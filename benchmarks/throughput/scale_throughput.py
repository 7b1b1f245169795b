"""CPU throughputs behind the full-scale resource plan (docs/resource-plan.md).

Measures, on this machine, what a CPU can measure of the full run (each a median of
``--repeats`` runs):

(a) streaming a DPR corpus with ``dcsr.data.formats.iter_passages`` from ``.tsv`` and ``.tsv.gz``
    (what ``subset_corpus``, ``split_sentences``, every ``embed_shard`` (``shard_passages``) and
    every ``merge_runs`` (``evaluate_run`` -> ``passage_texts``) do with the whole corpus), and
    the host memory one embed job's share of passages takes once held in Python lists;
(b) sentence splitting as ``split_sentences`` runs it (``dcsr.data.sentences.split_corpus``:
    passages/s, sentences per passage, table bytes per sentence);
(c) exact FAISS inner-product search on the CPU (``IndexFlatIP`` through ``dcsr.retrieval.index``, 768-d):
    index build time and peak memory from a float16 ``.npy`` (as ``index_shard`` reads it), and
    queries/s at k = 100 and at DCSR's depth 100 x k;
(d) bytes on disk per vector: ``.npy`` at fp16 / fp32, the ids and sentence-number files, the
    FAISS file, checked against the arithmetic.

The corpus is synthetic but made of real text: the SQuAD v1.1 dev articles cut into 100-word
passages (as ``prepare_squad`` and DPR cut Wikipedia), repeated under fresh ids up to
``--passages``, written to ``--workdir`` (never into the repository).

    python benchmarks/throughput/scale_throughput.py --squad dev-v1.1.json \
        --out benchmarks/out/scale_throughput.json
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import gzip
import multiprocessing as mp
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
from benchmarks_common import emit, machine  # noqa: E402

from dcsr.data.formats import Passage, iter_passages, passage_sentences, passage_texts, write_corpus  # noqa: E402


def load_avg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn, repeats: int) -> tuple[float, list[float], object]:
    """Median seconds of ``repeats`` calls of ``fn``, all the times, and the last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), [round(t, 3) for t in times], result


def in_child(fn, *args):
    """Run ``fn(*args)`` in a fresh process, so its peak RSS (``ru_maxrss``) is its own."""
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def rss_bytes() -> int:
    """Current resident set size (the peak never falls, so held memory is measured on this)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# ----------------------------------------------------------------------- the corpus


def synthetic_corpus(squad_json: str, n: int, workdir: Path) -> tuple[Path, Path, int]:
    """Write ``n`` passages (SQuAD's 100-word passages repeated under fresh ids) as .tsv and
    .tsv.gz; return both paths and the number of distinct real passages."""
    from dcsr.data.squad import squad_to_dpr

    real = squad_to_dpr(squad_json).passages
    passages = (Passage(i + 1, real[i % len(real)].text, real[i % len(real)].title) for i in range(n))
    tsv = workdir / "psgs_w100.tsv"
    write_corpus(tsv, passages)
    gz = workdir / "psgs_w100.tsv.gz"
    with open(tsv, "rb") as src, gzip.open(gz, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return tsv, gz, len(real)


def count_passages(path: Path) -> int:
    return sum(1 for _ in iter_passages(path))


def held_passages(path: str) -> dict:
    """What ``embed_shard`` holds: every passage of a shard in Python lists (here: all of them,
    one shard), plus its sentence spans from the table, as ``embed_corpus_shard`` reads them."""
    import gc

    from dcsr.retrieval.embed import shard_passages
    from dcsr.data.formats import sentence_spans

    gc.collect()
    base = rss_bytes()
    ids, titles, texts = shard_passages(path, 0, 1)
    gc.collect()
    after_texts = rss_bytes()
    spans = sentence_spans(str(Path(path).parent / "sentences.tsv"), set(ids))
    gc.collect()
    after_spans = rss_bytes()
    return {
        "passages": len(ids),
        "text_bytes_per_passage": (after_texts - base) / len(ids),
        "span_bytes_per_passage": (after_spans - after_texts) / max(1, len(spans)),
    }


# ----------------------------------------------------------------------- FAISS


def faiss_build(npy: str, out: str) -> dict:
    """``index_shard`` on a float16 .npy: build time, peak RSS over the vectors' fp32 bytes."""
    from dcsr.retrieval.index import index_shard

    import faiss  # noqa: F401  (imported before the baseline)

    vecs = np.load(npy, mmap_mode="r")
    base = rss_bytes()
    t0 = time.perf_counter()
    index_shard(npy, out, factory="Flat")
    seconds = time.perf_counter() - t0
    fp32 = vecs.shape[0] * vecs.shape[1] * 4
    return {"seconds": seconds, "peak_rss_over_fp32_bytes": (peak_rss_bytes() - base) / fp32}


def faiss_search(index_path: str, ids_npy: str, queries: int, ks: list[int], repeats: int, dim: int) -> dict:
    """Load one shard index (as ``search_shard``) and time exact top-k for a batch of queries."""
    import faiss

    from dcsr.retrieval.index import read_index, search_index

    t0 = time.perf_counter()
    index = read_index(index_path, use_gpu=False)
    load_s = time.perf_counter() - t0
    ids = np.load(ids_npy)
    q = np.random.default_rng(1).standard_normal((queries, dim), dtype=np.float32)
    out = {"load_seconds": load_s, "faiss_threads": faiss.omp_get_max_threads(), "by_k": {}}
    for k in ks:
        med, times, _ = timed(lambda: search_index(index, ids, q, k), repeats)
        out["by_k"][str(k)] = {
            "median_s": med,
            "times_s": times,
            "queries_per_s": queries / med,
            "vector_queries_per_s": queries * index.ntotal / med,
        }
    return out


# ----------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--squad", required=True, help="SQuAD v1.1 JSON (real text to repeat)")
    ap.add_argument("--passages", type=int, default=200_000, help="synthetic corpus size")
    ap.add_argument("--split-passages", type=int, default=50_000, help="passages split in (b)")
    ap.add_argument("--vectors", type=int, default=500_000, help="vectors in the FAISS shard of (c)")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a new one in /tmp)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="dcsr-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": "scale_throughput",
        "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "load_before": load_avg(),
        "settings": vars(args),
    }

    # (a) corpus streaming ---------------------------------------------------------------
    t0 = time.perf_counter()
    tsv, gz, distinct = synthetic_corpus(args.squad, args.passages, work)
    print(f"corpus written in {time.perf_counter() - t0:.1f} s: {tsv}", file=sys.stderr)
    stream = {
        "passages": args.passages,
        "distinct_real_passages": distinct,
        "tsv_bytes_per_passage": tsv.stat().st_size / args.passages,
        "gz_bytes_per_passage": gz.stat().st_size / args.passages,
    }
    for name, path in (("tsv", tsv), ("tsv.gz", gz)):
        med, times, n = timed(lambda: count_passages(path), args.repeats)
        assert n == args.passages
        stream[name] = {"median_s": med, "times_s": times, "passages_per_s": n / med}
    # merge_runs' lookup: a few hundred thousand wanted ids scattered over the corpus, so the
    # early stop never comes before the end
    wanted = set(range(1, args.passages + 1, 7)) | {args.passages}
    med, times, _ = timed(lambda: passage_texts(gz, wanted), args.repeats)
    stream["passage_texts_gz"] = {
        "wanted": len(wanted),
        "median_s": med,
        "times_s": times,
        "passages_per_s": args.passages / med,
    }
    result["stream"] = stream
    print(f"(a) load {load_avg()}", file=sys.stderr)

    # (b) sentence splitting ----------------------------------------------------------------
    from dcsr.data.sentences import split_corpus

    small = work / "split" / "psgs_w100.tsv"
    small.parent.mkdir(exist_ok=True)
    write_corpus(small, (p for p, _ in zip(iter_passages(tsv), range(args.split_passages))))
    table = small.parent / "sentences.tsv"
    med, times, stats = timed(lambda: split_corpus(small, table, progress=False), args.repeats)
    result["split"] = {
        "passages": stats["passages"],
        "median_s": med,
        "times_s": times,
        "passages_per_s": stats["passages"] / med,
        "sentences": stats["sentences"],
        "sentences_per_passage": stats["mean_sentences_per_passage"],
        "max_sentences_per_passage": stats["max_sentences_per_passage"],
        "table_bytes_per_sentence": table.stat().st_size / stats["sentences"],
        "splitter": f"{stats['splitter']} {stats['splitter_version']}",
    }
    # a DCSR shard holds at most dcsr.max_sentences (10) vectors per passage
    counts = [len(spans) for _, spans in passage_sentences(table)]
    result["split"]["vectors_per_passage_max10"] = sum(min(c, 10) for c in counts) / len(counts)
    # the same split passages, held as an embed job holds its shard
    result["held_in_memory"] = in_child(held_passages, str(small))
    print(f"(b) load {load_avg()}", file=sys.stderr)

    # (c) FAISS ----------------------------------------------------------------------------
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((args.vectors, args.dim), dtype=np.float32).astype(np.float16)
    npy16, npy32 = work / "shard-0.npy", work / "shard-0.fp32.npy"
    np.save(npy16, vecs)
    np.save(npy32, vecs.astype(np.float32))
    ids_npy, sents_npy = work / "shard-0.ids.npy", work / "shard-0.sents.npy"
    np.save(ids_npy, np.arange(args.vectors, dtype=np.int64))
    np.save(sents_npy, np.zeros(args.vectors, dtype=np.int32))
    del vecs
    index = work / "shard-0.faiss"
    build = in_child(faiss_build, str(npy16), str(index))
    ks = [100, int(round(100 * result["split"]["sentences_per_passage"]))]
    search = in_child(faiss_search, str(index), str(ids_npy), args.queries, ks, args.repeats, args.dim)
    result["faiss"] = {"vectors": args.vectors, "dim": args.dim, "queries": args.queries, "build": build, **search}
    print(f"(c) load {load_avg()}", file=sys.stderr)

    # (d) bytes per vector -------------------------------------------------------------------
    n, d = args.vectors, args.dim
    result["bytes"] = {
        "npy_fp16_per_vector": npy16.stat().st_size / n,
        "npy_fp32_per_vector": npy32.stat().st_size / n,
        "ids_per_vector": ids_npy.stat().st_size / n,
        "sents_per_vector": sents_npy.stat().st_size / n,
        "faiss_flat_per_vector": index.stat().st_size / n,
        "arithmetic": {"fp16": 2 * d, "fp32": 4 * d, "ids": 8, "sents": 4, "faiss_flat": 4 * d},
    }
    result["load_after"] = load_avg()
    if not args.workdir:
        shutil.rmtree(work)
    emit(result, args.out)
    s, f = result["stream"], result["faiss"]
    print(
        f"\nsummary (load {result['load_before']} -> {result['load_after']}):\n"
        f"  stream .tsv {s['tsv']['passages_per_s']:,.0f} passages/s, .tsv.gz {s['tsv.gz']['passages_per_s']:,.0f}"
        f" passages/s, passage_texts .gz {s['passage_texts_gz']['passages_per_s']:,.0f} passages/s\n"
        f"  split {result['split']['passages_per_s']:,.0f} passages/s, {result['split']['sentences_per_passage']:.2f}"
        f" sentences/passage\n"
        f"  FAISS Flat {f['vectors']:,} x {d}: build {f['build']['seconds']:.1f} s, "
        + ", ".join(f"k={k}: {v['queries_per_s']:,.0f} q/s" for k, v in f["by_k"].items()),
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
