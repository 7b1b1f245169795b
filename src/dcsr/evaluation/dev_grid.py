"""One search over a grid of values on dev questions, for every value the pipeline chooses on
dev: DCSR's HasAns temperature (dcsr.retrieval.hasans.choose_temperature) and linear fusion's
dense weight (dcsr.retrieval.fusion.choose_weight). Each value of the grid ranks the dev
questions' passages; the rankings are scored by DPR's top-k answer recall, each (question,
passage) matched once; the criterion is the mean over ``ks``, and a tie goes to the value
closest to the method's own default."""

from __future__ import annotations

from typing import Callable, Sequence

from dcsr.evaluation.metrics import first_hit_ranks, topk_recall

Answered = Callable[[int, int], bool]


def answer_oracle(qas, corpus, pids, match_type: str = "string") -> Answered:
    """``answered(q, pid)``: whether passage ``pid`` holds one of question ``q``'s answers (DPR's
    matching), the passages ``pids`` read once from ``corpus`` (TSV or passage store) and each
    pair matched once."""
    from dcsr.data.answers import PassageMatcher
    from dcsr.data.passage_store import load_passages

    texts = load_passages(corpus, {int(p) for p in pids if int(p) >= 0})
    matcher = PassageMatcher(match_type)
    cache: dict[tuple[int, int], bool] = {}

    def answered(q: int, pid: int) -> bool:
        if (q, pid) not in cache:
            cache[q, pid] = matcher(qas[q].answers, pid, texts[pid].text)
        return cache[q, pid]

    return answered


def grid_search(grid: Sequence[float], ranking: Callable[[float], Sequence[Sequence[int]]], answered: Answered,
                ks: Sequence[int], distance: Callable[[float], float], name: str, questions: int) -> dict:
    """The value of ``grid`` whose ``ranking(value)`` (question i's passage ids, best first)
    answers the dev questions best. Returns ``{name: best, "criterion", "questions", "grid":
    {value: {"top1": ..., ..., "mean": ...}}}``; ties go to the smallest ``distance(value)``."""
    results = {}
    for value in grid:
        flags = [[answered(q, int(pid)) for pid in row[: max(ks)]] for q, row in enumerate(ranking(value))]
        recall = topk_recall(first_hit_ranks(flags), ks)
        results[value] = {**recall, "mean": sum(recall.values()) / len(recall)}
    best = max(grid, key=lambda v: (round(results[v]["mean"], 9), -distance(v)))
    return {name: best, "criterion": f"mean of top-{'/'.join(str(k) for k in ks)} answer recall on "
                                     f"{questions} dev questions",
            "questions": questions, "grid": {f"{v:g}": r for v, r in results.items()}}
