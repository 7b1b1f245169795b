"""How often the claims ledger's seeded comparison finds a difference that is not there, and how
often it finds one that is (not a test): simulated paired comparisons of R training seeds a side
on n questions, the ledger's t test over seeds and questions
(``dcsr.evaluation.claims.compare_seeded``) against the two-level bootstrap it replaced on
2026-11-28 (kept here, as it was, as the baseline), on the same simulated data.

    PYTHONPATH=src python benchmarks/claims-statistics/seed_tests.py [--model same|differ] [--sims 1000] \
        [--resamples 2000] [--out benchmarks/out/seed_tests-<model>.json]

A simulated question has a chance of being answered by each side. ``--model same``: one chance p
for both sides (Beta(2, 2) over questions). ``--model differ``, closer to two real retrievers: chances
near 0 or 1 (Beta(0.3, 0.3)), and on 30% of the questions the two sides have chances of their own
(two independent draws, given to the sides at random, so no side is better over all questions).
Each training run of a side moves every question's chance by its own seed effect (normal, sd
``seed_sd``); the method's runs by ``effect`` more on average. Outcomes are 0/1 draws. A scenario with
effect 0 is a null one: the share of its comparisons with p < 0.05 should be about 5%. Every
scenario draws from its own seeded generator, so a rerun prints the same numbers.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks_common
from benchmarks_common import emit, machine  # noqa: E402

from dcsr.evaluation.claims import compare_seeded  # noqa: E402

#: (seeds a side, questions, seeds' sd, method's effect), as proportions
SCENARIOS = [
    (3, 2000, 0.05, 0.0), (3, 1000, 0.02, 0.0), (3, 1000, 0.0, 0.0), (2, 1000, 0.04, 0.0), (5, 1000, 0.04, 0.0),
    (3, 1000, 0.01, 0.03), (3, 1000, 0.03, 0.05), (3, 1000, 0.0, 0.03),
]


def two_level_bootstrap_p(pairs: np.ndarray, rng: np.random.Generator, resamples: int) -> float:
    """The replaced p-value: ``resamples`` mean differences of ``[seed pairs, questions]``, each
    drawing the seed pairs with replacement and, for all of them, the questions; twice the smaller
    share on either side of 0 (``dcsr.evaluation.claims.two_level_bootstrap`` until 2026-11-28)."""
    runs, n = pairs.shape
    seeds = rng.multinomial(runs, np.full(runs, 1 / runs), size=resamples)
    questions = rng.multinomial(n, np.full(n, 1 / n), size=resamples)
    boot = np.einsum("ms,sn,mn->m", seeds, pairs, questions) / (runs * n)
    return min(1.0, 2 * (min(int(np.sum(boot <= 0)), int(np.sum(boot >= 0))) + 1) / (resamples + 1))


def whole_seed_part_p(pairs: np.ndarray, seeds_df: bool = False) -> float:
    """A variant tried on 2026-11-29, not the ledger's: the same two-way analysis of variance, but
    the seeds' mean square kept whole (never cut on a pre-test against the interaction's), and
    only the questions' component ``MS_q - MS_e`` cut at 0: the variance of the mean is
    ``(MS_s + max(0, MS_q - MS_e)) / (R n)``, with Satterthwaite's degrees of freedom over those
    two terms. With 2 seeds the seeds' term has 1 degree of freedom. With ``seeds_df``, R - 1
    degrees of freedom (the seeds' mean square's) instead of Satterthwaite's."""
    from scipy import stats

    d = np.asarray(pairs, dtype=float)
    runs, n = d.shape
    by_seed, by_question, mean = d.mean(axis=1), d.mean(axis=0), float(d.mean())
    ms_s = n * float(np.sum((by_seed - mean) ** 2)) / (runs - 1)
    ms_q = runs * float(np.sum((by_question - mean) ** 2)) / (n - 1)
    resid = d - by_seed[:, None] - by_question[None, :] + mean
    ms_e = float(np.sum(resid ** 2)) / ((runs - 1) * (n - 1))
    terms = [(ms_s / (runs * n), runs - 1), (max(0.0, ms_q - ms_e) / (runs * n), n - 1)]
    var = sum(t for t, _ in terms)
    if var <= 0:
        return 1.0
    df = runs - 1 if seeds_df else var ** 2 / sum(t * t / f for t, f in terms if t > 0)
    return float(min(1.0, 2 * stats.t.sf(abs(mean) / var ** 0.5, df)))


def seeds_df_p(pairs: np.ndarray) -> float:
    """A variant tried on 2026-11-29, not the ledger's: the ledger's standard error
    (``dcsr.evaluation.claims.seed_variance``), but where it keeps the seeds' component
    (``MS_s > MS_e``) at most R - 1 degrees of freedom, those of the seeds' mean square, instead
    of Satterthwaite's estimate, which rises when the seeds happen to agree."""
    from scipy import stats

    from dcsr.evaluation.claims import seed_variance

    d = np.asarray(pairs, dtype=float)
    runs, n = d.shape
    mean, se, df = seed_variance(d)
    if se == 0:
        return 1.0
    by_seed, by_question, grand = d.mean(axis=1), d.mean(axis=0), float(d.mean())
    ms_s = n * float(np.sum((by_seed - grand) ** 2)) / (runs - 1)
    resid = d - by_seed[:, None] - by_question[None, :] + grand
    ms_e = float(np.sum(resid ** 2)) / ((runs - 1) * (n - 1))
    if ms_s > ms_e:
        df = min(df, runs - 1)
    return float(min(1.0, 2 * stats.t.sf(abs(mean) / se, df)))


def chances(rng: np.random.Generator, n: int, model: str) -> tuple[np.ndarray, np.ndarray]:
    """Each question's chance of being answered by the baseline and by the method."""
    if model == "same":
        p = rng.beta(2, 2, n)
        return p, p
    a = rng.beta(0.3, 0.3, n)
    b = np.where(rng.random(n) < 0.7, a, rng.beta(0.3, 0.3, n))
    swap = rng.random(n) < 0.5
    return np.where(swap, b, a), np.where(swap, a, b)


def scenario(seeds: int, n: int, seed_sd: float, effect: float, sims: int, resamples: int, seed: int,
             model: str = "same") -> dict:
    rng = np.random.default_rng(seed)
    found = {"t": 0, "bootstrap": 0, "whole_seed_part": 0, "seeds_df": 0, "whole_seeds_df": 0}
    for _ in range(sims):
        p_base, p_meth = chances(rng, n, model)
        base_shift, meth_shift = rng.normal(0, seed_sd, seeds), rng.normal(effect, seed_sd, seeds)
        base = (rng.random((seeds, n)) < np.clip(p_base + base_shift[:, None], 0, 1)).astype(float)
        meth = (rng.random((seeds, n)) < np.clip(p_meth + meth_shift[:, None], 0, 1)).astype(float)
        found["t"] += compare_seeded(base, meth).p_value < 0.05
        found["whole_seed_part"] += whole_seed_part_p(meth - base) < 0.05
        found["seeds_df"] += seeds_df_p(meth - base) < 0.05
        found["whole_seeds_df"] += whole_seed_part_p(meth - base, seeds_df=True) < 0.05
        if resamples:  # with --resamples 0 its draws are skipped, so the later comparisons draw other data
            found["bootstrap"] += two_level_bootstrap_p(meth - base, rng, resamples) < 0.05
    return {"model": model, "seeds": seeds, "questions": n, "seed_sd": seed_sd, "effect": effect, "sims": sims,
            **{f"found_{k}": v / sims for k, v in found.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=1000, help="simulated comparisons a scenario")
    ap.add_argument("--resamples", type=int, default=2000, help="the bootstrap's resamples (0: no bootstrap)")
    ap.add_argument("--model", choices=("same", "differ"), default="same", help="how the two sides' chances relate")
    ap.add_argument("--out", help="the JSON written (default benchmarks/out/seed_tests-<model>.json)")
    a = ap.parse_args()
    start = time.time()
    rows = [scenario(*s, a.sims, a.resamples, seed=i, model=a.model) for i, s in enumerate(SCENARIOS)]
    print("seeds\tquestions\tseeds' sd\teffect\tfound by t\tby the whole seeds' part\tby R - 1 df\tby both\t"
          "by the bootstrap")
    for r in rows:
        print(f"{r['seeds']}\t{r['questions']}\t{r['seed_sd']}\t{r['effect']}\t{r['found_t']:.3f}\t"
              f"{r['found_whole_seed_part']:.3f}\t{r['found_seeds_df']:.3f}\t{r['found_whole_seeds_df']:.3f}\t"
              + (f"{r['found_bootstrap']:.3f}" if a.resamples else "-"))
    emit({"machine": machine(), "seconds": round(time.time() - start, 1), "resamples": a.resamples,
          "scenarios": rows}, a.out or f"benchmarks/out/seed_tests-{a.model}.json")


if __name__ == "__main__":
    main()
