"""Training-set statistics: the DCSR paper's Table 1 (questions per gold passage) and the
encoder attribution paper's Table 3 (corpus coverage, positive passage overlap, unique coverage).

The DCSR paper counts, for every passage that is some question's positive, how many questions
use it ("Contrastive Conflicts": one passage, several questions). The attribution paper's
statistics are functions of the same counts. Our gold passage is the record's first positive
context, as DPR trains on ``positive_ctxs[0]`` (the attribution paper: "each question only has
one positive passage").
"""

from __future__ import annotations

import csv
import os
from collections import Counter
from typing import Iterable, Sequence

from .errors import InputError
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


def _questions_per_gold(records: Iterable[dict]) -> tuple[Counter, int]:
    """``({gold key: number of questions}, number of records without a positive)``."""
    per_passage: Counter = Counter()
    skipped = 0
    for rec in records:
        if not rec["positive_ctxs"]:
            skipped += 1
            continue
        per_passage[_gold_key(rec["positive_ctxs"][0])] += 1
    return per_passage, skipped


def questions_per_gold_passage(train_json: str | os.PathLike) -> dict:
    """Stream a DPR biencoder JSON and count the questions of each gold passage.

    Returns ``{"1", "2", "3", ">=4"}`` (how many gold passages serve exactly 1, 2, 3, or at
    least 4 questions), ``avg`` (questions / distinct gold passages, unrounded),
    ``questions``, ``passages`` and ``without_positive`` (records with no positive, skipped
    as DPR's loader skips them).
    """
    per_passage, skipped = _questions_per_gold(iter_biencoder(train_json, require_positive=False))
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


# --------------------------------------------------------------------------- attribution Table 3


def coverage_statistics_of(records: Iterable[dict], alpha: float = 1.3, min_questions: int = 2) -> dict:
    """The attribution paper's Table 3 statistics of training records (normalised as
    :func:`~dcsr.formats.iter_biencoder` yields them, e.g. a sweep sample from
    :func:`dcsr.attribution.iter_sample`).

    - ``coverage``: corpus coverage, the number of distinct gold passages;
    - ``overlapping``: how many of them are the gold passage of at least ``min_questions``
      training questions;
    - ``overlap``: positive passage overlap, ``overlapping / coverage`` (NaN without passages);
    - ``unique``: unique passage coverage, ``coverage * (1 - overlap) ** alpha``, unrounded;
    - ``questions`` (records with a positive), ``without_positive`` (skipped as DPR skips them),
      ``min_questions`` and ``alpha`` as used.

    Which passages "overlap" is ambiguous in the paper: its text says "positive passages that
    can answer more than two training questions" (``min_questions=3``), but its numbers say
    "two or more" (``min_questions=2``, the default). Table 3 fixes only the formula (its unique
    column is ``coverage * (1 - overlap) ** 1.3`` of the printed two-decimal overlap, truncated:
    SQuAD 3,247 * 0.32 ** 1.3 = 738.2, printed 738). The DCSR paper's Table 1 counts questions
    per gold passage of the same three DPR training sets: the share of passages with >= 2
    questions is 0.678 (SQuAD), 0.141 (Trivia), 0.209 (NQ), exactly the printed overlaps 0.68 /
    0.14 / 0.21, where >= 3 gives 0.447 / 0.036 / 0.087.
    """
    if isinstance(min_questions, bool) or not isinstance(min_questions, int) or min_questions < 1:
        raise InputError("min_questions", f"must be a positive integer number of questions, got {min_questions!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < float("inf"):
        raise InputError("alpha", f"must be a positive number, got {alpha!r}")
    per_passage, skipped = _questions_per_gold(records)
    coverage = len(per_passage)
    overlapping = sum(1 for n in per_passage.values() if n >= min_questions)
    overlap = overlapping / coverage if coverage else float("nan")
    return {"coverage": coverage, "overlapping": overlapping, "overlap": overlap,
            "unique": coverage * (1 - overlap) ** alpha, "questions": sum(per_passage.values()),
            "without_positive": skipped, "min_questions": min_questions, "alpha": alpha}


def coverage_statistics(train_json: str | os.PathLike, alpha: float = 1.3, min_questions: int = 2) -> dict:
    """:func:`coverage_statistics_of` the records of a DPR biencoder JSON, streamed."""
    return coverage_statistics_of(iter_biencoder(train_json, require_positive=False), alpha, min_questions)
