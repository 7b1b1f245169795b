"""DCSR's score normalization at retrieval time (Section 3.3): the top 100 x k sentences of a
question are softmax-normalised and each passage is scored by HasAns, the probability that at
least one of its sentences holds the answer. NumPy only (no torch), so the merge jobs that
apply it start fast; :mod:`dcsr.models.markers` re-exports these names.

Against DCSR's own code: it computes ``1 - p`` in float32, so every sentence with p below about
6e-8 counts as 1 and the passages made only of such sentences tie, left in order of first
appearance; here (float64, log space) they are ranked, ties by the smaller passage id. The top
of the ranking is the same: an audit on the demo's dcsr-a SQuAD shard (965 test questions)
found top-1/5/20/100 identical at 300 and 3,000 sentences a question, the order inside the top
100 differing for 59 and 131 questions, far down.
"""

from __future__ import annotations

import logging
import math
from typing import Sequence

import numpy as np

from dcsr.errors import InputError
from dcsr.evaluation.metrics import DEFAULT_KS

log = logging.getLogger(__name__)


def sentences_to_retrieve(k_passages: int = 100, *, avg_sentences_per_passage: float) -> int:
    """DCSR retrieves the top ``k_passages * k`` sentences (``k``: mean sentences per passage,
    :func:`dcsr.data.sentences.average_sentences_per_passage`) to rank ``k_passages`` passages."""
    if k_passages < 1 or avg_sentences_per_passage <= 0:
        raise ValueError("k_passages and avg_sentences_per_passage must be positive")
    # round first: 100 * 1.45 is 144.99999999999997 in floating point
    return int(math.ceil(round(k_passages * avg_sentences_per_passage, 9)))


def _log1mexp(logp: np.ndarray) -> np.ndarray:
    """``log(1 - exp(logp))`` for ``logp <= 0``, accurate at both ends (Maechler 2012)."""
    out = np.empty_like(logp)
    near_one = logp > -math.log(2.0)
    with np.errstate(divide="ignore"):
        out[near_one] = np.log(-np.expm1(logp[near_one]))
    out[~near_one] = np.log1p(-np.exp(logp[~near_one]))
    return out


def hasans_topk(scores, pids, temperature: float = 1.0, top_passages: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Passage ranking by HasAns (DCSR Section 3.3), for a batch of questions.

    scores: ``[Q, M]`` sentence scores (dot products) of each question's retrieved sentences;
    pids: ``[Q, M]`` int, the passage of each sentence, ``-1`` for padding (ignored).

    Per question: ``p = softmax(scores / temperature)`` over its (non-padding) sentences (the
    official code uses no temperature: 1.0), then ``HasAns(P) = 1 - prod_{s in P} (1 - p_s)``
    computed in log space, ``-expm1(sum_s log(1 - p_s))`` with ``log(1 - p)`` from ``log p``
    (``log1p(-p)`` for small p, ``log(-expm1(log p))`` near 1): a naive ``1 - prod(1 - p)`` loses
    most digits when thousands of tiny ``p_s`` add up (``1 - p`` rounds) and hits ``log(0)`` for
    ``p`` = 1. Passages are ranked by ``sum_s log(1 - p_s)`` ascending (HasAns descending, at
    full precision), ties broken by the smaller passage id.

    Returns ``(top_pids [Q, k], hasans [Q, k])``, ``k = min(top_passages, most passages of
    any question)``; rows with fewer passages are padded with pid ``-1`` and score ``nan``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    pids = np.asarray(pids, dtype=np.int64)
    if scores.ndim == 1:
        scores, pids = scores[None, :], pids[None, :]
    if scores.shape != pids.shape or scores.ndim != 2:
        raise ValueError(f"scores {scores.shape} and pids {pids.shape} must both be [Q, M]")
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    q, m = scores.shape
    valid = pids >= 0
    if m == 0 or not valid.any():
        return np.full((q, 0), -1, dtype=np.int64), np.full((q, 0), np.nan)
    z = np.where(valid, scores / temperature, -np.inf)
    top = np.max(z, axis=1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        logp = z - top - np.log(np.sum(np.exp(z - top), axis=1, keepdims=True))  # [Q, M] log softmax
    log1m = np.zeros_like(logp)
    log1m[valid] = _log1mexp(logp[valid])  # padding contributes log(1) = 0

    # group-sum by (question, passage): sort the valid entries by question then pid
    rows = np.broadcast_to(np.arange(q)[:, None], (q, m))[valid]
    flat_pid, flat_val = pids[valid], log1m[valid]
    order = np.lexsort((flat_pid, rows))
    rows, flat_pid, flat_val = rows[order], flat_pid[order], flat_val[order]
    start = np.ones(len(rows), dtype=bool)
    start[1:] = (rows[1:] != rows[:-1]) | (flat_pid[1:] != flat_pid[:-1])
    first = np.flatnonzero(start)
    g_row, g_pid = rows[first], flat_pid[first]
    g_log = np.add.reduceat(flat_val, first)  # sum log(1 - p) per passage

    # rank inside each question: log sum ascending (HasAns descending), then smaller pid
    rank = np.lexsort((g_pid, g_log, g_row))
    g_row, g_pid, g_log = g_row[rank], g_pid[rank], g_log[rank]
    counts = np.bincount(g_row, minlength=q)
    k = int(min(top_passages, counts.max()))
    out_pid = np.full((q, k), -1, dtype=np.int64)
    out_score = np.full((q, k), np.nan)
    row_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pos = np.arange(len(g_row)) - row_start[g_row]  # position of each group inside its question
    keep = pos < k
    out_pid[g_row[keep], pos[keep]] = g_pid[keep]
    out_score[g_row[keep], pos[keep]] = -np.expm1(g_log[keep])
    return out_pid, out_score


def hasans_scores(sentence_scores, sentence_passage_ids, temperature: float = 1.0,
                  top_passages: int = 100) -> list[tuple[int, float]]:
    """One question's passages as ``[(passage_id, HasAns), ...]``, best first (at most
    ``top_passages``), from its retrieved sentences' scores ``[M]`` and passage ids ``[M]``
    (``-1``: padding). See :func:`hasans_topk`."""
    pids, values = hasans_topk(np.asarray(sentence_scores)[None, :], np.asarray(sentence_passage_ids)[None, :],
                               temperature, top_passages)
    return [(int(p), float(v)) for p, v in zip(pids[0], values[0]) if p >= 0]


def sentence_search_depth(k_passages: int, sentence_stats: str | None = None,
                          sentences_per_passage: float | None = None) -> int:
    """How many sentences DCSR retrieves for ``k_passages`` passages: ``ceil(k_passages * k)``
    with ``k`` given, or the corpus mean of the sentence-splitting stats file."""
    if sentences_per_passage is None:
        import json

        if sentence_stats is None:
            raise ValueError("give sentence_stats or sentences_per_passage")
        try:
            with open(sentence_stats, encoding="utf-8") as fh:
                sentences_per_passage = float(json.load(fh)["mean_sentences_per_passage"])
        except (OSError, ValueError, KeyError) as e:
            raise InputError(str(sentence_stats), f"cannot read mean_sentences_per_passage: {e}")
    return sentences_to_retrieve(k_passages, avg_sentences_per_passage=sentences_per_passage)


def all_sentence_hits(shard_npzs: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The exact top ``M`` sentences over all shards (``M`` = the per-shard depth) as
    ``(scores [Q, M], passage ids [Q, M])``, padding as pid -1 with score 0."""
    from dcsr.retrieval.index import load_shard_hits, merge_topk

    hits = load_shard_hits(shard_npzs)  # each read once, its checksum checked, searched in one place
    depth = max((int(i.shape[1]) for _, i in hits), default=0)
    scores, ids = merge_topk([s for s, _ in hits], [i for _, i in hits], depth)
    return np.where(ids >= 0, scores, 0.0), ids  # -inf padding is excluded through pid -1


def merge_sentence_hits(shard_npzs: Sequence[str], k_passages: int, temperature: float = 1.0):
    """DCSR retrieval from per-shard sentence hits (``scores`` / ``ids`` = passage ids, as
    :func:`dcsr.retrieval.index.search_shard` writes them): the exact top ``M`` sentences over all shards
    (``M`` = the per-shard depth), then :func:`hasans_topk`. Returns ``(hasans [Q, k], pids [Q, k])``
    in the layout of :func:`dcsr.retrieval.index.merge_shard_hits` (pid -1 / score -inf pad short rows)."""
    scores, ids = all_sentence_hits(shard_npzs)
    pids, hasans = hasans_topk(scores, ids, temperature, k_passages)
    warn_short_runs(ids, pids, k_passages)
    hasans = np.where(pids >= 0, hasans, -np.inf)
    return hasans, pids


def short_runs(sentence_ids: np.ndarray, pids: np.ndarray, k_passages: int) -> np.ndarray:
    """Questions whose top ``M`` sentences were all found (the corpus has more) yet name fewer
    than ``k_passages`` passages: the depth ``M`` (``dcsr.sentences_per_passage``) was too small
    for them, and top-k counts their missing ranks as misses. (Where the search found fewer than
    ``M`` sentences, the corpus itself ran out: no deeper search finds more.)"""
    full = (sentence_ids >= 0).all(axis=1)
    return np.flatnonzero(full & ((pids >= 0).sum(axis=1) < k_passages))


def warn_short_runs(sentence_ids: np.ndarray, pids: np.ndarray, k_passages: int) -> None:
    short = short_runs(sentence_ids, pids, k_passages)
    if len(short):
        found = (pids[short] >= 0).sum(axis=1)
        log.warning("%d of %d questions rank fewer than %d passages from their top %d sentences (as few as %d, "
                    "median %g): their missing ranks count as misses at top-k; raise dcsr.sentences_per_passage "
                    "(null: the corpus mean)", len(short), len(pids), k_passages, sentence_ids.shape[1],
                    int(found.min()), float(np.median(found)))


#: The temperatures :func:`choose_temperature` tries: powers of 2 around the paper's T = 1.
TEMPERATURE_GRID = tuple(2.0 ** e for e in range(-4, 7))


def choose_temperature(shard_npzs: Sequence[str], qas_path: str, corpus: str, ks: Sequence[int] = DEFAULT_KS,
                       match_type: str = "string", grid: Sequence[float] = TEMPERATURE_GRID,
                       k_passages: int = 100) -> dict:
    """The HasAns temperature that ranks a set of *dev* questions best, from their sentence hits.

    For every ``T`` of ``grid``, the passages are ranked by HasAns at ``T``
    (:func:`merge_sentence_hits`) and scored by DPR's top-k answer recall; the criterion is
    the mean over ``ks``, ties going to the ``T`` closest to 1 (the paper's setting, on a log
    scale). Answer matching is done once per retrieved (question, passage). Returns
    ``{"temperature", "criterion", "grid": {T: {"top1": ..., ..., "mean": ...}}, "questions"}``.
    """
    from dcsr.data.formats import iter_qas
    from dcsr.evaluation.dev_grid import answer_oracle, grid_search

    qas = list(iter_qas(qas_path))
    scores, ids = all_sentence_hits(shard_npzs)
    if len(ids) != len(qas):
        raise InputError(str(shard_npzs[0]), f"holds hits of {len(ids)} questions, {qas_path} has {len(qas)}")
    answered = answer_oracle(qas, corpus, np.unique(ids), match_type)

    def ranking(t):
        pids, _ = hasans_topk(scores, ids, t, k_passages)
        return [[int(p) for p in row if p >= 0] for row in pids]

    return grid_search(grid, ranking, answered, ks, lambda t: abs(math.log2(t)), "temperature", len(qas))
