"""Training-set statistics: the DCSR paper's Table 1 (questions per gold passage).

The paper counts, for every passage that is some question's positive, how many questions use
it ("Contrastive Conflicts": one passage, several questions). Our gold passage is the
record's first positive context, as DPR trains on ``positive_ctxs[0]``.
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from typing import Sequence

from .formats import iter_biencoder
from .fsutil import atomic_open
from .tables import load_paper_numbers

TABLE1 = "dcsr_table1"
BUCKETS = ("1", "2", "3", ">=4")
STATISTICS = BUCKETS + ("avg", "questions", "passages")


def _gold_key(ctx: dict) -> tuple:
    """A passage's identity: its ``passage_id`` when the file gives one, else (title, text).

    A passage given with an id in one record and without in another counts twice; DPR's
    files give ids either everywhere or nowhere.
    """
    if "passage_id" in ctx:
        return ("id", ctx["passage_id"])
    return ("text", ctx["title"], ctx["text"])


def questions_per_gold_passage(train_json: str | os.PathLike) -> dict:
    """Stream a DPR biencoder JSON and count the questions of each gold passage.

    Returns ``{"1", "2", "3", ">=4"}`` (how many gold passages serve exactly 1, 2, 3, or at
    least 4 questions), ``avg`` (questions / distinct gold passages, unrounded),
    ``questions``, ``passages`` and ``without_positive`` (records with no positive, skipped
    as DPR's loader skips them).
    """
    per_passage: Counter = Counter()
    skipped = 0
    for rec in iter_biencoder(train_json, require_positive=False):
        if not rec["positive_ctxs"]:
            skipped += 1
            continue
        per_passage[_gold_key(rec["positive_ctxs"][0])] += 1
    questions, passages = sum(per_passage.values()), len(per_passage)
    sizes = Counter(min(n, 4) for n in per_passage.values())
    out = {b: sizes[i] for i, b in enumerate(BUCKETS, start=1)}
    out.update(avg=questions / passages if passages else float("nan"), questions=questions, passages=passages,
               without_positive=skipped)
    return out


def _cell(stat: str, v) -> str:
    if v is None:
        return "–"
    return f"{v:.2f}" if stat == "avg" else f"{int(v):,}"


def write_table1(rows: Sequence[tuple[str, str | None, dict]], paper_numbers_path: str | os.PathLike,
                 csv_path: str | os.PathLike, md_path: str | os.PathLike) -> None:
    """Write Table 1 as CSV (long: one line per row x statistic, ``ours`` and ``paper``) and Markdown.

    ``rows`` are ``(label, paper dataset name or None, stats)`` with ``stats`` from
    :func:`questions_per_gold_passage`. In the Markdown each of our rows ("<label> (ours)") is
    followed by a separate "<paper name> (paper)" row when the paper reports that dataset.
    """
    paper = load_paper_numbers(paper_numbers_path).get(TABLE1, {})
    source = paper.get("source", TABLE1)
    paper_rows = paper.get("rows", {})
    with atomic_open(csv_path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "paper_dataset", "statistic", "ours", "paper", "paper_source"])
        for label, name, stats in rows:
            pr = paper_rows.get(name) if name else None
            for s in STATISTICS + ("without_positive",):
                pv = pr.get(s) if pr else None
                w.writerow([label, name or "", s, stats.get(s, ""), "" if pv is None else pv,
                            source if pv is not None else ""])

    head = ["Training set", "Questions", "Gold passages", "1", "2", "3", "≥4", "Avg"]
    lines = ["# Questions per gold passage (DCSR paper, Table 1)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    missing = []
    for label, name, stats in rows:
        lines.append("| " + " | ".join([f"{label} (ours)"] + [_cell(s, stats.get(s)) for s in
                                         ("questions", "passages") + BUCKETS + ("avg",)]) + " |")
        pr = paper_rows.get(name) if name else None
        if pr:
            lines.append("| " + " | ".join([f"{name} (paper)", "–", "–"] + [_cell(s, pr.get(s)) for s in
                                             BUCKETS + ("avg",)]) + " |")
        else:
            missing.append(label)
    lines += ["", "Columns 1, 2, 3, ≥4: how many gold passages (a question's first positive, identified by "
              "passage_id, else by title and text) are the positive of exactly that many training questions; "
              "Avg: questions per gold passage.",
              f"Rows marked (paper): {source}."]
    if missing:
        lines.append(f"No paper numbers for: {', '.join(missing)} (not one of the paper's training sets).")
    skipped = [f"{label}: {stats['without_positive']}" for label, _, stats in rows if stats.get("without_positive")]
    if skipped:
        lines.append(f"Questions without a positive passage, not counted: {', '.join(skipped)}.")
    with atomic_open(md_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
