"""Fuse BM25's run with a dense run of the same questions (linear fusion with a weight chosen on
dev, or reciprocal rank fusion), write the hybrid TREC run and score it with DPR's matching."""
import argparse

from dcsr.cli import chosen_value, script
from dcsr.data.runs import read_trec, write_trec
from dcsr.evaluation.metrics import add_scoring_arguments, score_from_arguments
from dcsr.retrieval.fusion import FUSIONS, fuse_runs


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bm25", required=True, help="BM25's TREC run")
    ap.add_argument("--dense", required=True, help="the dense TREC run of the same questions")
    ap.add_argument("--fusion", choices=FUSIONS, required=True)
    ap.add_argument("--weight-file", default=None, help="linear: choose_fusion_weight's JSON")
    ap.add_argument("--k", type=int, default=100, help="passages kept per question")
    ap.add_argument("--output", required=True, help="the hybrid TREC run")
    add_scoring_arguments(ap)
    a = ap.parse_args()
    about = {"fusion": a.fusion}
    weight = None
    if a.fusion == "linear":
        if a.weight_file is None:
            ap.error("--fusion linear needs --weight-file")
        weight = about["fusion_weight"] = chosen_value(a.weight_file, "weight")
    fused = fuse_runs(read_trec(a.bm25), read_trec(a.dense), a.fusion, weight, a.k)
    write_trec(a.output, fused, tag=f"hybrid-{a.fusion}")
    score_from_arguments(a, a.output, about)


if __name__ == "__main__":
    main()
