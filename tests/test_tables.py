"""Retrieval tables: which run fills which cell, and the table a row config produces."""
import csv
import json
import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.evaluation.tables import Cell, table_cells

# DCSR Table 7's shape: columns NQ and Trivia, one row per corpus size, each row searching
# the column's questions over its own corpus, and Table 2 Single's one model per column.
TABLE = {
    "title": "t",
    "test_sets": ["nq", "trivia"],
    "rows": [
        {"label": "BM25", "retriever": "bm25"},
        {"label": "DPR (Single)", "question": {"nq": "dpr-nq", "trivia": "dpr-trivia"},
         "passage": {"nq": "dpr-nq", "trivia": "dpr-trivia"}},
        {"label": "DPR 0.1M", "question": "dpr-nq", "passage": "dpr-nq",
         "datasets": {"nq": "nq-small", "trivia": "trivia-small"}},
        {"label": "NQ only", "question": {"nq": "dpr-nq"}, "passage": {"nq": "dpr-nq"}},
    ],
}


def test_cells_follow_per_column_models_and_datasets():
    assert table_cells(TABLE) == [
        Cell(0, "nq", "bm25", "bm25", "nq"),
        Cell(1, "nq", "dpr-nq", "dpr-nq", "nq"),
        Cell(2, "nq", "dpr-nq", "dpr-nq", "nq-small"),
        Cell(3, "nq", "dpr-nq", "dpr-nq", "nq"),
        Cell(0, "trivia", "bm25", "bm25", "trivia"),
        Cell(1, "trivia", "dpr-trivia", "dpr-trivia", "trivia"),
        Cell(2, "trivia", "dpr-nq", "dpr-nq", "trivia-small"),
        # "NQ only" maps no model to trivia: no cell
    ]


def test_make_table_script_fills_cells_and_paper_numbers(repo, tmp_path):
    cells = []
    for c in table_cells(TABLE):
        path = tmp_path / f"{c.qmodel}-{c.pmodel}-{c.dataset}.json"
        # a distinct number per run, so a cell filled from the wrong run shows
        top20 = float(len(c.dataset) + 10 * c.row)
        path.write_text(json.dumps({"top1": 1.0, "top20": top20, "questions": 7}))
        cells.append({"qmodel": c.qmodel, "pmodel": c.pmodel, "dataset": c.dataset, "metrics": str(path)})
    paper = tmp_path / "paper.yaml"
    paper.write_text("t7:\n  source: Paper T7\n  rows:\n    DPR 0.10M:\n      NQ: {top20: 25.5}\n")
    table = {**TABLE, "rows": [*TABLE["rows"][:2], {**TABLE["rows"][2], "paper": {"table": "t7", "row": "DPR 0.10M"}},
                               TABLE["rows"][3]]}
    spec = {"table": table, "ks": [1, 20], "paper_names": {"nq": "NQ", "trivia": "Trivia"}, "cells": cells}
    out_csv, out_md = tmp_path / "t.csv", tmp_path / "t.md"
    subprocess.run([sys.executable, str(repo / "workflow/scripts/make_table.py"), "--spec", json.dumps(spec),
                    "--paper", str(paper), "--csv", str(out_csv), "--md", str(out_md)], check=True)
    rows = {(r["row"], r["test_set"], r["metric"]): r for r in csv.DictReader(open(out_csv))}
    assert rows[("DPR (Single)", "trivia", "top20")]["ours"] == "16.00"       # dpr-trivia on trivia, row 1
    assert rows[("DPR 0.1M", "nq (nq-small)", "top20")]["ours"] == "28.00"    # nq-small, row 2
    assert rows[("DPR 0.1M", "nq (nq-small)", "top20")]["paper"] == "25.5"    # the paper's NQ number
    assert rows[("DPR 0.1M", "trivia (trivia-small)", "top20")]["paper"] == ""
    assert not any(k[0] == "NQ only" and k[1] == "trivia" for k in rows)
    assert "| DPR 0.1M | nq (nq-small) | 7 | 1.0 | 28.0 | 25.5 |" in out_md.read_text()


def test_sentence_level_rows_show_their_hasans_temperature(tmp_path):
    from dcsr.evaluation.tables import Row, write_retrieval_table

    rows = [Row("DPR", "t", {"questions": 10, "top1": 40.0}),
            Row("DCSR", "t", {"questions": 10, "hasans_temperature": 4.0, "top1": 50.0})]
    write_retrieval_table(rows, ["top1"], {}, tmp_path / "t.csv", tmp_path / "t.md", title="T")
    md = (tmp_path / "t.md").read_text()
    assert "| Retriever | Test set | Questions | Top-1 | HasAns T |" in md
    assert "| DPR | t | 10 | 40.0 | – |" in md and "| DCSR | t | 10 | 50.0 | 4 |" in md
    assert (tmp_path / "t.csv").read_text().splitlines()[2].endswith(",10,4.0,")
    # without sentence-level rows the column is left out
    write_retrieval_table(rows[:1], ["top1"], {}, tmp_path / "u.csv", tmp_path / "u.md", title="U")
    assert "HasAns" not in (tmp_path / "u.md").read_text()


def test_a_hybrid_row_is_a_cell_with_its_fusion():
    from dcsr.evaluation.tables import table_cells

    table = {"test_sets": ["a"], "rows": [
        {"label": "BM25", "retriever": "bm25"},
        {"label": "DPR", "question": "m", "passage": "m"},
        {"label": "BM25 + DPR", "retriever": "hybrid", "question": "m", "passage": "m"},
        {"label": "BM25 + DPR (RRF)", "retriever": "hybrid", "fusion": "rrf", "question": "m", "passage": "m"}]}
    cells = table_cells(table)
    assert [(c.qmodel, c.fusion) for c in cells] == [("bm25", None), ("m", None), ("m", "linear"), ("m", "rrf")]


def test_a_paper_note_comes_with_the_cells_it_is_about(tmp_path):
    """A note of config/paper_numbers.yaml (e.g. cells that look swapped in the paper's print) is
    written under a retrieval table that shows one of its cells, once, and under no other."""
    from dcsr.evaluation.tables import Row, write_retrieval_table

    paper = {"t2": {"source": "Paper T2", "notes": [{"rows": ["BM25"], "datasets": ["Trivia", "WQ"], "text": "swapped? <b>"}],
                    "rows": {"BM25": {"NQ": {"top1": 1.0}, "Trivia": {"top1": 2.0}, "WQ": {"top1": 3.0}}}}}
    ref = {"table": "t2", "row": "BM25"}

    def md(*datasets):
        rows = [Row("BM25", d.lower(), {"questions": 5, "top1": 9.0}, {**ref, "dataset": d}) for d in datasets]
        write_retrieval_table(rows, ["top1"], paper, tmp_path / "t.csv", tmp_path / "t.md", title="T")
        return (tmp_path / "t.md").read_text()

    assert md("NQ", "Trivia", "WQ").count("- Note: swapped? \\<b>") == 1  # a config's text: its markup escaped
    assert "swapped?" not in md("NQ")
    paper["t2"]["notes"] = [{"rows": "BM25", "text": "x"}]  # written by someone else: a clear error
    with pytest.raises(InputError, match=r"paper numbers: t2\.notes\[0\]: expected \{rows"):
        md("Trivia")


def test_a_table_without_paper_numbers_says_why(tmp_path):
    """No paper column: because no row names a row of the papers, or because the papers have no
    number for the rows that do (another test set, another k, a misspelt row); the note says
    which."""
    from dcsr.evaluation.tables import Row, write_retrieval_table

    paper = {"t2": {"source": "Paper T2", "rows": {"BM25": {"NQ": {"top1": 1.0}}}}}

    def md(ref):
        write_retrieval_table([Row("BM25", "squad-a", {"questions": 5, "top1": 9.0}, ref)], ["top1"], paper,
                              tmp_path / "t.csv", tmp_path / "t.md", title="T")
        return (tmp_path / "t.md").read_text()

    assert "no row of this table names a row of the papers" in md(None)
    other = md({"table": "t2", "row": "BM25", "dataset": "SQuAD"})
    assert "the papers report no number for these rows' references" in other and "names a row" not in other
    assert "the papers report no number" in md({"table": "t2", "row": "BM-25", "dataset": "NQ"})  # a misspelt row
    assert "Paper T2: BM25 on NQ" in md({"table": "t2", "row": "BM25", "dataset": "NQ"})


def test_each_top_k_cell_has_its_95_percent_wilson_interval(tmp_path):
    """A top-k answer recall is a share of the row's questions: 50 of 100 is 50.0 [40.4, 59.6]
    (Wilson; scipy's binomtest), in the CSV; the Markdown says how wide the widest is."""
    from dcsr.evaluation.tables import Row, write_retrieval_table

    rows = [Row("A", "t", {"questions": 100, "top1": 50.0, "top5": 100.0}),
            Row("B", "t", {"questions": 400, "top1": 25.0, "top5": 80.0})]
    write_retrieval_table(rows, ["top1", "top5"], {}, tmp_path / "t.csv", tmp_path / "t.md", title="T")
    cells = {(r["row"], r["metric"]): r for r in csv.DictReader(open(tmp_path / "t.csv"))}
    assert (cells[("A", "top1")]["ci95_low"], cells[("A", "top1")]["ci95_high"]) == ("40.38", "59.62")
    assert cells[("A", "top5")]["ci95_high"] == "100.00" and float(cells[("A", "top5")]["ci95_low"]) > 96
    assert float(cells[("B", "top1")]["ci95_high"]) - float(cells[("B", "top1")]["ci95_low"]) < 9
    assert "at most +/-9.6 points here" in (tmp_path / "t.md").read_text()
    # not a whole number of the questions (a mean over seeds): no interval claimed for it
    from dcsr.evaluation.tables import wilson_interval

    assert wilson_interval(33.3, 7) is None and wilson_interval(50.0, 0) is None
    # a test set judged by its own qrels (nDCG, not a share): no interval
    write_retrieval_table([Row("C", "beir", {"questions": 10, "judged_by": "qrels", "nDCG@10 (qrels)": 40.0})],
                          ["top1"], {}, tmp_path / "q.csv", tmp_path / "q.md", title="Q")
    (cell,) = [r for r in csv.DictReader(open(tmp_path / "q.csv")) if r["metric"] == "nDCG@10 (qrels)"]
    assert cell["ci95_low"] == cell["ci95_high"] == "" and "Wilson" not in (tmp_path / "q.md").read_text()
