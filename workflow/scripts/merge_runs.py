"""Merge per-shard top-k hits exactly into one TREC run, then score it (top-k answer recall
with DPR's matching rules). DCSR (``--hasans``): the hits are sentences; all shards' top
sentences are merged exactly, softmax-normalised and turned into a passage ranking by HasAns
(Section 3.3), of which the top k passages are kept."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.evaluation.metrics import evaluate_run
from dcsr.retrieval.index import merge_shard_hits, topk_to_run
from dcsr.data.runs import write_trec


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("shards", nargs="+", help="per-shard .npz hits")
    ap.add_argument("--output", required=True, help="the TREC run")
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--tag", default="dense")
    ap.add_argument("--hasans", action="store_true", help="DCSR: sentence hits -> passages by HasAns")
    ap.add_argument("--temperature", type=float, default=1.0, help="DCSR: softmax temperature (official: 1)")
    ap.add_argument("--temperature-file", default=None, help="DCSR: the temperature chosen on dev questions "
                                                              "(choose_temperature.py's JSON); overrides --temperature")
    ap.add_argument("--questions", help="DPR qas TSV of the run's questions (to score the run)")
    ap.add_argument("--corpus", help="DPR passage TSV or its passage store directory (to score the run)")
    ap.add_argument("--metrics", help="write the run's top-k answer recall here (JSON)")
    ap.add_argument("--per-question", default=None, help="and every question's hits here (JSONL)")
    ap.add_argument("--ks", default="1,5,20,100")
    ap.add_argument("--match", choices=["string", "regex"], default="string")
    ap.add_argument("--gold", default=None, help="DPR dev JSON whose questions these are: MRR, nDCG and recall against "
                                                 "its gold passages too")
    a = ap.parse_args()
    if a.metrics and not (a.questions and a.corpus):
        ap.error("--metrics needs --questions and --corpus")
    if a.temperature_file:
        from dcsr.errors import InputError

        try:
            with open(a.temperature_file, encoding="utf-8") as fh:
                a.temperature = float(json.load(fh)["temperature"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputError(a.temperature_file, f"cannot read the chosen temperature: {e}")
    if a.hasans:
        from dcsr.retrieval.hasans import merge_sentence_hits

        logging.info("HasAns temperature %g%s", a.temperature, " (chosen on dev)" if a.temperature_file else "")
        scores, ids = merge_sentence_hits(a.shards, a.k, a.temperature)
    else:
        scores, ids = merge_shard_hits(a.shards, a.k)
    write_trec(a.output, topk_to_run(scores, ids), tag=a.tag)
    logging.info("merged %d shards, %d questions", len(a.shards), len(ids))
    if a.metrics:
        ks = [int(k) for k in a.ks.split(",")]
        about = {"hasans_temperature": a.temperature} if a.hasans else {}
        evaluate_run(a.output, a.questions, a.corpus, a.metrics, a.per_question, ks=ks, match_type=a.match,
                     about=about, gold_json=a.gold)


if __name__ == "__main__":
    main()
