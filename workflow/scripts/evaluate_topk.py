"""Top-k answer recall of a TREC run with DPR's matching rules."""
import argparse

from dcsr.cli import script
from dcsr.evaluation.metrics import evaluate_run


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--run", required=True)
    ap.add_argument("--questions", required=True, help="DPR qas TSV")
    ap.add_argument("--corpus", required=True, help="DPR passage TSV, or its passage store (a directory: dcsr.data.passage_store)")
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--per-question", default=None)
    ap.add_argument("--ks", default="1,5,20,100")
    ap.add_argument("--match", choices=["string", "regex"], default="string")
    ap.add_argument("--gold", default=None, help="DPR dev JSON whose questions these are: MRR, nDCG and recall against "
                                                 "its gold passages too")
    a = ap.parse_args()
    ks = [int(k) for k in a.ks.split(",")]
    evaluate_run(a.run, a.questions, a.corpus, a.metrics, a.per_question, ks=ks, match_type=a.match, gold_json=a.gold)


if __name__ == "__main__":
    main()
