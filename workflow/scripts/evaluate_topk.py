"""Top-k answer recall of a TREC run with DPR's matching rules."""
import argparse

from dcsr.cli import script
from dcsr.evaluation.metrics import add_scoring_arguments, score_from_arguments


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--run", required=True)
    add_scoring_arguments(ap)
    a = ap.parse_args()
    score_from_arguments(a, a.run)


if __name__ == "__main__":
    main()
