"""Standard IR measures beside DPR's answer match: qrels, and MRR, nDCG and recall with
``ir_measures`` (pytrec_eval, trec_eval's own code), reading our TREC runs as trec_eval does.

Two kinds of qrels (``qid 0 docid rel``, trec_eval's format):

- **pooled answer-match qrels** (:func:`pooled_qrels`, rule ``pool_qrels``), for test sets
  without passage ids (DPR's test CSVs): TREC pooling over every run the config makes on the
  test set, each passage one of them retrieved within the scoring depth judged relevant (1) when
  it holds an answer by DPR's matching rules, else 0. Every row of a table is measured against
  the same judgments, so nDCG's ideal gain is the same for all of them; the pool's depth, runs
  and counts are written beside it (``*.pool.json``) and in the table's notes. Recall against
  them is recall of what the pool found, so it is not reported. (One run's own judgments,
  :func:`answer_match_qrels`, remain for a user's trec_eval call: ``python -m
  dcsr.evaluation.trec_eval qrels``.)
- **gold qrels** (:func:`gold_qrels`), where the data knows the passage: the ``positive_ctxs``
  with a ``passage_id`` of DPR's train/dev JSON (and so every SQuAD-derived or generated
  dataset's dev questions, the ``<dataset>.dev`` test sets).
- **a collection's own qrels** (a BEIR test set, :mod:`dcsr.data.beir`): its queries have no
  answers, so its runs are measured against them alone (:data:`QRELS_MEASURES`: nDCG@10, R@100,
  RR@10, named ``nDCG@10 (qrels)`` and so on), on the run with its original query and document ids
  (:func:`dcsr.evaluation.metrics.evaluate_qrels_run`). A run of the pipeline's own test set
  against such a qrels file, in the run's ranking: :func:`measure_beir_run` (SQuAD written as a
  BEIR collection, benchmarks/beir/beir.md).

A run's ``# no hits: QID`` comment lines (a question BM25 found nothing for) are ours: strip
them (``grep -v '^#'``) before giving a run to trec_eval itself, which takes every line as a hit.

trec_eval ranks a run by score (descending; ties by docid, descending), not by the rank column.
Our runs' ranks follow the scores, and scores are written in full (:func:`dcsr.data.runs.write_trec`:
DCSR's HasAns probabilities of far-down passages differ only past the 6th decimal), so trec_eval
reads our ranking, except inside ties: trec_eval keeps a score as a 32-bit float, so scores
that are equal, or closer than float32 resolves (about 6e-8 relative: HasAns and fusion scores
are float64; FAISS's are float32 already; BM25's are rounded; reciprocal rank fusion ties
often), are ordered by docid there, where our runs put the smaller passage id first. Inside
ties ir_measures even breaks them two ways: RR with its msmarco provider by docid ascending (as
strings), nDCG with pytrec_eval by docid descending. So every measure here is computed on the
run's own ranking, its rank column (:func:`in_rank_order`), as answer-match top-k and the
per-question records read it: every measure of a table's row ranks tied hits alike. trec_eval
run on one of our files can differ from our numbers inside such ties, never above them;
``order="score"`` computes trec_eval's reading (SQuAD as a BEIR collection is scored so, as
BEIR's own evaluation reads a run: :mod:`dcsr.pipeline.squad_beir`).

Why ``ir_measures`` and not a second implementation: it runs trec_eval's code (pytrec_eval) and
parses the same files, which is what a reader compares our numbers with.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, Sequence

from dcsr.errors import InputError, at
from dcsr.fsutil import atomic_open

Qrels = dict[str, dict[str, int]]  # {qid: {docid: relevance}}

GOLD_MEASURES = ("RR@10", "nDCG@10", "R@20", "R@100")
#: The measures of a test set judged by qrels of its own (a BEIR collection, :mod:`dcsr.data.beir`),
#: in place of top-k answer recall, which needs answers it does not have.
QRELS_MEASURES = ("nDCG@10", "R@100", "RR@10")
QRELS_SUFFIX = " (qrels)"


def qrels_metric(measure: str) -> str:
    """A qrels measure's name in metrics files, tables and the pair matrix: ``nDCG@10 (qrels)``,
    so that no column of a table that mixes answer-judged and qrels-judged test sets is read
    as the other kind."""
    return measure + QRELS_SUFFIX


def is_qrels_metric(name: str) -> bool:
    return name.endswith(QRELS_SUFFIX)
POOLED_CUTOFF = 10  # the deepest cutoff of the measures against pooled qrels (RR@10, nDCG@10)


def judged_depth(ks: Sequence[int]) -> int:
    """How deep each run's hits are judged (its per-question results) and pooled: to the
    deepest top-k, and at least to the pooled measures' cutoff, so that nDCG@10's ranks 6-10
    are judged when ``evaluate.ks`` stops at 5."""
    return max(max(ks), POOLED_CUTOFF)


def answer_match_qrels(questions_jsonl: str | os.PathLike) -> Qrels:
    """Judgments of every passage a run retrieved (its per-question results, ``*.questions.jsonl``):
    1 when it holds an answer, else 0."""
    from dcsr.evaluation.question_results import read_question_results

    judged = read_question_results(questions_jsonl, lambda rec: {str(pid): int(bool(flag)) for pid, flag in
                                                                 zip(rec["hits"], rec["has_answer"])})
    return {str(q): docs for q, docs in judged.items()}


def pooled_qrels(questions_jsonls: Sequence[str | os.PathLike], depth: int) -> tuple[Qrels, dict]:
    """Answer-match judgments pooled over runs of one test set (TREC pooling): every passage that
    one of the runs retrieved within ``depth`` (their per-question results, ``*.questions.jsonl``),
    1 when it holds an answer, else 0. Every question of the test set is there (a question no
    run judged anything for has no judgments, and counts 0). Returns ``(qrels, about)``: the
    pool's depth, runs, and counts of judged and relevant pairs."""
    from dcsr.evaluation.question_results import read_question_results

    qrels: Qrels = {}
    questions = None
    for path in questions_jsonls:
        judged = read_question_results(path, lambda rec: list(zip(rec["hits"][:depth], rec["has_answer"][:depth])))
        if questions is not None and len(judged) != questions:
            raise InputError(str(path), f"has {len(judged)} questions, the other runs of the pool {questions}: "
                                        "runs of one test set must cover the same questions")
        questions = len(judged)
        for q, hits in judged.items():
            docs = qrels.setdefault(str(q), {})
            for pid, flag in hits:
                rel = int(bool(flag))
                if docs.setdefault(str(pid), rel) != rel:
                    raise InputError(str(path), f"judges passage {pid} for question {q} as {rel}, another run of the "
                                                "pool as the opposite: the runs were scored with different answer "
                                                "matching")
    about = {"depth": depth, "runs": [str(p) for p in questions_jsonls], "questions": questions or 0,
             "judged": sum(len(d) for d in qrels.values()),
             "relevant": sum(r for d in qrels.values() for r in d.values())}
    return qrels, about


def pool_answer_match_qrels(questions_jsonls: Sequence[str | os.PathLike], depth: int,
                            qrels_out: str | os.PathLike, info_out: str | os.PathLike) -> dict:
    """:func:`pooled_qrels` written as trec_eval qrels and a JSON of what the pool holds."""
    import json

    qrels, about = pooled_qrels(questions_jsonls, depth)
    write_qrels(qrels_out, qrels)
    with atomic_open(info_out, "w", encoding="utf-8") as fh:
        json.dump(about, fh, indent=2)
    return about


class PooledMeasures:
    """Runs' standard measures against their test sets' pooled qrels (each qrels file read once),
    and what the pools held, for the table's notes."""

    def __init__(self):
        self._qrels: dict[str, Qrels] = {}
        self._about: dict[str, dict] = {}

    def measures(self, run_trec: str | os.PathLike, qrels_path: str | os.PathLike, measures: Sequence[str],
                 questions: int) -> dict[str, float]:
        import json

        from dcsr.data.runs import read_trec

        key = str(qrels_path)
        if key not in self._qrels:
            self._qrels[key] = read_qrels(qrels_path)
            info = os.path.splitext(key)[0] + ".pool.json"
            with open(info, encoding="utf-8") as fh:
                self._about[key] = json.load(fh)
        return {"qrels": f"answer-match, pooled ({os.path.basename(key)})",
                **measure_run(read_trec(run_trec), self._qrels[key], measures, questions)}

    def notes(self) -> list[str]:
        out = []
        for key, about in sorted(self._about.items()):
            out.append(f"Pooled qrels {os.path.basename(key)}: the top {about['depth']} of {len(about['runs'])} runs "
                       f"of this table on these questions, {about['judged']} (question, passage) pairs judged, "
                       f"{about['relevant']} holding an answer.")
        return out


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
    """trec_eval's qrels (``qid iteration docid relevance``), checked with the file and line: the
    relevance plain digits (Python's ``int`` reads ``1_0`` as 10 and ``٣`` as 3), the file UTF-8."""
    import re

    from dcsr.data.formats import not_utf8

    qrels: Qrels = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 4:
                    raise InputError(at(path, n), f"expected 4 fields: qid iteration docid relevance, "
                                                  f"found {len(parts)}")
                if not re.fullmatch(r"-?[0-9]+", parts[3]):
                    raise InputError(at(path, n), f"relevance {parts[3]!r} is not an integer (plain digits, as 0, "
                                                  "1 or 2)")
                try:
                    qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
                except ValueError:  # past Python's 4,300 digits
                    raise InputError(at(path, n), f"relevance {parts[3][:20]}... ({len(parts[3])} digits) is too "
                                                  "long") from None
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    return qrels


def _numeric_first(qid: str):
    return (0, int(qid), "") if qid.lstrip("-").isdigit() else (1, 0, qid)


def in_rank_order(run: Mapping, order: str = "rank") -> Mapping:
    """A run (``{qid: [(doc, score), ...]}``, each question's hits in rank order) as ir_measures is
    to read it: with ``order="rank"`` each hit's score falls with its rank (the run's own ranking,
    ties included); with ``order="score"`` the run's scores, which ir_measures orders as trec_eval
    does inside ties (by docid; the module's docstring says how)."""
    if order == "score":
        return run
    if order != "rank":
        raise InputError("order", f"is {order!r}; expected 'rank' (the run's ranking) or 'score' (trec_eval's)")
    return {q: [(d, float(len(hits) - i)) for i, (d, _) in enumerate(hits)] for q, hits in run.items()}


def measure_run(run: Mapping[int, Sequence[tuple[int, float]]], qrels: Mapping[str, Mapping[str, int]],
                measures: Sequence[str], questions: int | None = None, order: str = "rank") -> dict[str, float]:
    """``{measure: mean}`` (in %) of a run (``{qid: [(pid, score), ...]}``, as
    :func:`dcsr.data.runs.read_trec` reads a TREC file, in rank order, skipping the ``# no hits``
    comments that trec_eval's own reader would reject) against ``qrels``, computed by ir_measures
    (pytrec_eval, trec_eval's code). By default on the run's own ranking (:func:`in_rank_order`),
    as top-k answer recall and the per-question records read it, so that every measure of a row
    ranks tied hits alike (reciprocal rank fusion ties often, BM25's rounded scores too: by score,
    RR@10 would break them by docid ascending and nDCG@10 by docid descending); ``order="score"``
    is trec_eval's reading of the file. With ``questions`` the mean is over that many questions,
    one the qrels do not judge counting 0 (trec_eval ``-c``); else over the questions ir_measures
    reports (those of the qrels)."""
    import ir_measures

    run = in_rank_order(run, order)
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


#: A run's measures against a BEIR collection's qrels (:func:`measure_beir_run`): BEIR's nDCG@10,
#: RR@10, R@100 and Success@k. Against SQuAD-as-BEIR's qrels (answer matching over the whole
#: corpus, :func:`dcsr.data.beir.squad_to_beir`) Success@k is DPR's top-k answer recall.
BEIR_RUN_MEASURES = ("nDCG@10", "RR@10", "R@100", "Success@1", "Success@20", "Success@100")


def measure_beir_run(run_trec: str | os.PathLike, query_ids: Sequence[str], qrels_tsv: str | os.PathLike,
                     measures: Sequence[str] = BEIR_RUN_MEASURES, doc_ids: Mapping[int, str] | None = None,
                     order: str = "rank") -> dict[str, float]:
    """``{measure: mean}`` (in %) of a run in the pipeline's ids (a TREC file: question ``i`` is
    the test set's i-th question, the query ``query_ids[i]``) against a BEIR ``qrels/<split>.tsv``
    (:func:`dcsr.data.beir.read_beir_qrels`, checked against ``query_ids``). Passage ``p`` is the
    document ``doc_ids[p]``; by default ``str(p)``, as in SQuAD-as-BEIR, whose ``_id`` is the
    pipeline's passage id. The mean is over every question of the test set: one the qrels do not
    judge counts 0, as it is a miss in top-k answer recall. A hit whose document ``_id`` is the
    query's own is left out, as BEIR's evaluation does (:func:`dcsr.data.beir.drop_identical_ids`).

    ``order="rank"`` measures the run's own ranking, its rank column, which top-k answer recall
    reads: each hit is given a score that falls with its rank, so equal scores (reciprocal rank
    fusion ties often: the fusion put the smaller passage id first) keep the run's order.
    ``order="score"`` gives ir_measures the run's scores, as trec_eval reads the file: ties are
    broken by docid (as strings; the module's docstring says how). Each question's value, for a
    paired comparison of two runs: :func:`beir_run_by_question`."""
    original, qrels = _beir_run(run_trec, query_ids, qrels_tsv, doc_ids, order)
    return measure_run(original, qrels, measures, questions=len(query_ids), order="score")


def beir_run_by_question(run_trec: str | os.PathLike, query_ids: Sequence[str], qrels_tsv: str | os.PathLike,
                         measures: Sequence[str] = ("nDCG@10",), doc_ids: Mapping[int, str] | None = None,
                         order: str = "rank") -> dict[str, list[float]]:
    """``{measure: [value of each question]}`` of the run that :func:`measure_beir_run` measures, in
    the test set's question order (``query_ids``), as ir_measures gives them (0 to 1, not %); a
    question the qrels do not judge is 0. Their mean x 100 is :func:`measure_beir_run`'s."""
    import ir_measures

    original, qrels = _beir_run(run_trec, query_ids, qrels_tsv, doc_ids, order)
    parsed = {ir_measures.parse_measure(m): m for m in measures}
    values: dict[str, dict[str, float]] = {m: {} for m in measures}
    scored = [ir_measures.ScoredDoc(q, d, s) for q, hits in original.items() for d, s in hits]
    judged = [ir_measures.Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    for metric in ir_measures.iter_calc(list(parsed), judged, scored):
        values[parsed[metric.measure]][metric.query_id] = float(metric.value)
    return {m: [values[m].get(q, 0.0) for q in query_ids] for m in measures}


def _beir_run(run_trec, query_ids: Sequence[str], qrels_tsv, doc_ids: Mapping[int, str] | None,
              order: str) -> tuple[dict[str, list[tuple[str, float]]], Qrels]:
    """A run of the test set with the collection's ids, in its ranking (``order="rank"``) or by its
    scores, and the collection's qrels: what :func:`measure_beir_run` measures."""
    from dcsr.data.beir import drop_identical_ids, original_id_run, read_beir_qrels
    from dcsr.data.runs import read_trec

    run = in_rank_order(read_trec(run_trec), order)  # read_trec: each question's hits in rank order
    docs = doc_ids if doc_ids is not None else {pid: str(pid) for hits in run.values() for pid, _ in hits}
    run, _dropped = drop_identical_ids(run, query_ids, docs)  # as BEIR's evaluation (ignore_identical_ids)
    original = original_id_run(run, query_ids, docs, where=str(run_trec))
    return original, read_beir_qrels(qrels_tsv, queries=dict.fromkeys(query_ids))


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
    qrels = (answer_match_qrels(a.source) if a.kind == "qrels"
             else gold_qrels(read_biencoder(a.source, require_positive=False)))  # records without a positive: none
    write_qrels(a.output, qrels)


if __name__ == "__main__":
    main()
