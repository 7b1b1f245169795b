"""Paired comparison of two retrievers on the same test questions (not a test).

Reads the per-question results that `evaluate_topk` writes (``*.questions.jsonl``: the rank of
each question's first answer-bearing passage) and, for each k, counts the questions only A
finds in its top k and those only B finds, with a two-sided exact sign test on those
discordant pairs (the questions both or neither find carry no information).

    python benchmarks/paired_compare.py A.questions.jsonl B.questions.jsonl [--ks 1 5 20 100]

More than one pair (``A1 B1 A2 B2 ...``, e.g. one per test set) also prints the test pooled
over all pairs' questions.
"""

from __future__ import annotations

import argparse
import json

from scipy.stats import binomtest


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


def _table(a: dict, b: dict, ks) -> None:
    print("k\tonly A\tonly B\tp (two-sided sign test)")
    for k in ks:
        w, l, p = compare(a, b, k)
        print(f"{k}\t{w}\t{l}\t{p:.3g}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="A B", help="pairs of *.questions.jsonl: A1 B1 [A2 B2 ...]")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 5, 20, 100])
    args = ap.parse_args()
    if len(args.files) % 2:
        ap.error("give the files in pairs: A1 B1 [A2 B2 ...]")
    pooled_a, pooled_b = {}, {}
    for i in range(0, len(args.files), 2):
        a, b = first_hits(args.files[i]), first_hits(args.files[i + 1])
        print(f"A = {args.files[i]}\nB = {args.files[i + 1]}\n{len(a)} questions")
        _table(a, b, args.ks)
        pooled_a.update({(i, q): r for q, r in a.items()})
        pooled_b.update({(i, q): r for q, r in b.items()})
    if len(args.files) > 2:
        print(f"pooled over the {len(args.files) // 2} pairs: {len(pooled_a)} questions")
        _table(pooled_a, pooled_b, args.ks)


if __name__ == "__main__":
    main()
