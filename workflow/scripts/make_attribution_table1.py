"""The encoder attribution paper's Table 1 (questions per dataset: train, dev, test), with the
paper's numbers beside ours (dcsr.attribution.report.write_dataset_sizes)."""
import argparse

from dcsr.attribution.report import dataset_sizes, write_dataset_sizes
from dcsr.cli import script


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", nargs=5, action="append", required=True,
                    metavar=("NAME", "PAPER_NAME", "TRAIN_JSON", "DEV_JSON", "TEST_QAS"),
                    help="a dataset (PAPER_NAME '-' when the paper does not report it); repeat")
    ap.add_argument("--paper", required=True, help="config/paper_numbers.yaml")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()
    rows = [(name, None if paper in ("", "-") else paper, dataset_sizes(train, dev, test)) for name, paper, train, dev, test in a.dataset]
    write_dataset_sizes(rows, a.paper, a.csv, a.md)


if __name__ == "__main__":
    main()
