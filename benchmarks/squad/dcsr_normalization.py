"""How a DCSR sentence index turns into a passage ranking: HasAns at several softmax
temperatures (the official code: 1) against ranking a passage by its best sentence (MaxP).

Re-searches a finished run's sentence index (every shard, the pipeline's own depth of
100 x k sentences), then ranks and evaluates with the pipeline's own functions:

  python benchmarks/squad/dcsr_normalization.py --results results-squad --corpus squad --model dcsr --dataset squad

A diagnostic, not a test: it prints one row per ranking rule and writes them as JSON.
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
from benchmarks_common import emit  # noqa: E402
from dcsr.evaluation.metrics import evaluate_run
from dcsr.retrieval.index import merge_shard_hits, search_shard_many, topk_to_run
from dcsr.data.runs import write_trec
from dcsr.retrieval.hasans import hasans_topk, sentence_search_depth


def maxp_topk(scores: np.ndarray, pids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Passages in the order of their best sentence (``scores`` sorted best first per row)."""
    out_p = np.full((len(pids), k), -1, dtype=np.int64)
    out_s = np.full((len(pids), k), -np.inf)
    for q in range(len(pids)):
        seen = 0
        for s, p in zip(scores[q], pids[q]):
            if p < 0 or p in out_p[q, :seen]:
                continue
            out_p[q, seen], out_s[q, seen] = p, s
            seen += 1
            if seen == k:
                break
    return out_s, out_p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--model", required=True, help="a DCSR model (question and passage encoder)")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--temperatures", default="0.05,0.1,0.25,0.5,1,2,4")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    r = Path(a.results)
    depth = sentence_search_depth(100, str(r / "sentences" / a.corpus / "stats.json"))
    qas = r / "data" / a.corpus / f"{a.dataset}-test.qa.csv"
    corpus = r / "data" / a.corpus / "psgs_w100.tsv"
    queries = r / "queries" / a.model / f"{a.dataset}.npy"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        hits = []
        for i in range(a.shards):
            out = tmp / f"shard-{i}.npz"
            search_shard_many(r / "index" / a.corpus / a.model / f"shard-{i}.faiss",
                              r / "embeddings" / a.corpus / a.model / f"shard-{i}.ids.npy", [(queries, out)], depth,
                              use_gpu=False)
            hits.append(str(out))
        scores, pids = merge_shard_hits(hits, depth)  # [Q, depth] sentences, best first
        sentence_scores = np.where(pids >= 0, scores, 0.0)

        def evaluate(label, s, p):
            run = tmp / "run.trec"
            write_trec(run, topk_to_run(s, p), tag="diagnostic")
            m = evaluate_run(run, qas, corpus, tmp / "m.json")
            rows.append({"ranking": label, **{k: m[k] for k in ("top1", "top5", "top20", "top100")}})
            print(f"{label:24s} " + " ".join(f"{m[k]:5.1f}" for k in ("top1", "top5", "top20", "top100")), flush=True)

        print(f"{a.model} on {a.dataset}: {len(pids)} questions, top {depth} sentences; top-1/5/20/100")
        spread = np.nanmean(scores[:, 0] - scores[:, min(depth, scores.shape[1]) - 1])
        print(f"mean score gap between the 1st and the {depth}th sentence: {spread:.2f}")
        for t in [float(x) for x in a.temperatures.split(",")]:
            p, h = hasans_topk(sentence_scores, pids, t, 100)
            evaluate(f"HasAns T={t:g}", np.where(p >= 0, h, -np.inf), p)
        evaluate("MaxP (best sentence)", *maxp_topk(scores, pids, 100))
    emit({"model": a.model, "dataset": a.dataset, "depth": depth, "rows": rows}, a.out)


if __name__ == "__main__":
    sys.exit(main())
