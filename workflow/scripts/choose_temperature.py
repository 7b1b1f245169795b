"""Choose DCSR's HasAns temperature for one (question encoder, passage encoder, test set) on the
dev questions of the test set's dataset (``dcsr.temperature: dev``): every temperature of a
grid of powers of 2 around the paper's 1 ranks the dev questions' sentence hits, and the one
with the best mean top-k answer recall is written as JSON, with the whole grid."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.data.variants import check_dev_disjoint
from dcsr.fsutil import atomic_open
from dcsr.retrieval.hasans import choose_temperature
from dcsr.evaluation.metrics import DEFAULT_KS


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("shards", nargs="+", help="per-shard .npz sentence hits of the dev questions")
    ap.add_argument("--questions", required=True, help="DPR qas TSV of the dev questions")
    ap.add_argument("--test-questions", help="DPR qas TSV of the test questions: none may be a dev question")
    ap.add_argument("--own-dev-split", action="store_true",
                    help="the dev questions are the dataset's own split: an overlap is logged, not refused")
    ap.add_argument("--corpus", required=True, help="DPR passage TSV or its passage store directory")
    ap.add_argument("--ks", default=",".join(map(str, DEFAULT_KS)))
    ap.add_argument("--k", type=int, default=100, help="passages ranked")
    ap.add_argument("--match", choices=["string", "regex"], default="string")
    ap.add_argument("--output", required=True, help="the choice (JSON)")
    a = ap.parse_args()
    if a.test_questions:
        check_dev_disjoint(a.questions, a.test_questions, refuse=not a.own_dev_split)
    ks = [int(k) for k in a.ks.split(",")]
    choice = choose_temperature(a.shards, a.questions, a.corpus, ks, a.match, k_passages=a.k)
    with atomic_open(a.output, "w", encoding="utf-8") as fh:
        json.dump(choice, fh, indent=1)
        fh.write("\n")
    logging.info("temperature %g (%s): %s", choice["temperature"], choice["criterion"],
                 ", ".join(f"T={t}: {r['mean']:.1f}" for t, r in choice["grid"].items()))


if __name__ == "__main__":
    main()
