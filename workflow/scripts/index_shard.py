"""Build a FAISS inner-product index over one vector shard."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.retrieval.index import index_shard


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--index", required=True)
    ap.add_argument("--factory", default="Flat", help="FAISS index_factory string")
    ap.add_argument("--train-size", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    stats = index_shard(a.vectors, a.index, a.factory, train_size=a.train_size, seed=a.seed)
    logging.info("done: %s", json.dumps(stats))


if __name__ == "__main__":
    main()
