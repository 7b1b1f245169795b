"""What a compressed FAISS index costs against Flat: bytes per vector, build time, search
throughput, recall of Flat's top-100 and top-k answer recall with a paired test (not a test).

Each variant is a results folder in which only ``index.factory`` (and ``index.search_params``)
differ from Flat's: the same embeddings, indexed, searched, merged and evaluated again
(benchmarks/index-compression/index-compression.md says how the copies are made).

    python benchmarks/index-compression/index_compression.py --corpus wiki --model dcsr --dataset encyclopedia \\
        --run Flat=results-flat --run SQ8=results-sq8 --run "HNSW32=results-hnsw" [--json out.json]

Per variant: the ``.faiss`` bytes over the vectors indexed, the summed wall time of the
``index_shard`` jobs and the largest peak RSS of one (its log's ``usage:`` line), the
questions per second of the ``search_shard`` jobs (summed wall time, which includes reading the
index), the share of Flat's top-100 passages found in the variant's top-100 (after HasAns
for DCSR: the final ranking), and top-k answer recall with the questions only Flat finds and
only the variant finds, and the exact sign test on them (benchmarks/paired_compare.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BENCHMARKS), str(BENCHMARKS / "rehearsal")]  # paired_compare, rehearsal
from paired_compare import compare, first_hits  # noqa: E402
from rehearsal import job_records  # noqa: E402

KS = (1, 5, 20, 100)


def trec_run(path: Path) -> dict[str, list[str]]:
    run: dict[str, list[tuple[int, str]]] = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            q, _, pid, rank, *_ = line.split()
            run[q].append((int(rank), pid))
    return {q: [p for _, p in sorted(hits)] for q, hits in run.items()}


def _index_jobs(results: Path, corpus: str, model: str) -> list[dict]:
    """The ``index_shard`` jobs of one passage encoder (:func:`rehearsal.job_records`)."""
    return [r for r in job_records(results) if r["job"].startswith(f"index_shard/{corpus}/{model}/")]


def _vectors(results: Path, corpus: str, model: str) -> int:
    import numpy as np

    return sum(len(np.load(p, mmap_mode="r")) for p in sorted((results / "embeddings" / corpus / model).glob("shard-*.ids.npy")))


def search_rate(results: Path, corpus: str, model: str, dataset: str, search_params: str, k: int,
                repeats: int = 3, questions: int = 0) -> float:
    """Test questions per second searched at depth ``k`` in the loaded shard indexes (the
    search alone: no process start, no index read), median of ``repeats``, one thread."""
    import time

    import faiss

    from dcsr.retrieval.index import load_npy, read_index, search_index

    faiss.omp_set_num_threads(1)
    q = load_npy(results / "queries" / model / f"{dataset}.npy", ndim=2)
    q = q[:questions] if questions else q
    shards = sorted((results / "index" / corpus / model).glob("shard-*.faiss"))
    loaded = [(read_index(p, use_gpu=False, search_params=search_params),
               load_npy(str(p).replace("/index/", "/embeddings/").replace(".faiss", ".ids.npy"), ndim=1))
              for p in shards]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for index, ids in loaded:
            search_index(index, ids, q, k)
        times.append(time.perf_counter() - t)
    return len(q) / sorted(times)[len(times) // 2]


def measure(results: Path, corpus: str, model: str, dataset: str, search_params: str, k: int,
            timed_questions: int = 0) -> dict:
    idx = results / "index" / corpus / model
    n = _vectors(results, corpus, model)
    faiss_bytes = sum(p.stat().st_size for p in idx.glob("shard-*.faiss"))
    builds = _index_jobs(results, corpus, model)
    questions = sum(1 for _ in open(results / "metrics" / corpus / model / model / f"{dataset}.questions.jsonl"))
    return {"vectors": n, "bytes_per_vector": faiss_bytes / n if n else 0.0, "index_bytes": faiss_bytes,
            "build_s": sum(r["wall_s"] for r in builds), "build_jobs": len(builds),
            "build_peak_rss_mb": max((r["rss_mb"] for r in builds if r["rss_from"] == "log (getrusage)"), default=0.0),
            "search_params": search_params, "questions": questions,
            "questions_per_s": search_rate(results, corpus, model, dataset, search_params, k, questions=timed_questions)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", required=True,
                    help="NAME=results folder[:search params]; the first is the reference (Flat)")
    ap.add_argument("--k", type=int, default=500, help="search depth of the timed search (DCSR: 100 x ~5 sentences)")
    ap.add_argument("--timed-questions", type=int, default=0, help="time the search on the first N questions (0: all)")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--json")
    a = ap.parse_args()
    runs = [(name, Path(path.partition(":")[0]), path.partition(":")[2])
            for name, _, path in (s.partition("=") for s in a.run)]
    ref_name, ref, _ = runs[0]
    ref_run = trec_run(ref / "runs" / a.corpus / a.model / a.model / f"{a.dataset}.trec")
    ref_hits = first_hits(str(ref / "metrics" / a.corpus / a.model / a.model / f"{a.dataset}.questions.jsonl"))
    rows = []
    for name, path, params in runs:
        m = measure(path, a.corpus, a.model, a.dataset, params, a.k, a.timed_questions)
        hits = first_hits(str(path / "metrics" / a.corpus / a.model / a.model / f"{a.dataset}.questions.jsonl"))
        run = trec_run(path / "runs" / a.corpus / a.model / a.model / f"{a.dataset}.trec")
        overlap = [len(set(run.get(q, [])[:100]) & set(top[:100])) / len(top[:100]) for q, top in ref_run.items() if top]
        m["recall_of_flat_top100"] = sum(overlap) / len(overlap) if overlap else None
        m["topk"] = {}
        for k in KS:
            acc = 100.0 * sum(1 for r in hits.values() if r is not None and r <= k) / len(hits)
            only_flat, only_this, p = compare(ref_hits, hits, k)
            m["topk"][k] = {"recall": acc, "only_flat": only_flat, "only_variant": only_this, "p": p}
        rows.append((name, m))
    print(f"reference: {ref_name}; {rows[0][1]['vectors']:,} vectors, {rows[0][1]['questions']:,} questions")
    print(f"| index | bytes / vector | build s (jobs) | build peak RSS MB | questions/s at depth {a.k}, 1 thread | Flat's top-100 found | "
          + " | ".join(f"top-{k} (only Flat / only it, p)" for k in KS) + " |")
    print("|---|---:|---:|---:|---:|---:|" + "---:|" * len(KS))
    for name, m in rows:
        cells = [f"{m['topk'][k]['recall']:.1f} ({m['topk'][k]['only_flat']} / {m['topk'][k]['only_variant']}, "
                 f"p = {m['topk'][k]['p']:.2g})" for k in KS]
        label = f"{name} ({m['search_params']})" if m["search_params"] else name
        print(f"| {label} | {m['bytes_per_vector']:,.1f} | {m['build_s']:,.1f} ({m['build_jobs']}) | "
              f"{m['build_peak_rss_mb']:,.0f} | {m['questions_per_s'] or 0:,.1f} | {100 * m['recall_of_flat_top100']:.1f}% | "
              + " | ".join(cells) + " |")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(dict(rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
