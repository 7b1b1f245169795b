"""Regenerate a retrieval table (CSV + Markdown) from metrics, with the paper's numbers."""
import argparse
import json

from dcsr.cli import script
from dcsr.evaluation.tables import Row, load_paper_numbers, read_metrics, table_cells, write_retrieval_table
from dcsr.evaluation.trec_eval import PooledMeasures


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
    cells = {(c["qmodel"], c["pmodel"], c["dataset"], c.get("fusion")): c for c in spec["cells"]}
    pooled = PooledMeasures()
    rows = []
    for cell in table_cells(table):
        r = table["rows"][cell.row]
        ref = None
        # the paper's number is the one for the column's dataset (NQ for a subset's NQ questions)
        if r.get("paper") and spec["paper_names"].get(cell.column):
            ref = {"table": r["paper"]["table"], "row": r["paper"]["row"], "dataset": spec["paper_names"][cell.column]}
        label = cell.column if cell.dataset == cell.column else f"{cell.column} ({cell.dataset})"
        c = cells[(cell.qmodel, cell.pmodel, cell.dataset, cell.fusion)]
        metrics = read_metrics(c["metrics"])
        if table.get("measures") and "qrels" in c:  # against the test set's pooled qrels: the same judgments for every row
            # (a BEIR test set's cell has none: its metrics are measured against its own qrels)
            metrics["trec_eval"] = pooled.measures(c["run"], c["qrels"], table["measures"], metrics["questions"])
        rows.append(Row(r["label"], label, metrics, ref))
    notes = spec.get("notes", []) + (pooled.notes() if table.get("measures") else [])
    write_retrieval_table(rows, [f"top{k}" for k in spec["ks"]], paper, a.csv, a.md, title=table["title"],
                          measures=table.get("measures", []), notes=notes)


if __name__ == "__main__":
    main()
