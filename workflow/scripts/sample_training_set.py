"""Write a nested, seeded sample of a DPR biencoder training set (the data-efficiency sweep).

The sample of fraction f is the first round(f * N) records of one permutation drawn from the
seed, kept in file order: a smaller fraction's sample is inside every larger one's.
"""
import argparse
import logging

from dcsr.attribution.analysis import count_records, nested_samples, write_sample
from dcsr.cli import script


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="DPR biencoder JSON")
    ap.add_argument("--fraction", type=float, required=True, help="in (0, 1]")
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--output", required=True)
    a = ap.parse_args()
    n = count_records(a.train)
    chosen = nested_samples(n, [a.fraction], a.seed)[a.fraction]
    written = write_sample(a.train, a.output, chosen)
    logging.info("%s: %d of %d records (fraction %g, seed %d) -> %s", a.train, written, n, a.fraction, a.seed, a.output)


if __name__ == "__main__":
    main()
