"""Paired comparison of two retrievers on the same test questions (not a test).

Reads the per-question results that `evaluate_topk` writes (``*.questions.jsonl``: the rank of
each question's first answer-bearing passage) and, for each k, counts the questions only A
finds in its top k and those only B finds, with a two-sided exact sign test on those
discordant pairs (the questions both or neither find carry no information).

    python benchmarks/paired_compare.py A.questions.jsonl B.questions.jsonl [--ks 1 5 20 100]
    python benchmarks/paired_compare.py A1 B1 A2 B2 ...            # one family: Holm over every test
    python benchmarks/paired_compare.py --seeds A1 B1 A2 B2 ...    # seeds of one comparison

Several pairs (one per model or test set) are one family of tests: every p-value is printed
beside its Holm-adjusted one (``dcsr.evaluation.claims.holm``), and nothing is pooled. Pooling
pairs over the same questions (seeds of one model, or several models on one dev set) counted
each question several times as if independent: a 910-question dev set read as 3,640 questions.
With ``--seeds`` the pairs are training seeds of one comparison on the same questions (seed k
of A against seed k of B): they are compared as the claims ledger compares seeds, with a t test
over seeds and questions (``dcsr.evaluation.claims.compare_seeded``: two-way analysis of
variance, Satterthwaite's degrees of freedom).
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.stats import binomtest

from dcsr.evaluation.claims import compare_seeded, holm


def first_hits(path: str) -> dict[int, int | None]:
    with open(path, encoding="utf-8") as fh:
        return {r["qid"]: r["first_hit"] for r in map(json.loads, fh)}


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial p-value of ``wins`` against ``losses`` under p = 1/2
    (``scipy.stats.binomtest``, as the claims ledger's sign test); 1 when there are none."""
    n = wins + losses
    return float(binomtest(wins, n, 0.5).pvalue) if n else 1.0


def compare(a: dict, b: dict, k: int) -> tuple[int, int, float]:
    if a.keys() != b.keys():
        raise SystemExit("the two files hold different questions")
    hit = lambda r: r is not None and r <= k  # noqa: E731
    wins = sum(1 for q in a if hit(a[q]) and not hit(b[q]))
    losses = sum(1 for q in a if hit(b[q]) and not hit(a[q]))
    return wins, losses, sign_test(wins, losses)


def family(pairs: list[tuple[str, str]], ks) -> list[dict]:
    """Every (pair, k) sign test, Holm-adjusted together."""
    rows = []
    for a_path, b_path in pairs:
        a, b = first_hits(a_path), first_hits(b_path)
        for k in ks:
            w, l, p = compare(a, b, k)
            rows.append({"A": a_path, "B": b_path, "questions": len(a), "k": k, "only_A": w, "only_B": l, "p": p})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
    return rows


def seeded(pairs: list[tuple[str, str]], ks) -> list[dict]:
    """One comparison over seeds: A's and B's runs of the same questions, seed k against seed k."""
    runs = [(first_hits(a), first_hits(b)) for a, b in pairs]
    qids = sorted(runs[0][0])
    if any(set(a) != set(qids) or set(b) != set(qids) for a, b in runs):
        raise SystemExit("--seeds: every file must hold the same questions")
    rows = []
    for k in ks:
        hit = np.array([[[r[q] is not None and r[q] <= k for q in qids] for r in pair] for pair in runs], dtype=float)
        c = compare_seeded(hit[:, 0], hit[:, 1])
        rows.append({"k": k, "questions": len(qids), "seeds": len(runs), "difference": c.difference, "low": c.low,
                     "high": c.high, "p": c.p_value, "df": c.df})
    for row, adjusted in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = adjusted
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="A B", help="pairs of *.questions.jsonl: A1 B1 [A2 B2 ...]")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 5, 20, 100])
    ap.add_argument("--seeds", action="store_true", help="the pairs are training seeds of one comparison")
    args = ap.parse_args()
    if len(args.files) % 2:
        ap.error("give the files in pairs: A1 B1 [A2 B2 ...]")
    pairs = list(zip(args.files[::2], args.files[1::2]))
    if args.seeds:
        print(f"{len(pairs)} seeds; B - A in points, 95% t interval over seeds and questions, p, p (Holm over the "
              "ks), degrees of freedom")
        for r in seeded(pairs, args.ks):
            print(f"top{r['k']}\t{r['difference']:+.2f} [{r['low']:+.2f}, {r['high']:+.2f}]\t{r['p']:.3g}\t"
                  f"{r['p_holm']:.3g}\t{r['df'] if r['df'] is None else round(r['df'], 1)}")
        return
    print("A\tB\tquestions\tk\tonly A\tonly B\tp (sign test)\tp (Holm, all rows)")
    for r in family(pairs, args.ks):
        print(f"{r['A']}\t{r['B']}\t{r['questions']}\t{r['k']}\t{r['only_A']}\t{r['only_B']}\t{r['p']:.3g}\t"
              f"{r['p_holm']:.3g}")


if __name__ == "__main__":
    main()
