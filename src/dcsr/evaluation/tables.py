"""Tables regenerated from ``results/`` metrics, with the papers' numbers beside ours.

The papers' numbers live in one file (``config/paper_numbers.yaml``); a table row names the
paper table, row and dataset it should be compared with. Every table is written as CSV
(long format: one line per row x test set x metric, with ``ours`` and ``paper`` columns) and
as Markdown for reading.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


from dcsr.errors import InputError
from dcsr.fsutil import atomic_open
from dcsr.yamlutil import strict_load


@dataclass(frozen=True)
class Cell:
    """One cell of a retrieval table: row ``row`` (its index in the table's rows) under the
    column ``column`` (a test set), filled by the run of ``qmodel`` x ``pmodel`` on ``dataset``."""

    row: int
    column: str
    qmodel: str
    pmodel: str
    dataset: str
    fusion: str | None = None  # a hybrid row's fusion of BM25 with the pair (linear, rrf)


def _per_column(value, column):
    """A row's ``question``/``passage``/``datasets`` entry for one column: a mapping is per
    column (a column it leaves out has no cell in that row), anything else is for every column."""
    return value.get(column) if isinstance(value, dict) else value


def table_cells(table: dict) -> list[Cell]:
    """Every cell of a table config, column by column.

    A row is BM25 (``retriever: bm25``), a bi-encoder, or BM25 fused with a bi-encoder
    (``retriever: hybrid``, ``fusion: linear`` or ``rrf``): ``question`` and ``passage`` each
    name a model, or map columns to models (DCSR Table 2 *Single*: ``{nq: dpr-nq, trivia:
    dpr-trivia}``). ``datasets`` maps a column to the dataset actually searched (DCSR Table 7:
    the column ``nq`` of the row "0.1M" is ``nq-first0.1m``, NQ's questions over the first
    0.1M passages); by default a column is its own dataset. Mappings may name columns the
    table does not have: they are ignored, so one mapping serves several tables.
    """
    cells = []
    for column in table["test_sets"]:
        for i, row in enumerate(table["rows"]):
            dataset = _per_column(row.get("datasets", {}), column) or column
            if row.get("retriever") == "bm25":
                cells.append(Cell(i, column, "bm25", "bm25", dataset))
                continue
            q, p = _per_column(row.get("question"), column), _per_column(row.get("passage"), column)
            if q is None and p is None:
                continue
            fusion = row.get("fusion", "linear") if row.get("retriever") == "hybrid" else None
            cells.append(Cell(i, column, q, p, dataset, fusion))
    return cells


def load_paper_numbers(path: str | os.PathLike) -> dict:
    """The papers' numbers (``config/paper_numbers.yaml``), read strictly: a key given twice is an error."""
    return strict_load(Path(path))


def paper_value(paper: dict, ref: dict | None, metric: str) -> float | None:
    """The paper's number for ``metric`` under ``ref = {table, row, dataset}``, or None."""
    if not ref:
        return None
    try:
        return paper[ref["table"]]["rows"][ref["row"]][ref["dataset"]][metric]
    except (KeyError, TypeError):
        return None


def wilson_interval(percent: float, questions: int) -> tuple[float, float] | None:
    """The 95% Wilson score interval (points) of a top-k answer recall of ``percent`` over
    ``questions`` (a share of questions answered: ``scipy.stats.binomtest``'s ``proportion_ci``);
    None where that is not a whole number of the questions (say, a mean over seeds)."""
    from scipy import stats

    hits = percent * questions / 100
    if questions <= 0 or abs(hits - round(hits)) >= 1e-6:
        return None
    ci = stats.binomtest(int(round(hits)), questions).proportion_ci(confidence_level=0.95, method="wilson")
    return 100 * float(ci.low), 100 * float(ci.high)


def paper_notes(paper: dict, shown) -> list[str]:
    """The notes of ``config/paper_numbers.yaml`` (a table's ``notes``: ``{rows, datasets, text}``)
    about the paper numbers a table shows, ``shown`` = ``(table, row, dataset)`` triples: e.g. cells
    the paper seems to have printed in each other's place. Each note once, in file order."""
    shown = set(shown)
    out = []
    for table in dict.fromkeys(t for t, _r, _d in sorted(shown)):
        for i, note in enumerate(paper.get(table, {}).get("notes") or []):
            if not (isinstance(note, dict) and isinstance(note.get("text"), str)
                    and all(isinstance(note.get(k), list) for k in ("rows", "datasets"))):
                raise InputError(f"paper numbers: {table}.notes[{i}]", "expected {rows: [row, ...], datasets: "
                                 f"[dataset, ...], text: '...'}}, found {note!r}")
            text = md_line(note["text"])  # a text of the config's: no markup of its own
            if any((table, r, d) in shown for r in note["rows"] for d in note["datasets"]) and text not in out:
                out.append(text)
    return out


@dataclass
class Row:
    label: str  # e.g. "DPR (ours)"
    test_set: str
    metrics: dict  # e.g. {"top1": 40.1, ...}
    paper_ref: dict | None = None  # {table, row, dataset}
    extra: dict = field(default_factory=dict)


def read_metrics(path: str | os.PathLike) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


#: What Markdown reads as markup that a text from the config must not carry: ``\\`` (so that
#: the text shows as written), ``<`` (raw HTML, ``<script>``, and ``<javascript:...>`` links)
#: and ``[ ]`` (links and images); each is backslash-escaped, which every CommonMark viewer
#: shows as the character itself.
MD_SPECIAL = "\\<[]"


def md_cell(text) -> str:
    """A text from the config (a label, a claim) as one cell of a Markdown table row: ``|``, which
    would end the cell and shift the rest of the row, escaped, and :data:`MD_SPECIAL`; a line
    break, which would end the row (the config check refuses them), a space."""
    return _escape(text, MD_SPECIAL + "|")


def md_line(text) -> str:
    """A text from the config on one line of Markdown (a title): :data:`MD_SPECIAL` escaped, each
    line break a space."""
    return _escape(text, MD_SPECIAL)


def _escape(text, special: str) -> str:
    return "".join("\\" + ch if ch in special else ch for ch in " ".join(str(text).splitlines()))


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def never_found_note(test_set: str, answers: int, questions_never_found: int, questions) -> str:
    """The line under a table for a test set whose regex answers DPR's code never finds
    (``bad_patterns: never_found``: the metrics' ``regex`` counts)."""
    return (f"- {md_line(test_set)}: {answers} answer pattern(s) do not compile after DPR's NFD normalization "
            f"and are never found, as DPR's code scores them (`bad_patterns: never_found`; the scoring jobs' logs "
            f"name them); {questions_never_found} of its {_fmt(questions)} questions have no other answer, so "
            f"every run misses them.")


def write_retrieval_table(rows: Sequence[Row], metrics: Sequence[str], paper: dict, out_csv, out_md,
                          title: str, notes: Sequence[str] = (), measures: Sequence[str] = ()) -> None:
    """Write a retrieval table (CSV long format + Markdown). ``measures`` (ir_measures names, e.g.
    ``RR@10``) add the runs' standard measures against their test set's pooled answer-match qrels
    (each row's metrics' ``trec_eval``; :mod:`dcsr.evaluation.trec_eval`) after the top-k columns.

    A row of a test set judged by qrels of its own (a BEIR collection: its metrics say
    ``judged_by: qrels``) has no top-k answer recall; its measures against those qrels
    (``nDCG@10 (qrels)``, ``R@100 (qrels)``, ``RR@10 (qrels)``) are columns of their own, named so in
    the CSV and the Markdown, and a table holding both kinds labels its top-k columns as answer
    match: no column mixes the two."""
    from dcsr.evaluation.trec_eval import QRELS_MEASURES, qrels_metric

    sources = {}
    widest = 0.0  # the widest 95% interval's half-width of a top-k cell (points)
    by_qrels = [r.metrics.get("judged_by") == "qrels" for r in rows]
    qrels_metrics = [qrels_metric(m) for m in QRELS_MEASURES] if any(by_qrels) else []
    mixed = any(by_qrels) and not all(by_qrels)
    measures = measures if not all(by_qrels) else []  # pooled answer-match measures: the answer-judged rows'
    with atomic_open(out_csv, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "test_set", "metric", "ours", "ci95_low", "ci95_high", "paper", "paper_source", "questions",
                    "hasans_temperature", "fusion_weight"])
        for r, qrels_row in zip(rows, by_qrels):
            for m in (qrels_metrics if qrels_row else metrics):
                pv = paper_value(paper, r.paper_ref, m)
                src = ""
                if pv is not None:
                    src = f"{paper[r.paper_ref['table']]['source']}: {r.paper_ref['row']} on {r.paper_ref['dataset']}"
                    sources[(r.paper_ref["table"], r.paper_ref["row"], r.paper_ref["dataset"])] = src
                ours, n = r.metrics.get(m), r.metrics.get("questions")
                interval = wilson_interval(ours, n) if ours is not None and not qrels_row and isinstance(n, int) else None
                ci = ("", "") if interval is None else tuple(f"{v:.2f}" for v in interval)
                if interval is not None:
                    widest = max(widest, (interval[1] - interval[0]) / 2)
                w.writerow([r.label, r.test_set, m, "" if ours is None else f"{ours:.2f}", *ci,
                            "" if pv is None else pv, src, r.metrics.get("questions", ""),
                            r.metrics.get("hasans_temperature", ""), r.metrics.get("fusion_weight", "")])
        for r, qrels_row in zip(rows, by_qrels):
            for m in ([] if qrels_row else measures):
                v = r.metrics.get("trec_eval", {}).get(m)
                w.writerow([r.label, r.test_set, f"{m} (pooled answer-match)", "" if v is None else f"{v:.2f}", "", "",
                            "", "", r.metrics.get("questions", ""), "", ""])
    paper_metrics = [m for m in metrics if any(paper_value(paper, r.paper_ref, m) is not None for r in rows)]
    # DCSR rows rank passages by HasAns: which softmax temperature each used
    temperatures = any("hasans_temperature" in r.metrics for r in rows)
    answer_metrics = metrics if not all(by_qrels) else []
    head = ["Retriever", "Test set", "Questions"]
    head += [m.replace("top", "Top-") + (" (answer match)" if mixed else "") for m in answer_metrics]
    head += [("MRR@" + m[3:] if m.startswith("RR@") else m) + "*" for m in measures]
    head += qrels_metrics
    head += [f"paper {m.replace('top', 'Top-')}" for m in paper_metrics]
    head += ["HasAns T"] if temperatures else []
    # hybrid rows with linear fusion: the dense weight chosen on dev
    weights = any("fusion_weight" in r.metrics for r in rows)
    head += ["Dense weight"] if weights else []
    lines = [f"# {md_line(title)}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [md_cell(r.label), md_cell(r.test_set), _fmt(r.metrics.get("questions"))]
        cells += [_fmt(r.metrics.get(m)) for m in answer_metrics]
        cells += [_fmt(r.metrics.get("trec_eval", {}).get(m)) for m in measures]
        cells += [_fmt(r.metrics.get(m)) for m in qrels_metrics]
        cells += [_fmt(paper_value(paper, r.paper_ref, m)) for m in paper_metrics]
        if temperatures:
            t = r.metrics.get("hasans_temperature")
            cells.append("–" if t is None else f"{t:g}")
        if weights:
            w = r.metrics.get("fusion_weight")
            cells.append("–" if w is None else f"{w:g}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if sources:
        lines.append("Paper columns: the number the paper reports for the row/test set it is compared with:")
        for src in sorted(set(sources.values())):
            lines.append(f"- {md_line(src)}")
        lines += [f"- Note: {n}" for n in paper_notes(paper, sources)]
    elif not any(r.paper_ref for r in rows):
        lines.append("Paper columns: no row of this table names a row of the papers (`paper:` in the table's config "
                     "rows), so there is no paper number to compare with.")
    else:
        lines.append("Paper columns: the papers report no number for these rows' references (`paper:`) on these test "
                     "sets at these k, so there is none to compare with.")
    if widest:
        lines.append(f"- Top-k cells are shares of the row's questions; the CSV gives each its 95% Wilson interval "
                     f"(`ci95_low`, `ci95_high`): at most +/-{widest:.1f} points here. Two rows of the same "
                     "questions are compared question by question in the claims ledger, not by these intervals.")
    if temperatures:
        lines.append("- HasAns T: the softmax temperature of DCSR's score normalization for sentence-level rows "
                     "(1: the paper's; with `dcsr.temperature: dev`, chosen per run on the dev questions of the "
                     "test set's dataset).")
    if measures:
        lines.append("- Columns marked *: the run's standard measure (ir_measures, trec_eval's code, on the TREC run "
                     "file in its own ranking: tied scores in the run's order, as top-k reads them) x 100, against answer-match qrels pooled over this table's runs on the row's test set "
                     "(TREC pooling: each passage some run retrieved within the depth, judged by DPR's matching), so "
                     "every row of a test set is measured against the same judgments, and runs outside the table "
                     "change none of them; the pools are listed below (dcsr.evaluation.trec_eval).")
    if qrels_metrics:
        lines.append("- Columns marked (qrels): the run's nDCG@10, R@100 (the share of the relevant passages in its "
                     "top 100) and MRR@10 x 100 (ir_measures, trec_eval's code, in the run's own ranking) against the test set's own qrels (a "
                     "BEIR collection), on the run with the collection's original ids (`*.original-ids.run` beside "
                     "it); such a test set has no answers, so no top-k answer recall"
                     + ("; top-k is answer match, on the other test sets." if mixed else "."))
    if weights:
        lines.append("- Dense weight: a hybrid row's weight w of linear fusion, w x dense + (1 - w) x BM25 of "
                     "min-max normalized scores, chosen on the dev questions of the test set's dataset "
                     "(dcsr.retrieval.fusion); RRF rows have none.")
    never = {}  # test set -> (questions no run can find, answers that do not compile, questions)
    for r in rows:
        rx = r.metrics.get("regex") or {}
        if rx.get("answers_never_found"):
            never[r.test_set] = (rx.get("questions_never_found", 0), rx["answers_never_found"], r.metrics.get("questions"))
    for test_set, (hopeless, answers, n) in sorted(never.items()):
        lines.append(never_found_note(test_set, answers, hopeless, n))
    for n in notes:
        lines.append(f"- {n}")
    with atomic_open(out_md, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
