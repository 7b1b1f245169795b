"""The claims ledger: each claim of the papers that a config can test, against this run.

A claim compares two retrievers on one test set at one metric and expects the second
(``method``) to beat the first (``baseline``). Both are scored on the same questions, so the
comparison is paired: the difference of top-k answer recall (points), a 95% bootstrap
interval over questions (``scipy.stats.bootstrap``, paired, percentile, seeded), and the exact
sign test on the questions only one of them answers (McNemar's exact test,
``scipy.stats.binomtest``). A model trained with several seeds (``seeds: n``) is compared seed
k against seed k (a side with one run is repeated), and the statistics include the seeds'
variation, not only the questions': seeds and questions are crossed (every seed answers the same
questions), and a two-way analysis of variance gives the standard error of the mean difference
over both, with Satterthwaite's degrees of freedom (:func:`seed_variance`); the interval and
p-value are that t test's, so three seeds that differ among themselves get a t quantile with
about 2 degrees of freedom, as they should. A claim whose seeds' differences disagree in sign is
not held (:data:`SEEDS_DISAGREE`). The difference of every seed's pair is reported beside it.

Each claim is tested at the paper's k (``metric``, the headline) and, when the config names it,
at the k whose share of our corpus matches the paper's share of its 21M passages
(``scaled_metric``: k x N / 21M, at least 1). Every test of one ledger is one family: their
p-values are adjusted together with Holm's step-down method (``statsmodels``), and the verdict
reads the adjusted p: **holds** when the interval lies above 0 and the adjusted p < 0.05;
**does not hold** when it lies below 0 and the adjusted p < 0.05 (the opposite is
significant); else **inconclusive at this scale**, with the power figures of
:mod:`dcsr.evaluation.power`: the smallest difference these questions detect, and at least how
many questions the paper's difference (``paper_difference``) would need, both at 80% power and
at the strictest level of Holm's steps (0.05 / tests). Those assume 0/1 outcomes (Connor's
formula); with seeds the detectable difference comes from the t test's standard error and
degrees of freedom instead, and no count of questions is printed (more questions do not shrink
the seeds' part of it).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from dcsr.errors import InputError
from dcsr.evaluation.power import POWER, detectable_difference, questions_needed
from dcsr.evaluation.question_results import read_question_results
from dcsr.evaluation.tables import md_cell, md_line
from dcsr.fsutil import atomic_open

ALPHA = 0.05
RESAMPLES = 10000
#: passages of DPR's Wikipedia corpus (psgs_w100.tsv), the papers' scale
PAPER_PASSAGES = 21_015_324


def scaled_k(k: int, passages: int) -> int:
    """The k whose share of a corpus of ``passages`` matches k's share of the papers' 21M:
    k x passages / 21,015,324, rounded to the nearest whole k (an exact half to the even
    one, as Python's ``round``), and at least 1."""
    return max(1, round(k * passages / PAPER_PASSAGES))


def check_scaled_metric(claim: Mapping[str, Any], passages: int, where: str) -> str:
    """The claim's scaled metric as computed for a corpus of ``passages`` (``top<k>``); a
    ``scaled_metric`` the config names must be it (``auto``: take it)."""
    k = int(str(claim["metric"]).removeprefix("top"))
    computed = f"top{scaled_k(k, passages)}"
    named = claim.get("scaled_metric")
    if named not in (None, "auto", computed):
        raise InputError(where, f"is {named}, but {claim['metric']} scaled to this corpus is {computed} "
                         f"({k} x {passages:,} passages / {PAPER_PASSAGES:,}, rounded, at least 1); "
                         f"write {computed} or auto")
    return computed


def hits_at(questions_jsonl: str | os.PathLike, k: int) -> dict[int, bool]:
    """``{qid: answered within the top k}`` of a run's per-question results."""
    return read_question_results(questions_jsonl, lambda rec: rec["first_hit"] is not None and int(rec["first_hit"]) <= k)


@dataclass(frozen=True)
class Comparison:
    questions: int
    baseline: float  # top-k, %
    method: float
    difference: float  # method - baseline, points
    low: float  # 95% interval of the difference (paired bootstrap; with seeds: t)
    high: float
    only_baseline: int
    only_method: int
    p_value: float
    seeds: int = 1  # seed pairs compared: above 1, the interval and p include the seeds' variation
    spread: float | None = None  # with seeds: the standard error of the difference over seeds and questions, points
    df: float | None = None  # with seeds: the t test's degrees of freedom (Satterthwaite's)

    @property
    def verdict(self) -> str:
        """The verdict on this comparison alone (unadjusted p)."""
        return verdict(self.low, self.high, self.p_value)

    @property
    def discordant(self) -> float:
        """The share of questions one side answers and the other does not (by mean outcome)."""
        return (self.only_baseline + self.only_method) / self.questions


INCONCLUSIVE = "inconclusive at this scale"
#: the verdict of a claim whose seeds' differences point both ways, whatever the interval says
SEEDS_DISAGREE = "inconclusive: the seeds disagree in sign"


def verdict(low: float, high: float, p: float) -> str:
    """holds / does not hold / inconclusive at this scale, from the interval and a p-value."""
    if low > 0 and p < ALPHA:
        return "holds"
    if high < 0 and p < ALPHA:
        return "does not hold"
    return INCONCLUSIVE


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of one family of tests (``statsmodels``)."""
    if not p_values:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(p_values), alpha=ALPHA, method="holm")[1]]


def compare_paired(baseline: Sequence[bool], method: Sequence[bool], seed: int = 0) -> Comparison:
    """The paired comparison of two outcome vectors over the same questions: 0/1 per question,
    or a question's mean over several training runs. The sign test counts the questions on
    which each side does better."""
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
    only_a, only_b = int(np.sum(diff < 0)), int(np.sum(diff > 0))
    p = float(stats.binomtest(only_b, only_a + only_b, 0.5).pvalue) if only_a + only_b else 1.0
    return Comparison(len(a), 100 * float(a.mean()), 100 * float(b.mean()), 100 * float(diff.mean()),
                      low, high, only_a, only_b, p)


def _outcomes(runs: Sequence[str | os.PathLike], k: int, first) -> tuple[list[int], np.ndarray]:
    """``(qids, [runs, questions] 0/1)`` of one side's runs, all over the same questions."""
    per_run = [hits_at(r, k) for r in runs]
    for r, h in zip(runs, per_run):
        if h.keys() != per_run[0].keys():
            raise InputError(str(r), f"answers other questions than {first} ({len(h)} against "
                                     f"{len(per_run[0])}): the runs are not paired")
    qids = sorted(per_run[0])
    return qids, np.array([[h[q] for q in qids] for h in per_run], dtype=float)


def paired_outcomes(baseline_jsonl, method_jsonl, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``([baseline runs, questions], [method runs, questions])`` 0/1 at top-``k``, from one
    run or a list of runs (training seeds) per side, all over the same questions."""
    base = [baseline_jsonl] if isinstance(baseline_jsonl, (str, os.PathLike)) else list(baseline_jsonl)
    meth = [method_jsonl] if isinstance(method_jsonl, (str, os.PathLike)) else list(method_jsonl)
    qa, a = _outcomes(base, k, base[0])
    qb, b = _outcomes(meth, k, base[0])
    if qa != qb:
        raise InputError(str(meth[0]), f"answers other questions than {base[0]} "
                                       f"({len(qb)} against {len(qa)}): the two runs are not paired")
    return a, b


def seed_pairs(baseline: np.ndarray, method: np.ndarray) -> np.ndarray:
    """``[seed pairs, questions]`` differences (method - baseline, as proportions) of seed k
    against seed k, from :func:`paired_outcomes`' ``[runs, questions]`` outcomes (a side with
    one run is repeated)."""
    n = max(len(baseline), len(method))
    if min(len(baseline), len(method)) not in (1, n):
        raise ValueError(f"{len(baseline)} baseline runs against {len(method)} method runs: seed k is paired with "
                         "seed k, so both sides need the same number of runs (or one)")
    return np.stack([method[i if len(method) > 1 else 0] - baseline[i if len(baseline) > 1 else 0] for i in range(n)])


def seed_variance(pairs: np.ndarray) -> tuple[float, float, float]:
    """``(mean difference, its standard error, degrees of freedom)`` of ``[seed pairs R,
    questions n]`` differences, the questions crossed with the seeds (every seed pair answers the
    same questions).

    Two-way analysis of variance, seeds x questions (Searle, Casella & McCulloch, *Variance
    Components*, 1992, ch. 4): the mean squares of seeds (``MS_s``, R - 1 degrees of freedom), of
    questions (``MS_q``, n - 1) and of their interaction (``MS_e``, (R - 1)(n - 1)) give the
    variance of the mean over both, ``sigma_s^2 / R + sigma_q^2 / n + sigma_e^2 / (R n)``, as
    ``(MS_s - MS_e + MS_q) / (R n)``, with the seeds' component ``MS_s - MS_e`` cut at 0 (then
    it is ``MS_q / (R n)``: the questions alone, or ``MS_e / (R n)`` where ``MS_q`` is 0 and the
    seed pairs still disagree question by question); its degrees of freedom are Satterthwaite's
    (1946). With few seeds and a real seed-to-seed spread that is near R - 1, so a t quantile
    widens the interval as three seeds warrant; with a negligible one it is near n - 1. A
    bootstrap over 3 seed pairs, which this replaces, cannot do that: on simulated null
    comparisons (3 seeds, 2,000 questions, seeds' sd 5 points) it found a difference in 18-20% of
    them at the 5% level, this test in 6.2% (benchmarks/claims-statistics; with 2 seeds 10-12.5%)."""
    d = np.asarray(pairs, dtype=float)
    runs, n = d.shape
    by_seed, by_question, mean = d.mean(axis=1), d.mean(axis=0), float(d.mean())
    cells = runs * n
    ms_s = n * float(np.sum((by_seed - mean) ** 2)) / (runs - 1)
    ms_q = runs * float(np.sum((by_question - mean) ** 2)) / (n - 1) if n > 1 else 0.0
    resid = d - by_seed[:, None] - by_question[None, :] + mean
    ms_e = float(np.sum(resid ** 2)) / ((runs - 1) * (n - 1)) if n > 1 else 0.0
    terms = [(ms_q / cells, n - 1)]  # (coefficient x mean square, its degrees of freedom)
    if ms_s > ms_e:
        terms += [(ms_s / cells, runs - 1), (-ms_e / cells, (runs - 1) * (n - 1))]
    var = sum(t for t, _ in terms)
    if var <= 0 < ms_e:
        # every question's mean difference the same (MS_q = 0) while the seed pairs disagree
        # question by question: the interaction alone is the spread, not none at all
        return mean, (ms_e / cells) ** 0.5, float((runs - 1) * (n - 1))
    if var <= 0:
        return mean, 0.0, float("inf")
    df = var ** 2 / sum(t * t / f for t, f in terms if f > 0)
    return mean, var ** 0.5, df


def compare_seeded(baseline: np.ndarray, method: np.ndarray, seed: int = 0) -> Comparison:
    """The paired comparison of several training runs of each side (``[runs, questions]``
    outcomes), seed k against seed k: the mean difference, its 95% t interval and two-sided
    p-value over seeds and questions (:func:`seed_variance`: Satterthwaite's degrees of
    freedom), and the sign counts of the questions' mean outcomes. One run a side is
    :func:`compare_paired`; so is a difference with no spread at all (every seed and question
    the same), whose sign test is then exact."""
    from scipy import stats

    baseline, method = np.atleast_2d(baseline).astype(float), np.atleast_2d(method).astype(float)
    pairs = seed_pairs(baseline, method)
    if len(pairs) == 1:
        return compare_paired(baseline[0], method[0], seed)
    a, b = baseline.mean(axis=0), method.mean(axis=0)
    mean, se, df = seed_variance(pairs)
    if se == 0:
        return replace(compare_paired(a, b, seed), difference=100 * mean, seeds=len(pairs), spread=0.0, df=df)
    half = float(stats.t.ppf(0.975, df)) * se
    p = float(min(1.0, 2 * stats.t.sf(abs(mean) / se, df)))
    diff = b - a
    return Comparison(len(a), 100 * float(a.mean()), 100 * float(b.mean()), 100 * mean,
                      100 * (mean - half), 100 * (mean + half), int(np.sum(diff < 0)), int(np.sum(diff > 0)), p,
                      seeds=len(pairs), spread=100 * se, df=df)


def compare_runs(baseline_jsonl, method_jsonl, k: int, seed: int = 0) -> Comparison:
    """One run against one run; or, given lists, several training runs of each side (seed k of
    one side against seed k of the other; a side with one run is repeated): :func:`compare_seeded`."""
    a, b = paired_outcomes(baseline_jsonl, method_jsonl, k)
    return compare_seeded(a, b, seed)


def seed_differences(baseline: np.ndarray, method: np.ndarray) -> list[float]:
    """The difference (points) of seed k's pair for every k, from :func:`paired_outcomes`'
    ``[runs, questions]`` outcomes (a side with one run is repeated)."""
    return [100 * float(d.mean()) for d in seed_pairs(baseline, method)]


#: Seeds a claim should rest on; with fewer, the ledger prints the claim's ``seeds_note`` (why).
MIN_SEEDS = 3

FIELDS = ["claim", "paper", "test_set", "depth", "metric", "baseline", "method", "questions", "baseline_value",
          "method_value", "difference", "ci_low", "ci_high", "only_baseline", "only_method", "p_value", "p_holm",
          "seeds", "seed_differences", "seed_sd", "seeds_note", "verdict", "detectable", "paper_difference", "questions_needed"]
#: the ledger CSV's values in points, written to 2 decimals (those whose sign matters: more where 2
#: decimals would read 0, :func:`points_text`)
ROUNDED = ("baseline_value", "method_value", "difference", "ci_low", "ci_high", "seed_sd", "detectable")
SIGNED = ("difference", "ci_low", "ci_high")


def ledger_rows(claims: Sequence[Mapping[str, Any]], seed: int = 0) -> list[dict]:
    """One row per claim and depth: ``claims`` items carry ``claim``, ``paper``, ``test_set``,
    ``metric`` (the paper's k: ``top20``), optionally ``scaled_metric`` (the k scaled to the
    corpus: ``top1``) and ``paper_difference`` (the paper's method - baseline, points),
    ``baseline``/``method`` labels and ``baseline_runs``/``method_runs`` (the per-question
    results of each training seed's run; ``baseline_run``/``method_run`` for one), and
    ``seeds_note``: why it rests on fewer than :data:`MIN_SEEDS` seeds, printed where it does. The p-values
    of all rows are Holm-adjusted together, and the verdicts read the adjusted ones."""
    rows = []
    for i, c in enumerate(claims):
        scaled = c.get("scaled_metric")
        if scaled and c.get("corpus_passages") is not None:  # the corpus's size, known once its store is made
            scaled = check_scaled_metric(c, int(c["corpus_passages"]), f"config: claims.{i}.scaled_metric")
        elif scaled == "auto":
            raise InputError(f"config: claims.{i}.scaled_metric", "auto needs the corpus's size (corpus_passages)")
        scaled_depth = "scaled k"
        if c.get("corpus_passages") is not None:
            scaled_depth += f" ({c['metric']} x {int(c['corpus_passages']):,} / {PAPER_PASSAGES:,})"
        # a corpus of about the papers' size scales k to the paper's own: one row, not two
        same_k = scaled and int(str(scaled)[3:]) == int(str(c["metric"])[3:])
        depths = [("paper k", c["metric"])] + ([(scaled_depth, scaled)] if scaled and not same_k else [])
        for depth, metric in depths:
            rows.append(_ledger_row(c, depth, metric, seed))
    # Holm's family is the distinct tests: rows that are one test (the same two sides' runs, either
    # way round, on one test set at one k: two claims alike, one's scaled k another's paper k) count once
    p_of = {}
    for r in rows:
        p_of.setdefault(r["_test"], r["_p"])
    adjusted_of = dict(zip(p_of, holm(list(p_of.values()))))
    alpha = ALPHA / max(len(p_of), 1)  # Holm's strictest step
    for row, adjusted in zip(rows, [adjusted_of[r["_test"]] for r in rows]):
        row.pop("_p")
        discordant = row.pop("_discordant")
        row["p_holm"] = float(p_text(adjusted))
        spread, df, diffs = row.pop("_spread"), row.pop("_df"), row.pop("_seed_differences")
        row["verdict"] = verdict(row["ci_low"], row["ci_high"], adjusted)
        if min(diffs) < 0 < max(diffs):  # one seed says the method wins, another that it loses
            row["verdict"] = SEEDS_DISAGREE
        if row["verdict"] != INCONCLUSIVE:
            continue
        if spread:  # seeds: their t test's standard error and degrees of freedom, not Connor's 0/1 formula
            row["detectable"] = detectable_with_seeds(spread, df, alpha)
            continue
        # one seed, or seeds without any spread (then the comparison is the exact sign test's)
        row["_power"] = "sign test"
        # 80% power: what these questions see, and at least how many the paper's difference needs
        found = detectable_difference(row["questions"], discordant, alpha)
        row["detectable"] = 100 * found if found is not None else ""
        if row["paper_difference"] not in ("", 0.0):
            row["questions_needed"] = questions_needed(row["paper_difference"] / 100, discordant, alpha)
    return rows


def p_text(p: float, digits: int = 3) -> str:
    """``p`` to ``digits`` significant figures, or more where those would put it on the other side
    of the 0.05 the verdicts read (``ALPHA``) than ``p`` is: 0.0499832 is written 0.04998, not 0.05
    beside a verdict that needed p < 0.05."""
    for d in range(digits, 18):
        text = f"{p:.{d}g}"
        if (float(text) < ALPHA) == (p < ALPHA):
            return text
    return repr(p)


def points_text(v: float, decimals: int = 1, sign: bool = True) -> str:
    """``v`` (points) to ``decimals`` decimals, or more where those would read 0 or the other sign
    of a ``v`` that is not 0: an interval's bound decides a verdict by its sign (a lower bound of
    0.033 is written +0.03, not +0.0 beside "holds")."""
    for d in range(decimals, 12):
        text = f"{v:{'+' if sign else ''}.{d}f}"
        if v == 0 or (float(text) != 0 and (float(text) > 0) == (v > 0)):
            return text
    return f"{v:{'+' if sign else ''}g}"


def detectable_with_seeds(se: float, df: float, alpha: float, power: float = POWER) -> float:
    """The smallest difference (points) the seeded t test of :func:`compare_seeded` finds with
    ``power`` at level ``alpha`` (two-sided), from its standard error (points) and degrees of
    freedom: ``(t(1 - alpha / 2) + t(power)) x se``."""
    from scipy import stats

    return float(stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se


def _ledger_row(c: Mapping[str, Any], depth: str, metric: str, seed: int) -> dict:
    k = int(str(metric).removeprefix("top"))
    base = list(c.get("baseline_runs") or [c["baseline_run"]])
    meth = list(c.get("method_runs") or [c["method_run"]])
    a, b = paired_outcomes(base, meth, k)
    r = compare_seeded(a, b, seed)
    diffs = seed_differences(a, b)
    paper = c.get("paper_difference")
    return {
        "claim": c["claim"], "paper": c.get("paper", ""), "test_set": c["test_set"], "depth": depth,
        "metric": metric, "baseline": c["baseline"], "method": c["method"], "questions": r.questions,
        # raw values: the CSV writes them to 2 decimals and the Markdown to 1, each from these
        # (rounding a rounded value twice can land on the other side: 71.3507 -> 71.35 -> 71.3)
        "baseline_value": r.baseline, "method_value": r.method,
        "difference": r.difference, "ci_low": r.low, "ci_high": r.high,
        "only_baseline": r.only_baseline, "only_method": r.only_method, "p_value": float(p_text(r.p_value)),
        "p_holm": "", "seeds": len(diffs), "seed_differences": " / ".join(f"{d:+.1f}" for d in diffs),
        "seed_sd": float(np.std(diffs, ddof=1)) if len(diffs) > 1 else "",
        "seeds_note": c.get("seeds_note", "") if len(diffs) < MIN_SEEDS else "",
        "verdict": "", "detectable": "", "paper_difference": float(paper) if paper is not None else "",
        "questions_needed": "",
        # unrounded, for Holm, the power figures and the seeds' signs
        "_p": r.p_value, "_discordant": r.discordant, "_spread": r.spread, "_df": r.df,
        "_seed_differences": diffs,
        # what makes two rows one test (Holm counts it once)
        "_test": (tuple(sorted((tuple(map(str, base)), tuple(map(str, meth))))), c["test_set"], k),
    }


def write_ledger(rows: Sequence[Mapping[str, Any]], csv_path, md_path, title: str = "Claims ledger",
                 notes: Sequence[str] = ()) -> None:
    with atomic_open(csv_path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows({k: (float(points_text(v, 2, sign=False)) if k in SIGNED else round(v, 2))
                     if k in ROUNDED and isinstance(v, float) else v
                     for k, v in r.items() if not k.startswith("_")} for r in rows)  # not the private _power
    tests = len({r["_test"] for r in rows}) if all("_test" in r for r in rows) else len(rows)
    lines = [f"# {md_line(title)}", "",
             "Each claim expects the second retriever to beat the first on the same questions. Ours: the "
             "difference of top-k answer recall (points) with a paired 95% bootstrap interval over questions "
             f"({RESAMPLES} resamples) and the exact two-sided sign test on the questions only one of them answers "
             "(p; a verdict also needs the interval on one side of 0). Each claim is tested at the paper's k (the headline) and at the k whose share of this "
             "corpus matches the paper's share of its 21M passages (scaled k). The "
             f"{tests} tests are one family" + (" (rows that are one test, the same runs on the same questions at "
                                                "the same k, count once)" if tests < len(rows) else "")
             + ": their p-values are Holm-adjusted together. Verdict, from the adjusted "
             "p: holds (interval above 0, p < 0.05), does not hold (below 0, p < 0.05), else inconclusive at "
             "this scale, with its power at 80% and Holm's strictest level (0.05 / tests): the smallest "
             "difference these questions detect, and at least how many questions the paper's difference would "
             "need. A model trained with several seeds is compared seed against seed: the interval and p come from "
             "a t test over seeds and questions (two-way analysis of variance, Satterthwaite's degrees of "
             "freedom: about seeds - 1 when the seeds differ among themselves), a claim whose seeds disagree in "
             "sign is not held, and its power is read from that test's standard error; the difference of each "
             "seed's pair and their standard deviation are shown."
             + (" With 2 seed pairs this test finds a difference more often than its 5% level says: in 10-12.5% "
                "of simulated comparisons with none (its seeds' variance has one degree of freedom; "
                "benchmarks/claims-statistics); 3 or more hold it." if any(1 < int(r["seeds"]) < MIN_SEEDS for r in rows)
                else "")
             + (" Only first / only second: the questions only one side answers; with seeds, those one side "
                "answers in more of its seeds than the other (its mean over seeds is higher)."
                if any(int(r["seeds"]) > 1 for r in rows) else ""), "",
             *[f"**{n}**" for n in notes], *([""] if notes else []),
             "| claim | paper | test set | depth | first | second | questions | first / second | "
             "difference [95% CI] | only first / only second | p | p (Holm) | seeds (difference by seed; sd) | "
             "verdict | power (inconclusive) |",
             "|---|---|---|---|---|---|---:|---|---|---|---:|---:|---|---|---|"]
    for r in rows:
        lines.append(f"| {md_cell(r['claim'])} | {md_cell(r['paper'])} | {md_cell(r['test_set'])} | "
                     f"{r['depth']}: {r['metric']} | {md_cell(r['baseline'])} | {md_cell(r['method'])} | {r['questions']} | "
                     f"{r['baseline_value']:.1f} / {r['method_value']:.1f} | "
                     f"{points_text(r['difference'])} [{points_text(r['ci_low'])}, {points_text(r['ci_high'])}] | "
                     f"{r['only_baseline']} / {r['only_method']} | {p_text(r['p_value'])} | {p_text(r['p_holm'])} | "
                     f"{md_cell(_seeds_cell(r))} | **{r['verdict']}** | {_power_cell(r)} |")
    with atomic_open(md_path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def _seeds_cell(row: Mapping[str, Any]) -> str:
    seeds = int(row["seeds"])
    cell = "1" if seeds == 1 else f"{seeds} ({row['seed_differences']}; sd {row['seed_sd']:.1f})"
    if seeds < MIN_SEEDS:
        cell += f": {row['seeds_note']}" if row.get("seeds_note") else f" (fewer than {MIN_SEEDS}; no seeds_note says why)"
    return cell


def _power_cell(row: Mapping[str, Any]) -> str:
    if row["verdict"] != INCONCLUSIVE:
        return "–"
    if int(row.get("seeds") or 1) > 1 and row["detectable"] != "" and row.get("_power") != "sign test":
        return f"detects {row['detectable']:.1f} points or more (from the seeds' and questions' spread)"
    seen = (f"detects {row['detectable']:.1f} points or more" if row["detectable"] != ""
            else "too few questions to detect even 100 points")
    if row["questions_needed"] == "":
        return seen
    return f"{seen}; the paper's {row['paper_difference']:+.1f} needs at least {row['questions_needed']:,} questions"
