"""The demo's retrievers on SQuAD written as a BEIR collection (issue 42): nDCG@10, RR@10 and
R@100 against its answer-match qrels, with ir_measures, Success@k checked against the runs'
own answer-match top-k, and the page's comparisons paired question by question on nDCG@10.

Each SQuAD test set of the config (squad-a, squad-b) is converted by
workflow/scripts/squad_to_beir.py with the options its prepare_squad job had (the queries are
checked to be the test set's questions, in order, and the corpus the run's passages); every BM25,
dense and hybrid run of a finished demo is then scored on it (dcsr.pipeline.squad_beir). Nothing
is retrieved again: it reads the runs.

    python benchmarks/beir/squad_beir.py --results results [--config config/config.yaml] \
        --out benchmarks/out/beir [--seed 0]

Prints the table and the paired comparisons (Markdown: DCSR against DPR of the same group, every
run against BM25, zero-shot against in-domain; the claims ledger's paired bootstrap interval and
sign test, Holm over all of them) and writes them with the BEIR folders, squad_beir.md and
squad_beir.json (every measure and comparison, the machine, the commands) under --out. Exits 1
when a run's Success@k is not its answer-match top-k (k = 1, 20, 100).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from dataclasses import asdict
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True, help="a finished demo's results folder (read only)")
    ap.add_argument("--config", default=str(REPO / "config" / "config.yaml"), help="the config that made it")
    ap.add_argument("--out", required=True, help="where the BEIR folders and the table go")
    ap.add_argument("--seed", type=int, default=0, help="the paired bootstrap's seed (default 0)")
    a = ap.parse_args()

    sys.path.insert(0, str(REPO / "benchmarks"))  # benchmarks/, for benchmarks_common
    from benchmarks_common import machine

    from dcsr.pipeline.squad_beir import (comparisons_table, load_plan, markdown_table, paired_comparisons,
                                          score_on_squad_beir, success_differs_from_top_k, ties_moved)

    out = Path(a.out)
    plan = load_plan(a.config, a.results, REPO)
    test_sets, rows = score_on_squad_beir(plan, out / "collections")
    table = markdown_table(rows)
    moved = ties_moved(rows)
    notes = [f"- {r.retriever} on {r.dataset}: {m} {ours:.2f} in the run's ranking, {theirs:.2f} by its scores as "
             f"trec_eval reads them (equal ones, to float32, by docid)" for r, m, ours, theirs in moved]
    problems = success_differs_from_top_k(rows)
    checked = (f"Success@1/20/100 = answer-match top-1/20/100 for all {len(rows)} runs (to 1e-9)" if not problems else
               "Success@k is NOT answer-match top-k:\n" + "\n".join(problems))
    comparisons = paired_comparisons(rows, plan.config["models"], seed=a.seed)
    text = (table + "\n" + checked + "\n" + ("\n".join(notes) + "\n" if notes else "") + "\n"
            + comparisons_table(comparisons, seed=a.seed))
    print(text, end="")
    out.mkdir(parents=True, exist_ok=True)
    (out / "squad_beir.md").write_text(text, encoding="utf-8")
    record = {"date": date.today().isoformat(), "machine": machine(), "results": str(a.results), "config": a.config,
              "collections": {d: {"folder": str(t.folder), "queries": len(t.query_ids),
                                  "command": shlex.join(t.command)} for d, t in test_sets.items()},
              "runs": [{"retriever": r.retriever, "dataset": r.dataset, "trained_on": r.trained_on,
                        "relation": r.relation, "run": r.run, "measured": r.measured, "top_k": r.top_k,
                        "by_score": r.by_score} for r in rows],
              "success_is_top_k": not problems, "problems": problems,
              "paired": {"measure": "nDCG@10", "seed": a.seed,
                         "comparisons": [{"kind": c.kind, "dataset": c.dataset, "baseline": c.baseline,
                                          "other": c.other, **asdict(c.comparison), "p_holm": c.p_holm,
                                          "reading": c.reading} for c in comparisons]}}
    (out / "squad_beir.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
