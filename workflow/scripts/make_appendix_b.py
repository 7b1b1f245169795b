"""DCSR Appendix B: how many dev questions' answer-bearing positive passages (and their titles)
are positives of the training set too, per dataset, with the paper's SQuAD numbers beside ours."""
import argparse
import json

from dcsr.cli import script
from dcsr.evaluation.stats import dev_positives_in_train, write_appendix_b


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", required=True, help='JSON: {"rows": [{"label", "train", "dev", "match", "paper_name"}, ...]}')
    ap.add_argument("--paper", required=True, help="config/paper_numbers.yaml")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()
    rows = [(r["label"], r.get("paper_name"), dev_positives_in_train(r["train"], r["dev"], r.get("match", "string")))
            for r in json.loads(a.spec)["rows"]]
    write_appendix_b(rows, a.paper, a.csv, a.md)


if __name__ == "__main__":
    main()
