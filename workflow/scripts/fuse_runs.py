"""Fuse BM25's run with a dense run of the same questions (linear fusion with a weight chosen on
dev, or reciprocal rank fusion), write the hybrid TREC run and score it with DPR's matching."""
import argparse
import json

from dcsr.cli import script
from dcsr.data.runs import read_trec, write_trec
from dcsr.evaluation.metrics import evaluate_run
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
    ap.add_argument("--questions", required=True, help="DPR qas TSV")
    ap.add_argument("--corpus", required=True, help="DPR passage TSV or its passage store directory")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--per-question", default=None)
    ap.add_argument("--ks", default="1,5,20,100")
    ap.add_argument("--match", choices=["string", "regex"], default="string")
    ap.add_argument("--gold", default=None, help="DPR dev JSON whose questions these are: MRR, nDCG and recall against "
                                                 "its gold passages too")
    a = ap.parse_args()
    about = {"fusion": a.fusion}
    weight = None
    if a.fusion == "linear":
        if a.weight_file is None:
            ap.error("--fusion linear needs --weight-file")
        with open(a.weight_file, encoding="utf-8") as fh:
            weight = float(json.load(fh)["weight"])
        about["fusion_weight"] = weight
    fused = fuse_runs(read_trec(a.bm25), read_trec(a.dense), a.fusion, weight, a.k)
    write_trec(a.output, fused, tag=f"hybrid-{a.fusion}")
    evaluate_run(a.output, a.questions, a.corpus, a.metrics, a.per_question, ks=[int(k) for k in a.ks.split(",")],
                 match_type=a.match, about=about, gold_json=a.gold)


if __name__ == "__main__":
    main()
