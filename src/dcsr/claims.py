"""The claims ledger: each claim of the papers that a config can test, against this run.

A claim compares two retrievers on one test set at one metric and expects the second
(``method``) to beat the first (``baseline``). Both are scored on the same questions, so the
comparison is paired: the difference of top-k answer recall (points), a 95% bootstrap
interval over questions (``scipy.stats.bootstrap``, paired, percentile, seeded), and the exact
sign test on the questions only one of them answers (McNemar's exact test,
``scipy.stats.binomtest``). The verdict: **holds** when the interval lies above 0 and
p < 0.05; **does not hold** when it lies below 0 and p < 0.05 (the opposite is significant);
else **inconclusive at this scale**.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import InputError, at
from .fsutil import atomic_open

ALPHA = 0.05
RESAMPLES = 10000


def hits_at(questions_jsonl: str | os.PathLike, k: int) -> dict[int, bool]:
    """``{qid: answered within the top k}`` of a run's per-question results."""
    out = {}
    with open(questions_jsonl, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                first = rec["first_hit"]
                out[int(rec["qid"])] = first is not None and int(first) <= k
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(at(questions_jsonl, n), f"not a per-question result ({e})")
    return out


@dataclass(frozen=True)
class Comparison:
    questions: int
    baseline: float  # top-k, %
    method: float
    difference: float  # method - baseline, points
    low: float  # 95% bootstrap interval of the difference
    high: float
    only_baseline: int
    only_method: int
    p_value: float

    @property
    def verdict(self) -> str:
        if self.low > 0 and self.p_value < ALPHA:
            return "holds"
        if self.high < 0 and self.p_value < ALPHA:
            return "does not hold"
        return "inconclusive at this scale"


def compare_paired(baseline: Sequence[bool], method: Sequence[bool], seed: int = 0) -> Comparison:
    """The paired comparison of two 0/1 outcome vectors over the same questions."""
    from scipy import stats

    a = np.asarray(baseline, dtype=float)
    b = np.asarray(method, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("two outcome vectors of the same non-zero length are needed")
    diff = b - a
    if np.all(diff == diff[0]):  # no spread to resample: the interval is the point
        low = high = 100 * float(diff[0])
    else:
        res = stats.bootstrap((diff,), np.mean, n_resamples=RESAMPLES, confidence_level=0.95,
                              method="percentile", rng=np.random.default_rng(seed))
        low, high = 100 * float(res.confidence_interval.low), 100 * float(res.confidence_interval.high)
    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    p = float(stats.binomtest(only_b, only_a + only_b, 0.5).pvalue) if only_a + only_b else 1.0
    return Comparison(len(a), 100 * float(a.mean()), 100 * float(b.mean()), 100 * float(diff.mean()),
                      low, high, only_a, only_b, p)


def compare_runs(baseline_jsonl, method_jsonl, k: int, seed: int = 0) -> Comparison:
    a, b = hits_at(baseline_jsonl, k), hits_at(method_jsonl, k)
    if a.keys() != b.keys():
        raise InputError(str(method_jsonl), f"answers other questions than {baseline_jsonl} "
                                            f"({len(b)} against {len(a)}): the two runs are not paired")
    qids = sorted(a)
    return compare_paired([a[q] for q in qids], [b[q] for q in qids], seed)


FIELDS = ["claim", "paper", "test_set", "metric", "baseline", "method", "questions", "baseline_value",
          "method_value", "difference", "ci_low", "ci_high", "only_baseline", "only_method", "p_value", "seeds",
          "verdict"]


def ledger_rows(claims: Sequence[Mapping[str, Any]], seed: int = 0) -> list[dict]:
    """One row per claim: ``claims`` items carry ``claim``, ``paper``, ``test_set``, ``metric``
    (``top20``), ``baseline``/``method`` labels and ``baseline_run``/``method_run`` (the runs'
    per-question results)."""
    rows = []
    for c in claims:
        k = int(str(c["metric"]).removeprefix("top"))
        r = compare_runs(c["baseline_run"], c["method_run"], k, seed)
        rows.append({
            "claim": c["claim"], "paper": c.get("paper", ""), "test_set": c["test_set"], "metric": c["metric"],
            "baseline": c["baseline"], "method": c["method"], "questions": r.questions,
            "baseline_value": round(r.baseline, 2), "method_value": round(r.method, 2),
            "difference": round(r.difference, 2), "ci_low": round(r.low, 2), "ci_high": round(r.high, 2),
            "only_baseline": r.only_baseline, "only_method": r.only_method, "p_value": float(f"{r.p_value:.3g}"),
            "seeds": 1, "verdict": r.verdict,
        })
    return rows


def write_ledger(rows: Sequence[Mapping[str, Any]], csv_path, md_path, title: str = "Claims ledger") -> None:
    with atomic_open(csv_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    lines = [f"# {title}", "",
             "Each claim expects the second retriever to beat the first on the same questions. Ours: the "
             "difference of top-k answer recall (points) with a paired 95% bootstrap interval over questions "
             f"({RESAMPLES} resamples) and the exact sign test on the questions only one of them answers "
             "(p). Verdict: holds (interval above 0, p < 0.05), does not hold (below 0, p < 0.05), else "
             "inconclusive at this scale. One training seed per model.", "",
             "| claim | paper | test set | metric | first | second | questions | first / second | "
             "difference [95% CI] | only first / only second | p | seeds | verdict |",
             "|---|---|---|---|---|---|---:|---|---|---|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['claim']} | {r['paper']} | {r['test_set']} | {r['metric']} | {r['baseline']} | "
                     f"{r['method']} | {r['questions']} | {r['baseline_value']:.1f} / {r['method_value']:.1f} | "
                     f"{r['difference']:+.1f} [{r['ci_low']:+.1f}, {r['ci_high']:+.1f}] | "
                     f"{r['only_baseline']} / {r['only_method']} | {r['p_value']:.3g} | {r['seeds']} | "
                     f"**{r['verdict']}** |")
    with atomic_open(md_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
