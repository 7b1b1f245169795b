"""Choose linear fusion's dense weight for one (question encoder, passage encoder, test set) on
the dev questions of the test set's dataset: every weight of a grid fuses BM25's and the dense
run of the dev questions, and the one with the best mean top-k answer recall is written as
JSON, with the whole grid."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.data.variants import check_dev_disjoint
from dcsr.fsutil import atomic_open
from dcsr.retrieval.fusion import choose_weight_of_runs
from dcsr.evaluation.metrics import DEFAULT_KS


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bm25", required=True, help="BM25's TREC run of the dev questions")
    ap.add_argument("--dense", required=True, help="the dense TREC run of the dev questions")
    ap.add_argument("--questions", required=True, help="DPR qas TSV of the dev questions")
    ap.add_argument("--test-questions", help="DPR qas TSV of the test questions: none may be a dev question")
    ap.add_argument("--own-dev-split", action="store_true",
                    help="the dev questions are the dataset's own split: an overlap is logged, not refused")
    ap.add_argument("--corpus", required=True, help="DPR passage TSV or its passage store directory")
    ap.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)))
    ap.add_argument("--match", choices=["string", "regex"], default="string")
    ap.add_argument("--output", required=True, help="the choice (JSON)")
    a = ap.parse_args()
    if a.test_questions:
        check_dev_disjoint(a.questions, a.test_questions, refuse=not a.own_dev_split)
    ks = [int(k) for k in a.ks.split(",")]
    choice = choose_weight_of_runs(a.bm25, a.dense, a.questions, a.corpus, ks, a.match)
    with atomic_open(a.output, "w", encoding="utf-8") as fh:
        json.dump(choice, fh, indent=1)
        fh.write("\n")
    logging.info("dense weight %g (%s): %s", choice["weight"], choice["criterion"],
                 ", ".join(f"w={w}: {r['mean']:.1f}" for w, r in choice["grid"].items()))


if __name__ == "__main__":
    main()
