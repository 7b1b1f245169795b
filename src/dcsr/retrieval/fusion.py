"""Hybrid retrieval: BM25 fused with a dense retriever, as DPR's Table 2 ("BM25 + DPR").

Two fusions of two TREC runs (:mod:`dcsr.data.runs`) of the same questions:

- **linear** (:func:`linear_fusion`): each run's scores are min-max normalized per question to
  [0, 1]; a passage that one run did not retrieve gets 0 there (the bottom of that run's list);
  the fused score is ``weight * dense + (1 - weight) * bm25``. DPR reranks the union of both
  top-2000 lists by ``BM25 + 1.1 * sim`` with both scores computed for every passage; from the
  two top-k runs alone the missing scores are unknown, so the scores are normalized and a
  missing one counts as the list's floor, as Pyserini's hybrid searcher does. The weight is
  chosen on the dev questions (:func:`choose_weight`), never on the test questions.
- **rrf** (:func:`reciprocal_rank_fusion`): ``sum 1 / (k + rank)`` over the runs (Cormack et
  al. 2009, k = 60); no weight, nothing to choose.

Ties are broken by passage id, so a fused run is the same on every machine.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from dcsr.errors import InputError

Hits = Sequence[tuple[int, float]]  # (passage id, score), best first

#: The dense weights :func:`choose_weight` tries (0: BM25's ranking, 1: the dense one; at either end
#: a passage only the other run found scores 0, as BM25's or the dense run's last does, and the
#: smaller passage id goes first, so the last places may differ from that run's own).
WEIGHT_GRID = tuple(round(0.1 * i, 1) for i in range(11))
#: Reciprocal rank fusion's constant (Cormack, Clarke and Buettcher 2009).
RRF_K = 60
FUSIONS = ("linear", "rrf")


def _normalized(hits: Hits) -> dict[int, float]:
    """``{pid: (score - min) / (max - min)}``; all 1 when every score is the same."""
    if not hits:
        return {}
    scores = [s for _, s in hits]
    low, high = min(scores), max(scores)
    span = high - low
    return {pid: (s - low) / span if span > 0 else 1.0 for pid, s in hits}


def _ranked(scores: Mapping[int, float], k: int) -> list[tuple[int, float]]:
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def linear_fusion(bm25: Hits, dense: Hits, weight: float, k: int = 100) -> list[tuple[int, float]]:
    """The top ``k`` of one question's two hit lists by ``weight * dense + (1 - weight) * bm25``
    of min-max normalized scores (0 for a passage a list lacks)."""
    if not 0.0 <= weight <= 1.0:
        raise InputError("fusion weight", f"must be in [0, 1], found {weight}")
    b, d = _normalized(bm25), _normalized(dense)
    fused = {pid: weight * d.get(pid, 0.0) + (1.0 - weight) * b.get(pid, 0.0) for pid in b.keys() | d.keys()}
    return _ranked(fused, k)


def reciprocal_rank_fusion(runs: Sequence[Hits], k: int = 100, rrf_k: int = RRF_K) -> list[tuple[int, float]]:
    """The top ``k`` of one question's hit lists by ``sum 1 / (rrf_k + rank)`` (ranks from 1)."""
    fused: dict[int, float] = {}
    for hits in runs:
        for rank, (pid, _) in enumerate(hits, start=1):
            fused[pid] = fused.get(pid, 0.0) + 1.0 / (rrf_k + rank)
    return _ranked(fused, k)


def fuse_runs(bm25: Mapping[int, Hits], dense: Mapping[int, Hits], fusion: str, weight: float | None = None,
              k: int = 100) -> dict[int, list[tuple[int, float]]]:
    """Fuse two runs (``{qid: hits}``) of the same questions; ``weight`` for ``linear``."""
    if set(bm25) != set(dense):
        only = sorted(set(bm25) ^ set(dense))
        raise InputError("fusion", f"the two runs have different questions (e.g. question {only[0]}); "
                                   "were they made for the same question file?")
    if fusion == "linear":
        if weight is None:
            raise InputError("fusion", "linear fusion needs a weight")
        return {q: linear_fusion(bm25[q], dense[q], weight, k) for q in bm25}
    if fusion == "rrf":
        return {q: reciprocal_rank_fusion([bm25[q], dense[q]], k) for q in bm25}
    raise InputError("fusion", f"unknown fusion {fusion!r} (one of {', '.join(FUSIONS)})")


def choose_weight(bm25: Mapping[int, Hits], dense: Mapping[int, Hits], answered, ks: Sequence[int],
                  grid: Sequence[float] = WEIGHT_GRID) -> dict:
    """The dense weight of linear fusion that ranks a set of *dev* questions best.

    ``answered(qid, pid)`` says whether a passage holds one of the question's answers (DPR's
    matching). For every weight of ``grid`` the two runs are fused and scored by top-k answer
    recall; the criterion is the mean over ``ks``, ties going to the weight closest to 0.5.
    Returns ``{"weight", "criterion", "questions", "grid": {weight: {"top1": ..., "mean": ...}}}``."""
    from dcsr.evaluation.dev_grid import grid_search

    def ranking(w):
        fused = fuse_runs(bm25, dense, "linear", w, max(ks))
        return [[pid for pid, _ in fused[q]] for q in sorted(fused)]

    return grid_search(grid, ranking, answered, ks, lambda w: abs(w - 0.5), "weight", len(bm25))


def choose_weight_of_runs(bm25_trec: str, dense_trec: str, qas_path: str, corpus: str, ks: Sequence[int],
                          match_type: str = "string", grid: Sequence[float] = WEIGHT_GRID) -> dict:
    """:func:`choose_weight` for two TREC runs of the dev questions in ``qas_path``; answers are
    matched once per retrieved (question, passage), in passages read from ``corpus`` (the TSV
    or its passage store)."""
    from dcsr.data.formats import iter_qas
    from dcsr.data.runs import read_trec
    from dcsr.evaluation.dev_grid import answer_oracle

    qas = list(iter_qas(qas_path))
    bm25, dense = read_trec(bm25_trec), read_trec(dense_trec)
    for path, run in ((bm25_trec, bm25), (dense_trec, dense)):
        if set(run) != set(range(len(qas))):
            raise InputError(str(path), f"does not list the {len(qas)} questions of {qas_path}")
    answered = answer_oracle(qas, corpus, {pid for run in (bm25, dense) for hits in run.values() for pid, _ in hits},
                             match_type)
    return choose_weight(bm25, dense, answered, ks, grid)
