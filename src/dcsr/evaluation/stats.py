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

from dcsr.errors import InputError
from dcsr.data.formats import iter_biencoder
from dcsr.fsutil import atomic_open
from dcsr.evaluation.tables import load_paper_numbers

TABLE1 = "dcsr_table1"
BUCKETS = ("1", "2", "3", ">=4")
STATISTICS = BUCKETS + ("avg", "questions", "passages")


def _gold_key(ctx: dict) -> tuple:
    """A passage's identity: its ``passage_id`` when the file gives one, else (title, text). An
    empty ``passage_id`` is none (as :func:`dcsr.evaluation.trec_eval.gold_qrels` reads it): the
    passages given so are not one passage.

    A passage given with an id in one record and without in another counts twice; DPR's
    files give ids either everywhere or nowhere.
    """
    if ctx.get("passage_id") not in (None, ""):
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


def write_statistics_csv(rows: Sequence[tuple[str, str | None, dict]], paper_numbers_path: str | os.PathLike,
                         paper_key: str, statistics: Sequence[str], csv_path: str | os.PathLike) -> tuple[str, dict]:
    """A statistics table as CSV (long: row, paper dataset, statistic, ours, paper, paper
    source), the paper's numbers (``paper_key`` of ``paper_numbers_path``, by the row's paper
    dataset name) beside ours. Returns the paper table's source and rows, for the Markdown."""
    paper = load_paper_numbers(paper_numbers_path).get(paper_key, {})
    source = paper.get("source", paper_key)
    paper_rows = paper.get("rows", {})
    with atomic_open(csv_path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "paper_dataset", "statistic", "ours", "paper", "paper_source"])
        for label, name, stats in rows:
            pr = paper_rows.get(name) if name else None
            for stat in statistics:
                pv = pr.get(stat) if pr else None
                w.writerow([label, name or "", stat, stats.get(stat, ""), "" if pv is None else pv,
                            source if pv is not None else ""])
    return source, paper_rows


def write_table1(rows: Sequence[tuple[str, str | None, dict]], paper_numbers_path: str | os.PathLike,
                 csv_path: str | os.PathLike, md_path: str | os.PathLike) -> None:
    """Write Table 1 as CSV (long: one line per row x statistic, ``ours`` and ``paper``) and Markdown.

    ``rows`` are ``(label, paper dataset name or None, stats)`` with ``stats`` from
    :func:`questions_per_gold_passage`. In the Markdown each of our rows ("<label> (ours)") is
    followed by a separate "<paper name> (paper)" row when the paper reports that dataset.
    """
    source, paper_rows = write_statistics_csv(rows, paper_numbers_path, TABLE1, STATISTICS + ("without_positive",),
                                              csv_path)

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
    :func:`~dcsr.data.formats.iter_biencoder` yields them, e.g. a sweep sample from
    :func:`dcsr.attribution.analysis.iter_sample`).

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


# --------------------------------------------------------------------------- DCSR Appendix B


APPENDIX_B = "dcsr_appendix_b"
APPENDIX_B_STATISTICS = ("questions", "title_shared", "title_shared_pct", "passage_shared", "passage_shared_pct",
                         "title_shared_any", "title_shared_any_pct", "passage_shared_any", "passage_shared_any_pct",
                         "dev_questions")


def dev_positives_in_train(train_json: str | os.PathLike, dev_json: str | os.PathLike,
                           match_type: str = "string") -> dict:
    """DCSR's Appendix B: how many dev questions' positive passages are positives of training
    questions too ("Of all 7921 questions that have at least one positive passage containing the
    answer in SQuAD-dev, 7624 (96.25%) of these passages' titles could be found in the positive
    passages of SQuAD-train ... 6973 (88.03%) of these passages are shared").

    - ``questions``: dev questions with at least one positive context that contains an answer
      (DPR's ``has_answer`` on the text, ``match_type`` as the dataset's);
    - ``title_shared`` / ``passage_shared``: of those, the questions whose *first* answer-bearing
      positive has its title among the titles of all training positives / is itself a training
      positive (by ``passage_id``, else by title and text). The paper says "these passages", one
      per question; we take the one DPR would train on, the first;
    - ``title_shared_any`` / ``passage_shared_any``: the same with *any* answer-bearing positive
      (the other reading of the paper), never below the first-positive counts;
    - ``*_pct``: percent of ``questions`` (NaN without questions); ``dev_questions``: all records.

    The training file is streamed once (its positives' titles and ids kept as sets), the dev file once.
    """
    from dcsr.data.answers import PassageMatcher

    train_titles: set[str] = set()
    train_passages: set[tuple] = set()
    for rec in iter_biencoder(train_json, require_positive=False):
        for ctx in rec["positive_ctxs"]:
            train_titles.add(ctx["title"])
            train_passages.add(_gold_key(ctx))
    matcher = PassageMatcher(match_type)
    out = {k: 0 for k in APPENDIX_B_STATISTICS if not k.endswith("_pct")}
    for rec in iter_biencoder(dev_json, require_positive=False):
        out["dev_questions"] += 1
        with_answer = [c for c in rec["positive_ctxs"] if matcher.match(rec["answers"], matcher.prepare(c["text"]))]
        if not with_answer:
            continue
        out["questions"] += 1
        out["title_shared"] += with_answer[0]["title"] in train_titles
        out["passage_shared"] += _gold_key(with_answer[0]) in train_passages
        out["title_shared_any"] += any(c["title"] in train_titles for c in with_answer)
        out["passage_shared_any"] += any(_gold_key(c) in train_passages for c in with_answer)
    for k in ("title_shared", "passage_shared", "title_shared_any", "passage_shared_any"):
        out[f"{k}_pct"] = 100.0 * out[k] / out["questions"] if out["questions"] else float("nan")
    return out


def write_appendix_b(rows: Sequence[tuple[str, str | None, dict]], paper_numbers_path: str | os.PathLike,
                     csv_path: str | os.PathLike, md_path: str | os.PathLike) -> None:
    """Write the Appendix B statistic of every dataset as CSV (long: row, paper dataset,
    statistic, ours, paper, paper source) and Markdown, the paper's numbers (``dcsr_appendix_b``
    of ``paper_numbers_path``, by the dataset's paper name) beside ours.

    ``rows`` are ``(label, paper dataset name or None, stats)`` with ``stats`` from
    :func:`dev_positives_in_train`.
    """
    source, paper_rows = write_statistics_csv(rows, paper_numbers_path, APPENDIX_B, APPENDIX_B_STATISTICS, csv_path)

    def count(values: dict, k: str) -> str:
        if values.get(k) is None:
            return "–"
        pct = values.get(f"{k}_pct")
        return f"{int(values[k]):,}" + ("" if pct is None or pct != pct else f" ({pct:.2f}%)")

    head = ["Dev set", "Questions", "Title in train (first)", "Passage in train (first)", "Title in train (any)",
            "Passage in train (any)"]
    lines = ["# Dev positives that are training positives too (DCSR paper, Appendix B)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cols = ("title_shared", "passage_shared", "title_shared_any", "passage_shared_any")
    for label, name, stats in rows:
        lines.append("| " + " | ".join([f"{label} (ours)", count(stats, "questions")] + [count(stats, k) for k in cols]) + " |")
        pr = paper_rows.get(name) if name else None
        if pr:
            lines.append("| " + " | ".join([f"{name} (paper)", count(pr, "questions")] + [count(pr, k) for k in cols]) + " |")
    lines += ["", "Questions: dev questions with at least one positive passage that contains an answer (DPR's "
              "answer matching). Title / passage in train: of those, the questions whose answer-bearing positive "
              "has its title among the titles of the training set's positive passages / is one of them (by "
              "passage_id). (first): the question's first such positive, the one DPR trains on; (any): any of them. "
              "The paper does not say which; its numbers are shown under (first).",
              f"Rows marked (paper): {source}."]
    with atomic_open(md_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
