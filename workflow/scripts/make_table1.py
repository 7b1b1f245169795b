"""Regenerate the DCSR paper's Table 1 (questions per gold passage) from training JSON files.

Datasets come either from repeated ``--train JSON --label NAME [--paper-name PAPER]`` (give
``--paper-name`` for every dataset or for none; an empty value means "no paper numbers") or
from ``--spec '{"rows": [{"label": ..., "train": ..., "paper_name": ... or null}, ...]}'``.
"""
import argparse
import json

from dcsr.cli import script
from dcsr.errors import InputError
from dcsr.evaluation.stats import questions_per_gold_passage, write_table1


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", action="append", default=[], help="DPR biencoder training JSON (repeat)")
    ap.add_argument("--label", action="append", default=[], help="row label, one per --train")
    ap.add_argument("--paper-name", action="append", default=[], help="the paper's dataset name, one per --train")
    ap.add_argument("--spec", help="JSON with 'rows' instead of --train/--label/--paper-name")
    ap.add_argument("--paper", required=True, help="config/paper_numbers.yaml")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()
    if a.spec:
        if a.train or a.label or a.paper_name:
            raise InputError("arguments", "give --spec or --train/--label/--paper-name, not both")
        specs = [(r["label"], r["train"], r.get("paper_name")) for r in json.loads(a.spec)["rows"]]
    else:
        if not a.train or len(a.label) != len(a.train) or len(a.paper_name) not in (0, len(a.train)):
            raise InputError("arguments", "give one --label (and, if any, one --paper-name) per --train")
        names = a.paper_name or [""] * len(a.train)
        specs = list(zip(a.label, a.train, names))
    rows = [(label, name or None, questions_per_gold_passage(train)) for label, train, name in specs]
    write_table1(rows, a.paper, a.csv, a.md)


if __name__ == "__main__":
    main()
