"""Merge per-shard top-k hits exactly into one TREC run, then score it (top-k answer recall
with DPR's matching rules). DCSR (``--hasans``): the hits are sentences; all shards' top
sentences are merged exactly, softmax-normalised and turned into a passage ranking by HasAns
(Section 3.3), of which the top k passages are kept. The shards' embedding stats
(``--shard-stats``) must record one precision, backend and kind (dcsr.retrieval.shard_kinds)."""
import argparse
import logging

from dcsr.cli import chosen_value, script
from dcsr.evaluation.metrics import add_scoring_arguments, score_from_arguments
from dcsr.retrieval.index import merge_shard_hits, topk_to_run
from dcsr.retrieval.shard_kinds import check_one_kind
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
    ap.add_argument("--shard-stats", nargs="+", default=[], help="every shard's shard-<n>.json (embed_shard.py "
                    "--stats): shards embedded as different kinds are refused")
    add_scoring_arguments(ap, required=False)  # without --metrics the run is written, not scored
    a = ap.parse_args()
    if a.metrics and not (a.questions and a.corpus):
        ap.error("--metrics needs --questions and --corpus")
    if a.shard_stats:
        logging.info("shards embedded as %s", check_one_kind(a.shard_stats))
    if a.temperature_file:
        a.temperature = chosen_value(a.temperature_file, "temperature")
    if a.hasans:
        from dcsr.retrieval.hasans import merge_sentence_hits

        logging.info("HasAns temperature %g%s", a.temperature, " (chosen on dev)" if a.temperature_file else "")
        scores, ids = merge_sentence_hits(a.shards, a.k, a.temperature)
    else:
        scores, ids = merge_shard_hits(a.shards, a.k)
    write_trec(a.output, topk_to_run(scores, ids), tag=a.tag)
    logging.info("merged %d shards, %d questions", len(a.shards), len(ids))
    if a.metrics:
        score_from_arguments(a, a.output, about={"hasans_temperature": a.temperature} if a.hasans else {})


if __name__ == "__main__":
    main()
