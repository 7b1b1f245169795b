"""Where a retriever's wrong top-1 passages come from on the generated demo data (not a test).

The generator knows each test question's gold passage and entity; this sorts every question
whose top-1 hit is wrong into: another passage of the same entity, a *namesake's* passage
(another entity with the same name), or another entity's passage (stating the asked relation
or not). It also sorts the first hard negatives of a mined training file the same way.

    python benchmarks/generated-demo/demo_error_analysis.py --results results --run untrained --dataset encyclopedia \\
        [--negatives results/bm25/negatives/encyclopedia-train.json] [--config config/generated.yaml]

``--run`` names a (question encoder = passage encoder) run under ``results/metrics/<corpus>/``.
The demo is regenerated in memory from the config's ``corpora.<corpus>.generate`` and ``seed``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from dcsr.fixtures.synth import DEFAULT_DOMAINS, build_demo
from dcsr.yamlutil import strict_load


def kind(passage, gold, entities) -> str:
    if passage.entity == gold.entity:
        return "same entity, other passage"
    if entities[passage.entity].name == entities[gold.entity].name:
        return "namesake"
    return "other entity"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results")
    ap.add_argument("--config", default="config/generated.yaml")
    ap.add_argument("--corpus", default="demo")
    ap.add_argument("--run", required=True, help="model name (question and passage encoder)")
    ap.add_argument("--dataset", default="encyclopedia")
    ap.add_argument("--negatives", help="a mined training file (DPR biencoder JSON) of the same dataset")
    args = ap.parse_args()

    cfg = strict_load(Path(args.config))
    gen = dict(cfg["corpora"][args.corpus]["generate"])
    domain = cfg["datasets"][args.dataset]["generated"]
    data = build_demo(seed=cfg["seed"], domains=DEFAULT_DOMAINS, **gen)
    passages = {p.id: p for p in data.passages}
    ents = data.entities

    test = {q.question: q for q in data.questions[domain]["test"]}
    path = f"{args.results}/metrics/{args.corpus}/{args.run}/{args.run}/{args.dataset}.questions.jsonl"
    counts: Counter = Counter()
    with open(path, encoding="utf-8") as fh:
        for r in map(json.loads, fh):
            q = test[r["question"]]
            if r["first_hit"] == 1:
                counts["right"] += 1
                continue
            top, gold = passages[r["hits"][0]], passages[q.passage_id]
            k = kind(top, gold, ents)
            if k == "other entity":
                k += ", states the asked relation" if q.relation in {f.relation for f in top.facts} else ", other relations"
            counts[k] += 1
    print(f"{args.run} on {args.dataset} ({sum(counts.values())} questions), top-1:")
    for k, n in counts.most_common():
        print(f"  {k:45s} {n}")
    namesakes = [sum(1 for p in data.passages if ents[p.entity].name == ents[q.entity].name) for q in test.values()]
    print(f"  passages sharing the question's name: {sum(namesakes) / len(namesakes):.2f} on average")

    if args.negatives:
        train = {q.question: q for q in data.questions[domain]["train"]}
        neg: Counter = Counter()
        for rec in json.load(open(args.negatives, encoding="utf-8")):
            hard = rec.get("hard_negative_ctxs") or []
            if hard and rec["question"] in train:
                gold = passages[train[rec["question"]].passage_id]
                neg[kind(passages[int(hard[0]["passage_id"])], gold, ents)] += 1
        total = sum(neg.values())
        print(f"first hard negative of {total} training questions ({args.negatives}):")
        for k, n in neg.most_common():
            print(f"  {k:45s} {n} ({100 * n / total:.0f}%)")


if __name__ == "__main__":
    main()
