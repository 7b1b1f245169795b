"""Search one shard index with a question-vector file: top-k scores and passage ids (.npz)."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.index import search_shard


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--index", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--gpu", choices=["auto", "true", "false"], default="auto")
    a = ap.parse_args()
    gpu = {"auto": "auto", "true": True, "false": False}[a.gpu]
    stats = search_shard(a.index, a.ids, a.queries, a.output, a.k, use_gpu=gpu)
    logging.info("done: %s", json.dumps(stats))


if __name__ == "__main__":
    main()
