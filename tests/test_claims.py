"""The claims ledger (dcsr.evaluation.claims): paired bootstrap intervals, the exact sign test, verdicts."""

import csv
import json

import numpy as np
import pytest
import yaml

from dcsr.evaluation.claims import compare_paired, compare_runs, hits_at, ledger_rows, write_ledger
from dcsr.pipeline.config import check_config
from dcsr.errors import InputError


def test_hand_computed_comparison():
    # 10 questions: both answer 4, only the baseline 1, only the method 3, neither 2
    a = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]
    b = [1, 1, 1, 1, 0, 1, 1, 1, 0, 0]
    r = compare_paired(a, b, seed=1)
    assert (r.questions, r.baseline, r.method, r.difference) == (10, 50.0, 70.0, pytest.approx(20.0))
    assert (r.only_baseline, r.only_method) == (1, 3)
    # exact two-sided sign test, 3 of 4 discordant pairs: 2 * (C(4,3) + C(4,4)) / 2**4
    assert r.p_value == pytest.approx(2 * 5 / 16)
    assert r.low < 20.0 < r.high and -100 <= r.low and r.high <= 100
    assert r.verdict == "inconclusive at this scale"
    assert compare_paired(a, b, seed=1) == r  # seeded: the same interval again


def test_verdicts():
    n = 100
    both = [1] * 40 + [0] * (n - 40)
    better = [1] * 40 + [1] * 30 + [0] * 30  # 30 questions only the method answers
    assert compare_paired(both, better).verdict == "holds"
    assert compare_paired(better, both).verdict == "does not hold"
    r = compare_paired(both, both)
    assert (r.low, r.high, r.p_value, r.verdict) == (0.0, 0.0, 1.0, "inconclusive at this scale")


def _run(path, first_hits):
    path.write_text("".join(json.dumps({"qid": q, "first_hit": h}) + "\n" for q, h in enumerate(first_hits)))
    return path


def test_runs_are_paired_by_question(tmp_path):
    a = _run(tmp_path / "a.jsonl", [1, 3, None, 25])
    b = _run(tmp_path / "b.jsonl", [2, 1, 4, None])
    assert hits_at(a, 5) == {0: True, 1: True, 2: False, 3: False}
    r = compare_runs(a, b, 5)
    assert (r.baseline, r.method, r.only_baseline, r.only_method) == (50.0, 75.0, 0, 1)
    c = _run(tmp_path / "c.jsonl", [1, 1, 1])
    with pytest.raises(InputError) as e:
        compare_runs(a, c, 5)
    assert str(e.value) == f"{c}: answers other questions than {a} (3 against 4): the two runs are not paired"


def test_ledger_files(tmp_path):
    a = _run(tmp_path / "a.jsonl", [1] * 20 + [None] * 20)
    b = _run(tmp_path / "b.jsonl", [1] * 38 + [None] * 2)
    rows = ledger_rows([{"claim": "B beats A", "paper": "Table 9: 1 vs 2", "test_set": "t", "metric": "top20",
                         "baseline": "a", "method": "b", "baseline_run": a, "method_run": b}])
    assert rows[0]["difference"] == 45.0 and rows[0]["verdict"] == "holds" and rows[0]["seeds"] == 1
    assert rows[0]["p_holm"] == rows[0]["p_value"]  # one test: nothing to adjust
    write_ledger(rows, tmp_path / "c.csv", tmp_path / "c.md")
    md = (tmp_path / "c.md").read_text()
    assert ("| B beats A | Table 9: 1 vs 2 | t | paper k: top20 | a | b | 40 | 50.0 / 95.0 | +45.0 [" in md
            and "**holds** | – |" in md)


def test_holm_adjusts_every_test_of_the_ledger_together(tmp_path):
    """Two claims at two depths are four tests; Holm's step-down multiplies the smallest p by 4,
    the next by 3, ... (never below the one before), and the verdict reads the adjusted p."""
    from dcsr.evaluation.claims import holm

    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([]) == [] and ledger_rows([]) == []  # a config without claims: an empty ledger
    assert holm([0.0433, 0.00443, 0.00635, 0.894]) == pytest.approx([0.0866, 0.01772, 0.01905, 0.894])
    n = 200
    # at top-1: only the method answers 14 questions, the baseline 4 (p = 0.031 alone); at top-5 the same
    base = _run(tmp_path / "a.jsonl", [1] * 100 + [2] * 4 + [None] * (n - 104))
    meth = _run(tmp_path / "b.jsonl", [1] * 100 + [None] * 4 + [3] * 14 + [None] * (n - 118))
    claim = {"claim": "c", "test_set": "t", "metric": "top5", "scaled_metric": "top1", "baseline": "a",
             "method": "b", "baseline_run": base, "method_run": meth, "paper_difference": 10.9}
    rows = ledger_rows([claim])
    assert [(r["depth"], r["metric"]) for r in rows] == [("paper k", "top5"), ("scaled k", "top1")]
    top5, top1 = rows
    assert (top5["only_baseline"], top5["only_method"]) == (4, 14) and top5["p_value"] == pytest.approx(0.0309, abs=1e-4)
    assert (top1["only_baseline"], top1["only_method"]) == (0, 0) and top1["p_value"] == 1.0
    assert top5["p_holm"] == pytest.approx(2 * 0.0309, abs=2e-4)  # the smaller of two p-values, times 2
    assert top5["verdict"] == "inconclusive at this scale"  # significant alone (p = 0.031), not after Holm
    assert compare_runs(base, meth, 5).verdict == "holds"
    # the power of an inconclusive test: the smallest difference 200 questions detect with 18 of them
    # discordant, at 0.05 / 2 and 80% power, and the questions the paper's +10.9 would need
    from dcsr.evaluation.power import detectable_difference, questions_needed

    assert top5["detectable"] == pytest.approx(100 * detectable_difference(200, 18 / 200, 0.025))
    assert top5["questions_needed"] == questions_needed(0.109, 18 / 200, 0.025)
    assert 0 < top5["detectable"] < 100 and top5["questions_needed"] > 0
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    md = (tmp_path / "l.md").read_text()
    assert "| 0.0309 | 0.0618 |" in md and "the paper's +10.9 needs" in md and "scaled k: top1" in md


def test_power_figures_follow_connors_formula():
    """Connor (1987): n = (z(1-a/2) sqrt(psi) + z(1-b) sqrt(psi - d^2))^2 / d^2, worked by hand for
    d = 0.1, psi = 0.2, a = 0.05, power 0.8: (1.95996 * 0.44721 + 0.84162 * 0.43589)^2 / 0.01 = 154.6."""
    from dcsr.evaluation.power import detectable_difference, questions_needed

    assert questions_needed(0.1, 0.2) == 155
    assert questions_needed(-0.1, 0.2) == 155
    assert questions_needed(0.1, 0.01) == questions_needed(0.1, 0.1)  # psi is at least the difference
    d = detectable_difference(155, 0.2)
    assert d == pytest.approx(0.1, abs=0.001)  # the inverse of the formula
    assert detectable_difference(620, 0.2) == pytest.approx(d / 2, rel=0.05)  # 4x the questions: about half
    assert detectable_difference(3, 0.1) is None  # too few questions for any difference
    # few discordant questions: a larger difference brings more of them, and is detectable
    few = detectable_difference(45, 8 / 45, 0.05 / 8)
    assert 8 / 45 < few < 1 and questions_needed(few, 8 / 45, 0.05 / 8) == pytest.approx(45, abs=1)
    with pytest.raises(ValueError):
        questions_needed(0, 0.2)


@pytest.mark.parametrize("change, message", [
    (lambda c: c["claims"][0].update(baseline="nope"),
     "config: claims.0.baseline: names model 'nope', which is not under 'models' (or bm25)"),
    (lambda c: c["claims"][0].update(metric="top7"), "config: claims.0.metric: top7 is not among evaluate.ks"),
    (lambda c: c["claims"][1].update(test_set="squad"),
     "config: claims.1.test_set: names dataset 'squad', which is not under 'datasets'"),
])
def test_claims_config_errors(repo, change, message):
    cfg = yaml.safe_load((repo / "config" / "generated.yaml").read_text())
    change(cfg)
    with pytest.raises(InputError) as e:
        check_config(cfg)
    assert str(e.value) == message


def test_several_seeds_compare_mean_outcomes_and_report_each_seed(tmp_path):
    # 4 questions at top-1. Baseline (one run): answers q0, q1. Method, seed 1: q0, q1, q2;
    # seed 2: q0, q3; seed 3: q0, q1, q2, q3.
    base = _run(tmp_path / "b.jsonl", [1, 1, None, None])
    m = [_run(tmp_path / "m1.jsonl", [1, 1, 1, None]), _run(tmp_path / "m2.jsonl", [1, None, None, 1]),
         _run(tmp_path / "m3.jsonl", [1, 1, 1, 1])]
    r = compare_runs([base], m, 1)
    # per-question method means: 1, 2/3, 2/3, 2/3; baseline 1, 1, 0, 0
    assert r.method == pytest.approx(100 * (1 + 2 / 3 * 3) / 4)
    assert r.difference == pytest.approx(100 * (0 - 1 / 3 + 2 / 3 + 2 / 3) / 4)
    assert (r.only_baseline, r.only_method) == (1, 2)  # q1 worse on average, q2 and q3 better
    rows = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                         "baseline_runs": [str(base)], "method_runs": [str(p) for p in m]}])
    assert rows[0]["seeds"] == 3 and rows[0]["seed_differences"] == "+25.0 / +0.0 / +50.0"
    assert rows[0]["seed_sd"] == pytest.approx(25.0)
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    assert "| 3 (+25.0 / +0.0 / +50.0; sd 25.0) |" in (tmp_path / "l.md").read_text()
    assert rows[0]["p_holm"] == rows[0]["p_value"]
    # with seeds the counts are of questions one side answers more often, and the ledger says so
    assert "with seeds, those one side answers in more of its seeds" in (tmp_path / "l.md").read_text()
    one = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                        "baseline_run": str(base), "method_run": str(m[0])}])
    write_ledger(one, tmp_path / "one.csv", tmp_path / "one.md")
    assert "with seeds, those" not in (tmp_path / "one.md").read_text()


def test_seeds_train_a_model_several_times():
    from dcsr.pipeline.config import model_seeds, seed_replicas

    cfg = {"train": {"seed": 100}, "models": {
        "dpr": {"method": "dpr", "init": "m", "train_on": "d", "seeds": 3},
        "dcsr": {"method": "dcsr", "init": "m", "train_on": "d", "seeds": 2, "train": {"seed": 7, "epochs": 1}},
        "plain": {"method": "dpr", "init": "m"}}}
    replicas = seed_replicas(cfg)
    assert sorted(replicas) == ["dcsr.seed2", "dpr.seed2", "dpr.seed3"]
    assert replicas["dpr.seed3"] == {"method": "dpr", "init": "m", "train_on": "d", "train": {"seed": 102}}
    assert replicas["dcsr.seed2"]["train"] == {"seed": 8, "epochs": 1}
    assert model_seeds(cfg, "dpr") == ["dpr", "dpr.seed2", "dpr.seed3"] and model_seeds(cfg, "plain") == ["plain"]
    cfg["models"]["plain"]["seeds"] = 2
    with pytest.raises(InputError, match="config: models.plain.seeds: an untrained model has nothing to seed"):
        seed_replicas(cfg)


# Exact two-sided sign tests worked by hand: 2 * P(X <= min(wins, losses)) for X ~ Bin(n, 1/2),
# capped at 1. (wins, losses) -> p.
HAND_SIGN_TESTS = [
    ((3, 1), 2 * (1 + 4) / 16),                 # 0.625
    ((0, 5), 2 * 1 / 32),                       # 0.0625
    ((10, 0), 2 * 1 / 1024),                    # 0.001953125
    ((7, 3), 2 * (1 + 10 + 45 + 120) / 1024),   # 0.34375
    ((2, 2), 1.0),                              # 2 * 11/16 > 1
    ((0, 1), 1.0),
    ((0, 0), 1.0),                              # no discordant question: nothing to test
]


def _paired_compare():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "paired_compare.py"
    spec = importlib.util.spec_from_file_location("paired_compare", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("wins_losses, p", HAND_SIGN_TESTS)
def test_sign_test_p_values_by_hand(wins_losses, p):
    """The claims ledger and benchmarks/paired_compare.py both take the sign test from
    scipy.stats.binomtest; both give the hand-worked p-values (the benchmark's former
    hand-written sum of binomial coefficients gave the same to 1e-14 for all n <= 240)."""
    wins, losses = wins_losses
    assert _paired_compare().sign_test(wins, losses) == pytest.approx(p, rel=1e-12)
    assert _paired_compare().sign_test(losses, wins) == pytest.approx(p, rel=1e-12)
    # compare_paired: `wins` questions only the method answers, `losses` only the baseline, one both.
    base = [0] * wins + [1] * losses + [1]
    method = [1] * wins + [0] * losses + [1]
    assert compare_paired(base, method).p_value == pytest.approx(p, rel=1e-12)


def test_the_ledger_rounds_once_from_the_raw_value(tmp_path):
    """The Markdown's one decimal comes from the raw value, as the table's does (71.3507 is 71.4),
    not from the CSV's two decimals (71.35, which would print 71.3)."""
    from dcsr.evaluation.claims import FIELDS, write_ledger

    row = {k: "" for k in FIELDS}
    row.update(claim="c", paper="p", test_set="t", metric="top20", baseline="a", method="b", questions=10,
               baseline_value=71.3507, method_value=80.0, difference=8.6493, ci_low=1.0, ci_high=20.0,
               only_baseline=0, only_method=1, p_value=0.5, p_holm=0.5, seeds=1, depth="paper k",
               verdict="inconclusive at this scale", detectable=12.345)
    write_ledger([row], tmp_path / "c.csv", tmp_path / "c.md")
    assert "| 71.4 / 80.0 | +8.6 [+1.0, +20.0] |" in (tmp_path / "c.md").read_text()
    assert ",71.35,80.0,8.65," in (tmp_path / "c.csv").read_text()


def test_a_claim_on_fewer_than_three_seeds_says_why(tmp_path):
    """The seeds column prints a claim's seeds_note where it rests on fewer than 3 seeds, and
    says that no reason was given where none is; with 3 seeds the note is not printed."""
    base = _run(tmp_path / "b.jsonl", [1, 1, None, None])
    m = [_run(tmp_path / f"m{i}.jsonl", [1, 1, 1, None]) for i in range(3)]
    claim = {"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
             "seeds_note": "one seed: the budget"}
    rows = ledger_rows([{**claim, "baseline_runs": [str(base)], "method_runs": [str(m[0])]},
                        {**claim, "seeds_note": "", "baseline_runs": [str(base)], "method_runs": [str(m[0])]},
                        {**claim, "baseline_runs": [str(base)], "method_runs": [str(p) for p in m]}])
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    cells = [line.split(" | ")[12] for line in (tmp_path / "l.md").read_text().splitlines() if line.startswith("| c |")]
    assert cells == ["1: one seed: the budget", "1 (fewer than 3; no seeds_note says why)",
                     "3 (+25.0 / +25.0 / +25.0; sd 0.0)"]
    assert [r["seeds_note"] for r in rows] == ["one seed: the budget", "", ""]


def _seed_runs(rng, n, rates):
    """``[runs, questions]`` 0/1 outcomes, run i answering each question with probability rates[i]."""
    return (rng.random((len(rates), n)) < np.asarray(rates)[:, None]).astype(float)


def test_with_seeds_the_interval_and_p_include_the_seeds_variation():
    """Seed-averaged outcomes resampled over questions alone made 3 seeds look like certainty
    ("Holm p 1.3e-19"): the seeded test counts the seeds' spread, with about seeds - 1 degrees
    of freedom when they differ."""
    from dcsr.evaluation.claims import compare_seeded

    rng = np.random.default_rng(0)
    n = 965
    base = _seed_runs(rng, n, [0.55, 0.55, 0.55])
    meth = _seed_runs(rng, n, [0.70, 0.58, 0.64])  # every seed better, by 3 to 15 points
    seeded = compare_seeded(base, meth, seed=1)
    questions_only = compare_paired(base.mean(axis=0), meth.mean(axis=0), seed=1)
    assert seeded.difference == pytest.approx(questions_only.difference)
    assert seeded.low < seeded.difference < seeded.high
    assert (seeded.high - seeded.low) > 2 * (questions_only.high - questions_only.low)
    assert seeded.seeds == 3 and seeded.spread > 0 and 1.5 <= seeded.df < 4  # about seeds - 1
    assert questions_only.p_value < 1e-7 and seeded.p_value > 0.05  # +15, +3 and +9 points: not yet sure
    assert compare_seeded(base, meth, seed=1) == seeded  # the same numbers again
    # one run a side: the exact sign test, as before
    assert compare_seeded(base[:1], meth[:1], seed=1) == compare_paired(base[0], meth[0], seed=1)


def test_the_seeded_test_is_the_paired_t_test_at_either_extreme():
    """Seeds that all agree question by question leave the questions' paired t test (n - 1
    degrees of freedom); questions that all agree within a seed leave the seeds' (R - 1)."""
    from scipy import stats

    from dcsr.evaluation.claims import compare_seeded, seed_variance

    rng = np.random.default_rng(3)
    d = (rng.random(200) < 0.3).astype(float) - (rng.random(200) < 0.2)
    mean, se, df = seed_variance(np.stack([d, d, d]))
    t = stats.ttest_1samp(d, 0.0)
    assert df == 199 and mean == pytest.approx(d.mean()) and mean / se == pytest.approx(t.statistic)
    by_seed = np.array([0.04, 0.11, 0.02, 0.07])
    mean, se, df = seed_variance(np.repeat(by_seed[:, None], 50, axis=1))
    t = stats.ttest_1samp(by_seed, 0.0)
    assert df == pytest.approx(3) and mean / se == pytest.approx(t.statistic)
    base = np.zeros((4, 50))
    c = compare_seeded(base, base + by_seed[:, None])
    assert c.p_value == pytest.approx(t.pvalue) and c.df == pytest.approx(3)
    low, high = stats.t.interval(0.95, 3, loc=by_seed.mean(), scale=by_seed.std(ddof=1) / 2)
    assert (c.low, c.high) == pytest.approx((100 * low, 100 * high))


def test_seed_pairs_that_disagree_on_every_question_with_equal_question_means_are_not_certain():
    """Two seed pairs that each differ on every question, in opposite directions: each question's
    mean difference is 0 and so is the questions' mean square, but the seeds disagree question by
    question. That is spread, not certainty: no zero-width interval and no "detects 0.0 points"."""
    from dcsr.evaluation.claims import compare_seeded, seed_variance

    base = np.array([[0, 1, 0, 1], [1, 0, 1, 0]], dtype=float)
    meth = 1 - base
    mean, se, df = seed_variance(meth - base)
    assert mean == 0 and se > 0 and df == 3
    c = compare_seeded(base, meth)
    assert c.low < 0 < c.high and c.p_value == 1 and c.spread > 0


def test_with_three_seeds_a_null_difference_is_found_about_one_time_in_twenty():
    """Simulated comparisons with no difference (3 seeds a side, 400 questions, a seed-to-seed
    spread of 5 points): the seeded test rejects at its 5% level. The two-level bootstrap it
    replaced rejected about 20% of them (benchmarks/claims-statistics)."""
    from dcsr.evaluation.claims import compare_seeded

    rng = np.random.default_rng(11)
    found, sims = 0, 400
    for _ in range(sims):
        p = rng.beta(2, 2, 400)
        shift = rng.normal(0, 0.05, (2, 3))  # each training run is a little better or worse
        base, meth = ((rng.random((3, 400)) < np.clip(p + s[:, None], 0, 1)).astype(float) for s in shift)
        found += compare_seeded(base, meth).p_value < 0.05
    assert 0.02 <= found / sims <= 0.09, found


def test_uneven_seed_counts_are_refused_in_words():
    from dcsr.evaluation.claims import compare_seeded

    with pytest.raises(ValueError, match="2 baseline runs against 3 method runs"):
        compare_seeded(np.zeros((2, 10)), np.ones((3, 10)))


def test_a_seeded_difference_without_any_spread_falls_back_to_the_exact_sign_test():
    from dcsr.evaluation.claims import compare_seeded

    base, meth = np.zeros((3, 20)), np.ones((3, 20))
    c = compare_seeded(base, meth)
    assert c.difference == 100 and c.spread == 0 and c.p_value == pytest.approx(2 * 0.5 ** 20) and c.seeds == 3


def test_seeds_that_disagree_in_sign_do_not_hold_and_power_comes_from_their_spread(tmp_path):
    from dcsr.evaluation.claims import SEEDS_DISAGREE

    n = 400
    base = [1] * 200 + [None] * 200
    # seed 1 answers 60 more questions than the baseline, seed 2 ten fewer, seed 3 40 more
    seeds = [[1] * 260 + [None] * 140, [1] * 190 + [None] * 210, [1] * 240 + [None] * 160]
    rows = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                         "paper_difference": 5.0, "baseline_runs": [str(_run(tmp_path / "b.jsonl", base))],
                         "method_runs": [str(_run(tmp_path / f"m{i}.jsonl", s)) for i, s in enumerate(seeds)]}])
    assert rows[0]["seed_differences"] == "+15.0 / -2.5 / +10.0"
    assert rows[0]["verdict"] == SEEDS_DISAGREE
    # agreeing seeds with a wide spread: inconclusive, power from the spread, no count of questions
    seeds = [[1] * 230 + [None] * 170, [1] * 201 + [None] * 199, [1] * 202 + [None] * 198]
    rows = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                         "paper_difference": 5.0, "baseline_runs": [str(tmp_path / "b.jsonl")],
                         "method_runs": [str(_run(tmp_path / f"n{i}.jsonl", s)) for i, s in enumerate(seeds)]}])
    row = rows[0]
    assert row["verdict"] == "inconclusive at this scale", row
    assert row["detectable"] > 0 and row["questions_needed"] == ""
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    assert "(from the seeds' and questions' spread)" in (tmp_path / "l.md").read_text()


def test_questions_needed_is_printed_as_a_lower_bound(tmp_path):
    """psi is raised to the difference, the fewest discordant questions it needs: the count is
    the smallest n, and 286 at psi = delta is 684 at psi = 0.10."""
    from dcsr.evaluation.power import questions_needed

    assert questions_needed(0.05, 0.05) < questions_needed(0.05, 0.10)
    a = _run(tmp_path / "a.jsonl", [1] * 50 + [None] * 50)
    b = _run(tmp_path / "b.jsonl", [1] * 51 + [None] * 49)
    rows = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                         "paper_difference": 5.0, "baseline_run": str(a), "method_run": str(b)}])
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    assert f"needs at least {rows[0]['questions_needed']:,} questions" in (tmp_path / "l.md").read_text()


def test_the_scaled_k_is_computed_from_the_corpus_and_checked_against_the_config(tmp_path):
    from dcsr.evaluation.claims import PAPER_PASSAGES, scaled_k

    assert scaled_k(20, PAPER_PASSAGES) == 20 and scaled_k(20, 1_000_000) == 1 and scaled_k(20, 2_000_000) == 2
    assert scaled_k(100, 1_935) == 1  # at least 1
    a = _run(tmp_path / "a.jsonl", [1, 2, None, 1])
    b = _run(tmp_path / "b.jsonl", [1, 1, 1, 3])
    claim = {"claim": "c", "test_set": "t", "metric": "top20", "baseline": "a", "method": "b",
             "baseline_run": str(a), "method_run": str(b), "corpus_passages": 2_100_000}
    rows = ledger_rows([{**claim, "scaled_metric": "auto"}])
    assert [r["metric"] for r in rows] == ["top20", "top2"]
    assert rows[1]["depth"] == "scaled k (top20 x 2,100,000 / 21,015,324)"
    assert [r["metric"] for r in ledger_rows([{**claim, "scaled_metric": "top2"}])] == ["top20", "top2"]
    with pytest.raises(InputError) as e:  # typed by hand for another corpus size
        ledger_rows([{**claim, "scaled_metric": "top1"}])
    assert str(e.value).startswith("config: claims.0.scaled_metric: is top1, but top20 scaled to this corpus is top2")
    # the papers' own corpus: the scaled k is the paper's, one test and not two in Holm's family
    # (two would double its adjusted p)
    whole = ledger_rows([{**claim, "scaled_metric": "auto", "corpus_passages": PAPER_PASSAGES}])
    assert [r["metric"] for r in whole] == ["top20"] and whole[0]["p_holm"] == ledger_rows([claim])[0]["p_holm"]
    assert [r["metric"] for r in ledger_rows([{**claim, "metric": "top020", "scaled_metric": "auto",
                                               "corpus_passages": PAPER_PASSAGES}])] == ["top020"]


def test_rows_that_are_one_test_count_once_in_holms_family(tmp_path):
    """Two claims alike, the same two runs the other way round, or one claim's scaled k another's
    paper k: one test, counted once in the family (twice, it doubled its adjusted p); the ledger
    says how many tests the family holds."""
    from dcsr.evaluation.claims import holm

    a = _run(tmp_path / "a.jsonl", [None] * 30 + [1] * 70)
    b = _run(tmp_path / "b.jsonl", [1] * 100)
    c = _run(tmp_path / "c.jsonl", [None] * 10 + [1] * 90)
    claim = {"claim": "x", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
             "baseline_run": str(a), "method_run": str(b)}
    alone = ledger_rows([claim])[0]["p_holm"]
    twice = ledger_rows([claim, {**claim, "claim": "y"}, {**claim, "claim": "z", "baseline": "b", "method": "a",
                                                          "baseline_run": str(b), "method_run": str(a)}])
    assert [r["p_holm"] for r in twice] == [alone] * 3
    other = {**claim, "claim": "w", "method": "c", "method_run": str(c)}
    rows = ledger_rows([claim, {**claim, "claim": "y"}, other])
    want = holm([r["p_value"] for r in ledger_rows([claim, other])])
    assert [r["p_holm"] for r in rows] == pytest.approx([want[0], want[0], want[1]], rel=1e-2)  # from rounded p
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    text = (tmp_path / "l.md").read_text()
    assert "The 2 tests are one family (rows that are one test" in text


def test_paired_compare_adjusts_a_family_and_never_pools_repeated_questions(tmp_path):
    """benchmarks/paired_compare.py pooled pairs over the same questions (seeds, models on one
    dev set) as independent questions; now every test is one family, Holm-adjusted, and seeds
    are compared with the ledger's seeded t test."""
    pc = _paired_compare()
    a1, b1 = _run(tmp_path / "a1.jsonl", [1, None, 3, None]), _run(tmp_path / "b1.jsonl", [1, 1, 1, None])
    a2, b2 = _run(tmp_path / "a2.jsonl", [None, 1, None, 2]), _run(tmp_path / "b2.jsonl", [1, 1, 1, 1])
    rows = pc.family([(str(a1), str(b1)), (str(a2), str(b2))], [1, 5])
    assert len(rows) == 4 and all(r["p_holm"] >= r["p"] for r in rows)
    assert [(r["only_A"], r["only_B"]) for r in rows] == [(0, 2), (0, 1), (0, 3), (0, 2)]
    seeds = pc.seeded([(str(a1), str(b1)), (str(a2), str(b2))], [1])
    assert seeds[0]["seeds"] == 2 and seeds[0]["questions"] == 4 and seeds[0]["difference"] == pytest.approx(62.5)  # +50 and +75


def test_a_printed_p_or_bound_never_reads_on_the_other_side_of_its_verdict():
    """p = 0.0499832 is below 0.05 and its claim holds: written to 3 figures it read 0.05; a lower
    bound of +0.033 read +0.0 beside "holds". More digits where the rounding would cross."""
    from dcsr.evaluation.claims import p_text, points_text

    assert p_text(0.0499832) == "0.04998" and p_text(0.0123456) == "0.0123" and p_text(0.05) == "0.05"
    assert p_text(0.0500004) == "0.05" and p_text(1.0) == "1"
    assert points_text(0.033) == "+0.03" and points_text(-0.004) == "-0.004" and points_text(1.04) == "+1.0"
    assert points_text(0.0) == "+0.0" and points_text(0.004, 2, sign=False) == "0.004"


def test_the_ledger_prints_a_p_just_below_005_as_below(tmp_path):
    """2,000 questions, 117 only the first answers and 150 only the second: the exact sign test's
    p is 0.04998, the claim holds, and neither the CSV nor the Markdown says 0.05."""
    base = [1] * 1000 + [1] * 117 + [None] * 150 + [None] * 733
    meth = [1] * 1000 + [None] * 117 + [1] * 150 + [None] * 733
    rows = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                         "baseline_run": str(_run(tmp_path / "a.jsonl", base)),
                         "method_run": str(_run(tmp_path / "b.jsonl", meth))}])
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    row = next(csv.DictReader(open(tmp_path / "l.csv")))
    assert row["verdict"] == "holds" and float(row["p_holm"]) < 0.05 and float(row["ci_low"]) > 0
    assert "| 0.04998 | 0.04998 |" in (tmp_path / "l.md").read_text()


def test_seeds_without_any_spread_take_their_power_from_the_sign_test(tmp_path):
    """Three seeds a side, each the same run as the other side's: no spread at all, so the
    comparison is the exact sign test's; its power is too (it read "detects 0.0 points or more",
    from a standard error of 0)."""
    base = meth = [1] * 200 + [None] * 300
    runs = {side: [str(_run(tmp_path / f"{side}{i}.jsonl", v)) for i in range(3)] for side, v in
            (("a", base), ("b", meth))}
    rows = ledger_rows([{"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
                         "paper_difference": 3.0, "baseline_runs": runs["a"], "method_runs": runs["b"]}])
    row = rows[0]
    assert row["verdict"] == "inconclusive at this scale" and row["detectable"] > 1.0, row
    assert row["questions_needed"] > 0
    write_ledger(rows, tmp_path / "l.csv", tmp_path / "l.md")
    md = (tmp_path / "l.md").read_text()
    assert "(from the seeds' and questions' spread)" not in md and "detects 0.0 points" not in md


def test_a_question_given_twice_in_a_runs_results_is_refused_naming_both_lines(tmp_path):
    """A later line of the same question silently replaced the earlier: a miss read as a hit."""
    from dcsr.errors import InputError

    path = tmp_path / "r.questions.jsonl"
    path.write_text('{"qid": 0, "first_hit": null}\n{"qid": 1, "first_hit": null}\n{"qid": 1, "first_hit": 2}\n')
    with pytest.raises(InputError, match=r"r\.questions\.jsonl:3: question 1 is given a second time \(first at line 2\)"):
        hits_at(path, 5)


def test_a_ledger_on_two_seeds_says_its_test_is_too_eager_there(tmp_path):
    """With 2 seeds the seeded t test found a difference in 10-12.5% of null simulations
    (benchmarks/claims-statistics): a ledger with such a row says so; one without, not."""
    base = [1] * 200 + [None] * 200
    claim = {"claim": "c", "test_set": "t", "metric": "top1", "baseline": "a", "method": "b",
             "baseline_runs": [str(_run(tmp_path / f"a{i}.jsonl", base)) for i in range(2)],
             "method_runs": [str(_run(tmp_path / f"b{i}.jsonl", [1] * (205 + 9 * i) + [None] * (195 - 9 * i)))
                             for i in range(2)]}
    write_ledger(ledger_rows([claim]), tmp_path / "l.csv", tmp_path / "l.md")
    assert "With 2 seed pairs this test finds a difference more often" in (tmp_path / "l.md").read_text()
    one = {**claim, "baseline_runs": claim["baseline_runs"][:1], "method_runs": claim["method_runs"][:1]}
    write_ledger(ledger_rows([one]), tmp_path / "m.csv", tmp_path / "m.md")
    assert "With 2 seeds" not in (tmp_path / "m.md").read_text()
