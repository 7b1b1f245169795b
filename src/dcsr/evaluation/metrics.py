"""Top-k answer recall with DPR's semantics.

A question counts as answered at k when one of its top-k retrieved passages has the
answer under DPR's ``has_answer`` (token match; regex match for CuratedTREC). The run must
list every question of the question file (one without hits as a ``# no hits`` line,
:mod:`dcsr.data.runs`): a question missing from it is an error, not a silent miss.

A test set judged by qrels of its own (a BEIR collection, whose queries have no answers) is
scored against them instead (:func:`evaluate_qrels_run`).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Sequence

from dcsr.data.answers import PassageMatcher, PatternTimeout, pattern_compiles
from dcsr.errors import InputError
from dcsr.data.formats import iter_qas, judged_by_qrels
from dcsr.data.passage_store import load_passages
from dcsr.fsutil import atomic_open
from dcsr.settings import BAD_PATTERNS, SECTIONS
from dcsr.data.runs import read_trec
from dcsr.evaluation.trec_eval import judged_depth

log = logging.getLogger(__name__)

DEFAULT_KS = tuple(SECTIONS["evaluate"]["ks"].default)  # the one definition: dcsr.settings


def first_hit_ranks(hits_has_answer: Sequence[Sequence[bool]]) -> list[int | None]:
    """1-based rank of the first answer-bearing passage per question (None: no hit)."""
    out: list[int | None] = []
    for flags in hits_has_answer:
        out.append(next((r for r, f in enumerate(flags, start=1) if f), None))
    return out


def topk_recall(ranks: Sequence[int | None], ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """Percentage of questions whose first hit is at rank <= k, for each k."""
    n = len(ranks)
    return {f"top{k}": (100.0 * sum(1 for r in ranks if r is not None and r <= k) / n if n else 0.0) for k in ks}


def standard_measures(run, gold_json=None) -> dict:
    """``{"trec_eval_gold": gold measures}`` of a run read by :func:`read_trec` (see
    :func:`evaluate_run`), computed by ir_measures, where the questions' gold passages are known.
    Measures against answer-match judgments need the judgments of every run of the test set
    (pooled qrels, rule pool_qrels): a table computes them, not the scoring of one run."""
    from dcsr.evaluation.trec_eval import GOLD_MEASURES, gold_qrels, measure_run

    out = {}
    if gold_json is not None:
        from dcsr.data.formats import iter_biencoder

        gold = gold_qrels(iter_biencoder(gold_json, require_positive=False))
        out["trec_eval_gold"] = {"qrels": f"gold passages of {os.path.basename(gold_json)}",
                                 "judged_questions": len(gold), **measure_run(run, gold, GOLD_MEASURES)}
    return out


def add_scoring_arguments(ap, required: bool = True) -> None:
    """The options of a script that scores a run with :func:`evaluate_run` (evaluate_topk,
    merge_runs, fuse_runs); :func:`score_from_arguments` reads them back."""
    ap.add_argument("--questions", required=required, help="DPR qas TSV of the run's questions")
    ap.add_argument("--corpus", required=required,
                    help="DPR passage TSV, or its passage store (a directory: dcsr.data.passage_store)")
    ap.add_argument("--metrics", required=required, help="the run's top-k answer recall (JSON)")
    ap.add_argument("--per-question", default=None, help="and every question's hits (JSONL)")
    ap.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)))
    ap.add_argument("--match", choices=["string", "regex"], default="string")
    ap.add_argument("--bad-patterns", choices=BAD_PATTERNS, default="refuse",
                    help="with --match regex: a test answer that does not compile stops the scoring (refuse) or is "
                         "never found, as DPR scores it (never_found)")
    ap.add_argument("--gold", default=None, help="DPR dev JSON whose questions these are: MRR, nDCG and recall against "
                                                 "its gold passages too")
    ap.add_argument("--qrels", default=None, help="a BEIR test set's qrels (original ids, trec_eval's format): the run "
                                                  "is measured against them (nDCG@10, R@100, RR@10), not by answers")
    ap.add_argument("--query-ids", default=None, help="with --qrels: the query _id of each question (TSV)")
    ap.add_argument("--doc-ids", default=None, help="with --qrels: the document _id of each passage id (TSV)")


def score_from_arguments(a, run_trec: str | os.PathLike, about: dict | None = None) -> dict:
    """:func:`evaluate_run` of ``run_trec`` with the options of :func:`add_scoring_arguments`
    (:func:`evaluate_qrels_run` with ``--qrels``)."""
    ks = [int(k) for k in a.ks.split(",")]
    if a.qrels:
        if not (a.query_ids and a.doc_ids):
            raise InputError("arguments", "--qrels needs --query-ids and --doc-ids (the test set's and the corpus's "
                                          "id mappings, dcsr.data.beir)")
        return evaluate_qrels_run(run_trec, a.questions, a.qrels, a.query_ids, a.doc_ids, a.metrics, a.per_question,
                                  ks=ks, about=about)
    return evaluate_run(run_trec, a.questions, a.corpus, a.metrics, a.per_question,
                        ks=ks, match_type=a.match, about=about, gold_json=a.gold, bad_patterns=a.bad_patterns)


def check_run_covers(run: dict, n_questions: int, run_trec, qas_path) -> None:
    """A run names questions 0 .. n-1 of its question file, every one of them (one without hits
    as a ``# no hits`` line): else an :class:`InputError` naming the run."""
    extra = sorted(q for q in run if not 0 <= q < n_questions)
    if extra:
        raise InputError(str(run_trec), f"names question {extra[0]}, but {qas_path} has {n_questions} questions "
                                        f"(0..{n_questions - 1}); was the run made for another question file?")
    absent = [q for q in range(n_questions) if q not in run]
    if absent:
        shown = ", ".join(str(q) for q in absent[:10]) + (", ..." if len(absent) > 10 else "")
        raise InputError(str(run_trec), f"lacks {len(absent)} of the {n_questions} questions of {qas_path} "
                                        f"(0-based: {shown}); search them again (a run lists every question, "
                                        "one without hits as a '# no hits: QID' line)")


def _write_results(out_metrics, metrics: dict, out_questions, records) -> None:
    with atomic_open(out_metrics, "w", encoding="utf-8") as fh:
        json.dump(metrics, fh, indent=2)
        fh.write("\n")
    if out_questions is not None:
        with atomic_open(out_questions, "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")


def evaluate_qrels_run(run_trec: str | os.PathLike, queries_path: str | os.PathLike, qrels_path: str | os.PathLike,
                       query_ids: str | os.PathLike, doc_ids: str | os.PathLike, out_metrics: str | os.PathLike,
                       out_questions: str | os.PathLike | None = None, ks: Sequence[int] = DEFAULT_KS,
                       about: dict | None = None) -> dict:
    """Score a run of a test set judged by qrels of its own (a BEIR collection: no answers): the
    run is given its original query and document ids (:func:`dcsr.data.beir.original_id_run`,
    what rule ``original_id_run`` writes beside it) and measured by ir_measures against the
    qrels (:data:`~dcsr.evaluation.trec_eval.QRELS_MEASURES`, as ``nDCG@10 (qrels)`` and so on),
    the mean over every query of the test set (one without hits counts 0); a hit whose document
    ``_id`` is the query's own is left out first, as BEIR's evaluation does
    (:func:`dcsr.data.beir.drop_identical_ids`). No top-k answer
    recall: nothing holds an answer. The per-question results mark each hit relevant (qrels
    score > 0) in ``has_answer``, ``first_hit`` the rank of the first relevant one, each record
    with its ``query_id``."""
    from dcsr.data.beir import drop_identical_ids, original_id_run, read_doc_ids, read_query_ids
    from dcsr.evaluation.trec_eval import QRELS_MEASURES, measure_run, qrels_metric, read_qrels

    questions = list(iter_qas(queries_path))
    run = read_trec(run_trec)
    check_run_covers(run, len(questions), run_trec, queries_path)
    qids = read_query_ids(query_ids)
    if len(qids) != len(questions):
        raise InputError(str(query_ids), f"has {len(qids)} query ids, but {queries_path} has {len(questions)} "
                                         "questions; the two files come from different conversions")
    docs = read_doc_ids(doc_ids, {pid for hits in run.values() for pid, _ in hits})
    run, dropped = drop_identical_ids(run, qids, docs)  # as BEIR's evaluation: a query is not its own answer
    if dropped:
        log.info("%s: %d hit(s) whose document _id is the query's own _id left out, as BEIR's evaluation does "
                 "(ignore_identical_ids)", run_trec, dropped)
    original = original_id_run(run, qids, docs, where=str(run_trec))
    qrels = read_qrels(qrels_path)
    unknown = sorted(set(qrels) - set(qids))
    if unknown:
        raise InputError(str(qrels_path), f"judges query {unknown[0]!r}, which {query_ids} lacks; the qrels and the "
                                          "test set come from different conversions")
    measured = measure_run(original, qrels, QRELS_MEASURES, questions=len(questions))
    metrics = {"questions": len(questions), "judged_by": "qrels", "qrels": os.path.basename(str(qrels_path)),
               **(about or {}), **{qrels_metric(m): measured[m] for m in QRELS_MEASURES},
               **({"identical_ids_dropped": dropped} if dropped else {})}
    depth = judged_depth(ks)

    def records():
        for q, qa in enumerate(questions):
            judged = qrels.get(qids[q], {})
            hits = original.get(qids[q], [])[:depth]
            flags = [judged.get(doc, 0) > 0 for doc, _ in hits]
            yield {"qid": q, "query_id": qids[q], "question": qa.question, "answers": [],
                   "first_hit": first_hit_ranks([flags])[0], "hits": [pid for pid, _ in run.get(q, [])[:depth]],
                   "has_answer": flags, "judged_by": "qrels"}

    _write_results(out_metrics, metrics, out_questions, records())
    log.info("%s: %s", run_trec, metrics)
    return metrics


def evaluate_run(run_trec: str | os.PathLike, qas_path: str | os.PathLike, corpus_tsv: str | os.PathLike,
                 out_metrics: str | os.PathLike, out_questions: str | os.PathLike | None = None,
                 ks: Sequence[int] = DEFAULT_KS, match_type: str = "string", about: dict | None = None,
                 gold_json: str | os.PathLike | None = None, bad_patterns: str = "refuse") -> dict:
    """Score a run; writes metrics JSON (and per-question JSONL) and returns the metrics.

    ``corpus_tsv`` is the DPR passage TSV, or its passage store directory
    (:mod:`dcsr.data.passage_store`), from which only the retrieved passages are read. ``about``
    goes into the metrics as it is (how the run was made, e.g. its HasAns temperature).

    Beside top-k, with ``gold_json`` (the DPR dev JSON whose questions are the test set, in order)
    ``trec_eval_gold`` holds MRR@10, nDCG@10 and recall@20/100 against its gold passages
    (:mod:`dcsr.evaluation.trec_eval`).

    With ``match_type="regex"``, ``bad_patterns`` says what an answer that does not compile does
    (:func:`dcsr.data.answers.check_patterns`): stop here (``refuse``), or count as never found
    (``never_found``, as DPR's code scores it); then each is named in the log, and the metrics'
    ``regex`` holds how many answers and how many questions (those without an answer that
    compiles, a miss for every run) there are."""
    if judged_by_qrels(qas_path):
        raise InputError(str(qas_path), "holds queries judged by qrels (a BEIR test set), which have no answers: "
                                        "score its runs against the qrels (--qrels, --query-ids, --doc-ids)")
    never_found: list[tuple[str, int, str]] = []
    qas = list(iter_qas(qas_path, match_type, bad_patterns, never_found))  # regex answers checked here, before any work
    for where, i, answer in never_found:
        log.warning("%s: answer %d (%r) is not a valid regular expression: never found, as DPR's code scores it",
                    where, i, answer)
    run = read_trec(run_trec)
    check_run_covers(run, len(qas), run_trec, qas_path)
    depth = judged_depth(ks)  # the per-question results are judged to the pooled measures' cutoff too
    wanted = {pid for hits in run.values() for pid, _ in hits[:depth]}
    texts = load_passages(corpus_tsv, wanted)
    missing = wanted - texts.keys()
    if missing:
        raise InputError(str(run_trec), f"retrieves passage {min(missing)}, which is not in {corpus_tsv}; "
                                        "was the run made over another corpus?")
    matcher = PassageMatcher(match_type)
    flags = []
    for q, qa in enumerate(qas):
        hits = run.get(q, [])[:depth]
        found = []
        for pid, _ in hits:
            try:
                found.append(matcher(qa.answers, pid, texts[pid].text))
            except PatternTimeout as e:
                raise InputError(str(qas_path), f"question {q} ({qa.question!r}), {e.where} on passage {pid}: "
                                                f"{e.problem}") from None
        flags.append(found)
    ranks = first_hit_ranks(flags)
    metrics = {"questions": len(qas), "match": match_type, **(about or {}), **topk_recall(ranks, ks)}
    if match_type == "regex":
        hopeless = sum(1 for qa in qas if not any(pattern_compiles(a) for a in qa.answers))
        metrics["regex"] = {"bad_patterns": bad_patterns, "answers_never_found": len(never_found),
                            "questions_never_found": hopeless}
    metrics.update(standard_measures(run, gold_json))
    _write_results(out_metrics, metrics, out_questions,
                   ({"qid": q, "question": qa.question, "answers": qa.answers, "first_hit": ranks[q],
                     "hits": [pid for pid, _ in run.get(q, [])[:depth]], "has_answer": flags[q]}
                    for q, qa in enumerate(qas)))
    log.info("%s: %s", run_trec, metrics)
    return metrics
