"""Answer-match qrels of a test set pooled over runs (TREC pooling): every passage that some run
retrieved within the depth is judged (1 when it holds an answer by DPR's matching, else 0), so
that all runs' standard measures use the same judgments (dcsr.evaluation.trec_eval.pooled_qrels).

    python workflow/scripts/pool_qrels.py --depth 100 --qrels X.qrels --info X.pool.json RUN.questions.jsonl ...
"""
import argparse

from dcsr.cli import script
from dcsr.evaluation.trec_eval import pool_answer_match_qrels


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="the runs' per-question results (*.questions.jsonl)")
    ap.add_argument("--depth", type=int, required=True, help="hits judged per question and run")
    ap.add_argument("--qrels", required=True, help="the pooled qrels (trec_eval's format)")
    ap.add_argument("--info", required=True, help="JSON: the pool's depth, runs and counts")
    a = ap.parse_args()
    pool_answer_match_qrels(a.runs, a.depth, a.qrels, a.info)


if __name__ == "__main__":
    main()
