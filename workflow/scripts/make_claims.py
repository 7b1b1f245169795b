"""Write the claims ledger (dcsr.evaluation.claims) from a spec of claims and their runs' per-question results."""
import argparse
import json

from dcsr.evaluation.claims import ledger_rows, write_ledger
from dcsr.cli import script


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", required=True, help="JSON: {claims: [...with baseline_run, method_run], seed}")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()
    spec = json.loads(a.spec)
    write_ledger(ledger_rows(spec["claims"], seed=spec["seed"]), a.csv, a.md, notes=spec.get("notes", []))


if __name__ == "__main__":
    main()
