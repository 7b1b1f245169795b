"""Top-k answer recall with DPR's semantics.

A question counts as answered at k when one of its top-k retrieved passages has the
answer under DPR's ``has_answer`` (token match; regex match for CuratedTREC). The run must
list every question of the question file (one without hits as a ``# no hits`` line,
:mod:`dcsr.data.runs`): a question missing from it is an error, not a silent miss.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Sequence

from dcsr.data.answers import PassageMatcher, PatternTimeout
from dcsr.errors import InputError
from dcsr.data.formats import iter_qas
from dcsr.data.passage_store import load_passages
from dcsr.fsutil import atomic_open
from dcsr.settings import SECTIONS
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
    ap.add_argument("--gold", default=None, help="DPR dev JSON whose questions these are: MRR, nDCG and recall against "
                                                 "its gold passages too")


def score_from_arguments(a, run_trec: str | os.PathLike, about: dict | None = None) -> dict:
    """:func:`evaluate_run` of ``run_trec`` with the options of :func:`add_scoring_arguments`."""
    return evaluate_run(run_trec, a.questions, a.corpus, a.metrics, a.per_question,
                        ks=[int(k) for k in a.ks.split(",")], match_type=a.match, about=about, gold_json=a.gold)


def evaluate_run(run_trec: str | os.PathLike, qas_path: str | os.PathLike, corpus_tsv: str | os.PathLike,
                 out_metrics: str | os.PathLike, out_questions: str | os.PathLike | None = None,
                 ks: Sequence[int] = DEFAULT_KS, match_type: str = "string", about: dict | None = None,
                 gold_json: str | os.PathLike | None = None) -> dict:
    """Score a run; writes metrics JSON (and per-question JSONL) and returns the metrics.

    ``corpus_tsv`` is the DPR passage TSV, or its passage store directory
    (:mod:`dcsr.data.passage_store`), from which only the retrieved passages are read. ``about``
    goes into the metrics as it is (how the run was made, e.g. its HasAns temperature).

    Beside top-k, with ``gold_json`` (the DPR dev JSON whose questions are the test set, in order)
    ``trec_eval_gold`` holds MRR@10, nDCG@10 and recall@20/100 against its gold passages
    (:mod:`dcsr.evaluation.trec_eval`)."""
    qas = list(iter_qas(qas_path, match_type))  # regex answers compiled and checked here, before any work
    run = read_trec(run_trec)
    extra = sorted(q for q in run if not 0 <= q < len(qas))
    if extra:
        raise InputError(str(run_trec), f"names question {extra[0]}, but {qas_path} has {len(qas)} questions "
                                        f"(0..{len(qas) - 1}); was the run made for another question file?")
    absent = [q for q in range(len(qas)) if q not in run]
    if absent:
        shown = ", ".join(str(q) for q in absent[:10]) + (", ..." if len(absent) > 10 else "")
        raise InputError(str(run_trec), f"lacks {len(absent)} of the {len(qas)} questions of {qas_path} "
                                        f"(0-based: {shown}); search them again (a run lists every question, "
                                        "one without hits as a '# no hits: QID' line)")
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
    metrics.update(standard_measures(run, gold_json))
    with atomic_open(out_metrics, "w", encoding="utf-8") as fh:
        json.dump(metrics, fh, indent=2)
        fh.write("\n")
    if out_questions is not None:
        with atomic_open(out_questions, "w", encoding="utf-8") as fh:
            for q, qa in enumerate(qas):
                hits = run.get(q, [])[:depth]
                fh.write(json.dumps({
                    "qid": q, "question": qa.question, "answers": qa.answers, "first_hit": ranks[q],
                    "hits": [pid for pid, _ in hits], "has_answer": flags[q],
                }, ensure_ascii=False) + "\n")
    log.info("%s: %s", run_trec, metrics)
    return metrics
