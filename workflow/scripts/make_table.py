"""Regenerate a retrieval table (CSV + Markdown) from metrics, with the paper's numbers."""
import argparse
import json

from dcsr.cli import script
from dcsr.tables import Row, load_paper_numbers, read_metrics, write_retrieval_table


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--spec", required=True, help="JSON: table config, ks, dataset paper names, cells")
    ap.add_argument("--paper", required=True, help="config/paper_numbers.yaml")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()
    spec = json.loads(a.spec)
    table, paper = spec["table"], load_paper_numbers(a.paper)
    cells = {(c["qmodel"], c["pmodel"], c["dataset"]): c["metrics"] for c in spec["cells"]}
    rows = []
    for ds in table["test_sets"]:
        for r in table["rows"]:
            q, p = ("bm25", "bm25") if r.get("retriever") == "bm25" else (r["question"], r["passage"])
            ref = None
            if r.get("paper") and spec["paper_names"].get(ds):
                ref = {"table": r["paper"]["table"], "row": r["paper"]["row"], "dataset": spec["paper_names"][ds]}
            rows.append(Row(r["label"], ds, read_metrics(cells[(q, p, ds)]), ref))
    metrics = [f"top{k}" for k in spec["ks"]]
    write_retrieval_table(rows, metrics, paper, a.csv, a.md, title=table["title"])


if __name__ == "__main__":
    main()
