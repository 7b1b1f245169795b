"""Plot in-batch dev accuracy per epoch (the DCSR paper's Figure 4) for the models of one dataset,
and write the same numbers as CSV.

Models come either from repeated ``--model DIR --label NAME`` or from
``--spec '{"curves": [{"label": ..., "model": DIR}, ...]}'``.
"""
import argparse
import json

from dcsr.cli import script
from dcsr.errors import InputError
from dcsr.evaluation.figures import plot_validation, read_validation, validation_curves_table


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", default=[], help="trained model directory (repeat)")
    ap.add_argument("--label", action="append", default=[], help="legend label, one per --model")
    ap.add_argument("--spec", help="JSON with 'curves' instead of --model/--label")
    ap.add_argument("--title", required=True)
    ap.add_argument("--png", required=True)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    if a.spec:
        if a.model or a.label:
            raise InputError("arguments", "give --spec or --model/--label, not both")
        specs = [(c["label"], c["model"]) for c in json.loads(a.spec)["curves"]]
    else:
        if not a.model or len(a.label) != len(a.model):
            raise InputError("arguments", "give one --label per --model")
        specs = list(zip(a.label, a.model))
    curves = [(label, read_validation(model)) for label, model in specs]
    plot_validation(curves, a.png, a.title)
    validation_curves_table(curves, a.csv)


if __name__ == "__main__":
    main()
