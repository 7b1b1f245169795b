"""Merge per-shard top-k hits exactly into one TREC run."""
import argparse
import logging

from dcsr.cli import script
from dcsr.index import merge_shard_hits, topk_to_run
from dcsr.runs import write_trec


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("shards", nargs="+", help="per-shard .npz hits")
    ap.add_argument("--output", required=True)
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--tag", default="dense")
    a = ap.parse_args()
    scores, ids = merge_shard_hits(a.shards, a.k)
    write_trec(a.output, topk_to_run(scores, ids), tag=a.tag)
    logging.info("merged %d shards, %d questions", len(a.shards), len(ids))


if __name__ == "__main__":
    main()
