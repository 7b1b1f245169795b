"""The encoder attribution paper's Table 3 and Figure 4: corpus coverage, positive passage
overlap and unique passage coverage of training sets and of the sweep's samples."""
import argparse
import json

from dcsr.attribution.report import write_coverage
from dcsr.cli import script
from dcsr.evaluation.stats import coverage_statistics


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entry", nargs=3, action="append", required=True, metavar=("DATASET", "FRACTION", "JSON"),
                    help="dataset, training fraction (1 = all), its biencoder JSON (repeat)")
    ap.add_argument("--alpha", type=float, default=1.3)
    ap.add_argument("--min-questions", type=int, default=2, help="a gold passage of this many questions overlaps")
    ap.add_argument("--paper-names", default="{}", help="JSON: {dataset: the paper's name}")
    ap.add_argument("--paper", required=True, help="config/paper_numbers.yaml")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--figure-csv", required=True)
    a = ap.parse_args()
    stats = [(d, float(f), coverage_statistics(path, a.alpha, a.min_questions)) for d, f, path in a.entry]
    write_coverage(stats, json.loads(a.paper_names), a.paper, a.csv, a.md, a.png, a.figure_csv)


if __name__ == "__main__":
    main()
