"""Standard IR measures beside DPR's answer match: qrels, and MRR, nDCG and recall with
``ir_measures`` (pytrec_eval, trec_eval's own code), reading our TREC runs as trec_eval does.

Two kinds of qrels (``qid 0 docid rel``, trec_eval's format):

- **answer-match qrels** (:func:`answer_match_qrels`), for test sets without passage ids (DPR's
  test CSVs): every passage a run retrieved is judged, relevant (1) when it holds an answer by
  DPR's matching rules, else 0. They are a run's own judgments, labelled as such: two runs'
  answer-match measures are comparable only through the answer-matching, and recall against
  them is recall of what that run retrieved, so it is not reported.
- **gold qrels** (:func:`gold_qrels`), where the data knows the passage: the ``positive_ctxs``
  with a ``passage_id`` of DPR's train/dev JSON (and so every SQuAD-derived or generated
  dataset's dev questions, the ``<dataset>.dev`` test sets).

A run's ``# no hits: QID`` comment lines (a question BM25 found nothing for) are ours: strip
them (``grep -v '^#'``) before giving a run to trec_eval itself, which takes every line as a hit.

trec_eval ranks a run by score (descending; ties by docid, descending), not by the rank column.
Our runs' ranks follow the scores, but equal printed scores (DCSR's HasAns probabilities of
far-down passages print as 0.000000) are ordered by docid there; answer-match top-k reads the
rank column, so the two can differ inside such ties, never above them.

Why ``ir_measures`` and not a second implementation: it runs trec_eval's code (pytrec_eval) and
parses the same files, which is what a reader compares our numbers with.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, Sequence

from dcsr.errors import InputError, at
from dcsr.fsutil import atomic_open

Qrels = dict[str, dict[str, int]]  # {qid: {docid: relevance}}

#: The measures written beside answer-match top-k (ir_measures names).
ANSWER_MATCH_MEASURES = ("RR@10", "nDCG@10")
GOLD_MEASURES = ("RR@10", "nDCG@10", "R@20", "R@100")


def answer_match_qrels(questions_jsonl: str | os.PathLike) -> Qrels:
    """Judgments of every passage a run retrieved (its per-question results, ``*.questions.jsonl``):
    1 when it holds an answer, else 0."""
    from dcsr.evaluation.question_results import read_question_results

    judged = read_question_results(questions_jsonl, lambda rec: {str(pid): int(bool(flag)) for pid, flag in
                                                                 zip(rec["hits"], rec["has_answer"])})
    return {str(q): docs for q, docs in judged.items()}


def gold_qrels(records: Iterable[Mapping]) -> Qrels:
    """Gold qrels of DPR bi-encoder records (train/dev JSON), question ``i`` being the i-th
    record: each ``positive_ctxs`` entry with a ``passage_id`` is relevant. Records without one
    have no judgments (trec_eval leaves such questions out)."""
    qrels: Qrels = {}
    for i, rec in enumerate(records):
        gold = {str(c["passage_id"]): 1 for c in rec.get("positive_ctxs", []) if c.get("passage_id") not in (None, "")}
        if gold:
            qrels[str(i)] = gold
    return qrels


def write_qrels(path: str | os.PathLike, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """trec_eval's qrels format, ``qid 0 docid relevance``, atomically."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for qid in sorted(qrels, key=_numeric_first):
            for docid, rel in qrels[qid].items():
                fh.write(f"{qid} 0 {docid} {int(rel)}\n")


def read_qrels(path: str | os.PathLike) -> Qrels:
    qrels: Qrels = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise InputError(at(path, n), f"expected 4 fields: qid iteration docid relevance, found {len(parts)}")
            try:
                qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
            except ValueError:
                raise InputError(at(path, n), "relevance must be an integer") from None
    return qrels


def _numeric_first(qid: str):
    return (0, int(qid), "") if qid.lstrip("-").isdigit() else (1, 0, qid)


def measure_run(run: Mapping[int, Sequence[tuple[int, float]]], qrels: Mapping[str, Mapping[str, int]],
                measures: Sequence[str], questions: int | None = None) -> dict[str, float]:
    """``{measure: mean}`` (in %) of a run (``{qid: [(pid, score), ...]}``, as
    :func:`dcsr.data.runs.read_trec` reads a TREC file, skipping the ``# no hits`` comments that
    trec_eval's own reader would reject) against ``qrels``, computed by ir_measures (pytrec_eval),
    which ranks by score as trec_eval does. With ``questions`` the mean is over that many
    questions, one the qrels do not judge counting 0 (trec_eval ``-c``); else over the questions
    ir_measures reports (those of the qrels)."""
    import ir_measures

    parsed = [ir_measures.parse_measure(m) for m in measures]
    scored = [ir_measures.ScoredDoc(str(q), str(pid), score) for q, hits in run.items() for pid, score in hits]
    judged = [ir_measures.Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    totals = {m: 0.0 for m in parsed}
    seen: dict = {m: set() for m in parsed}
    for metric in ir_measures.iter_calc(parsed, judged, scored):
        totals[metric.measure] += metric.value
        seen[metric.measure].add(metric.query_id)
    out = {}
    for m in parsed:
        n = questions if questions is not None else len(seen[m])
        out[str(m)] = 100.0 * totals[m] / n if n else 0.0
    return out


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m dcsr.evaluation.trec_eval qrels RESULTS.questions.jsonl OUT.qrels``: the
    answer-match qrels of a run, for trec_eval; ``... gold DEV.json OUT.qrels``: gold qrels."""
    import argparse

    from dcsr.data.formats import read_biencoder

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("kind", choices=["qrels", "gold"])
    ap.add_argument("source")
    ap.add_argument("output")
    a = ap.parse_args(argv)
    qrels = answer_match_qrels(a.source) if a.kind == "qrels" else gold_qrels(read_biencoder(a.source))
    write_qrels(a.output, qrels)


if __name__ == "__main__":
    main()
