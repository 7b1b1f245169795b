"""Write the claims ledger (dcsr.evaluation.claims) from a spec of claims and their runs' per-question results."""
import argparse
import json

import numpy as np

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
    for claim in spec["claims"]:
        if "corpus_ids" in claim:  # the corpus's passages (its store's ids), for the scaled k
            claim["corpus_passages"] = int(np.load(claim["corpus_ids"], mmap_mode="r").shape[0])
    write_ledger(ledger_rows(spec["claims"], seed=spec["seed"]), a.csv, a.md, notes=spec.get("notes", []))


if __name__ == "__main__":
    main()
