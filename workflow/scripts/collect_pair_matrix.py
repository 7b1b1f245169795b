"""Collect the metrics of every (question encoder, passage encoder, test set) pair into one CSV."""
import argparse
import logging

from dcsr.attribution.inputs import write_pair_matrix
from dcsr.cli import script


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cell", nargs=4, action="append", required=True, metavar=("QUESTION", "PASSAGE", "TEST", "JSON"),
                    help="question encoder, passage encoder, test set, metrics JSON (repeat)")
    ap.add_argument("--output", required=True)
    a = ap.parse_args()
    n = write_pair_matrix([tuple(c) for c in a.cell], a.output)
    logging.info("%d pairs -> %s", n, a.output)


if __name__ == "__main__":
    main()
