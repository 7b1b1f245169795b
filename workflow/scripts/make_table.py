"""Regenerate a retrieval table (CSV + Markdown) from metrics, with the paper's numbers."""
import argparse
import json

from dcsr.cli import script
from dcsr.evaluation.tables import Row, load_paper_numbers, read_metrics, table_cells, write_retrieval_table


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
    cells = {(c["qmodel"], c["pmodel"], c["dataset"], c.get("fusion")): c["metrics"] for c in spec["cells"]}
    rows = []
    for cell in table_cells(table):
        r = table["rows"][cell.row]
        ref = None
        # the paper's number is the one for the column's dataset (NQ for a subset's NQ questions)
        if r.get("paper") and spec["paper_names"].get(cell.column):
            ref = {"table": r["paper"]["table"], "row": r["paper"]["row"], "dataset": spec["paper_names"][cell.column]}
        label = cell.column if cell.dataset == cell.column else f"{cell.column} ({cell.dataset})"
        rows.append(Row(r["label"], label, read_metrics(cells[(cell.qmodel, cell.pmodel, cell.dataset, cell.fusion)]), ref))
    metrics = [f"top{k}" for k in spec["ks"]]
    write_retrieval_table(rows, metrics, paper, a.csv, a.md, title=table["title"], measures=table.get("measures", []))


if __name__ == "__main__":
    main()
