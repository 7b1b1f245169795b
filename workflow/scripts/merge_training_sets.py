"""Concatenate the training sets (and the dev sets) of several datasets into one biencoder
JSON each, streamed: the training data of a model trained on a list of datasets (DCSR's Multi)."""
import argparse

from dcsr.cli import script
from dcsr.data.variants import concat_biencoder


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train", nargs="+", required=True, help="training JSON of each dataset, in order")
    ap.add_argument("--dev", nargs="+", required=True, help="dev JSON of each dataset, in order")
    ap.add_argument("--train-out", required=True)
    ap.add_argument("--dev-out", required=True)
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    a = ap.parse_args()
    concat_biencoder(a.train, a.train_out, progress=not a.no_progress)
    concat_biencoder(a.dev, a.dev_out, progress=not a.no_progress)


if __name__ == "__main__":
    main()
