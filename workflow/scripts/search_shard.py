"""Search one shard index with question-vector files: top-k scores and passage ids (.npz).

The shard index is loaded once and searched with every ``--search QUERIES OUTPUT`` pair
(each question encoder and test set paired with this passage encoder)."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.retrieval.index import search_shard_many


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--index", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--search", nargs=2, action="append", required=True, metavar=("QUERIES", "OUTPUT"),
                    help="question vectors (.npy) and where their hits go (.npz); repeatable")
    ap.add_argument("--k", type=int, default=100, help="hits per question (DCSR: passages, see below)")
    ap.add_argument("--sentence-stats", default=None,
                    help="DCSR: the sentence-splitting stats; search the top k x (sentences per passage) sentences")
    ap.add_argument("--sentences-per-passage", type=float, default=None,
                    help="DCSR: the k of 100 x k (default: the corpus mean from --sentence-stats)")
    ap.add_argument("--gpu", choices=["auto", "true", "false", "torch"], default="auto",
                    help="where the shard index is searched (index.gpu): auto, true (faiss-gpu), false (faiss on the CPU), "
                         "torch (a Flat index in torch on CUDA)")
    ap.add_argument("--search-params", default="",
                    help="FAISS ParameterSpace string set on the index, such as nprobe=64 (empty: FAISS's defaults)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    a = ap.parse_args()
    gpu = {"auto": "auto", "true": True, "false": False, "torch": "torch"}[a.gpu]
    k = a.k
    if a.sentence_stats or a.sentences_per_passage:
        from dcsr.retrieval.hasans import sentence_search_depth

        k = sentence_search_depth(a.k, a.sentence_stats, a.sentences_per_passage)
        logging.info("DCSR: searching the top %d sentences for %d passages", k, a.k)
    # A tqdm bar per question set on stderr (the rule's log), one step per query batch.
    results = search_shard_many(a.index, a.ids, a.search, k, use_gpu=gpu, progress=not a.no_progress,
                                search_params=a.search_params)
    for (queries, out), stats in zip(a.search, results):
        logging.info("%s -> %s: %s", queries, out, json.dumps(stats))


if __name__ == "__main__":
    main()
