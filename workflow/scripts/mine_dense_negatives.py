"""Replace the hard negatives of a DPR biencoder JSON with those a trained bi-encoder retrieves
from its shard indexes of the corpus (top hits without an answer, not positives; a DCSR
miner's negatives name their sentence)."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.retrieval.mining import mine_dense_negatives


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="the miner: a bi-encoder directory")
    ap.add_argument("--train", required=True, help="DPR biencoder JSON (training set)")
    ap.add_argument("--corpus", required=True, help="DPR corpus TSV the shards were embedded from")
    ap.add_argument("--shard", nargs=3, action="append", required=True, metavar=("INDEX", "IDS", "SENTENCES"),
                    help="a shard's FAISS index, passage ids and sentence numbers (.npy); repeat for every shard")
    ap.add_argument("--output", required=True, help="biencoder JSON to write")
    ap.add_argument("--negatives", type=int, default=30, help="hard negatives kept per question")
    ap.add_argument("--depth", type=int, default=100, help="hits searched per question (DCSR miner: sentences)")
    ap.add_argument("--match-type", choices=["string", "regex"], default="string")
    ap.add_argument("--batch-size", type=int, default=128, help="questions per encoder batch")
    ap.add_argument("--gpu", choices=["auto", "true", "false", "torch"], default="auto",
                    help="where the shard indexes are searched (index.gpu): auto, true (faiss-gpu), false (faiss on the CPU), "
                         "torch (Flat indexes in torch on CUDA)")
    ap.add_argument("--device", default="auto", help="question encoder device")
    ap.add_argument("--search-params", default="",
                    help="FAISS ParameterSpace string set on each shard index, such as nprobe=64 (index.search_params)")
    a = ap.parse_args()
    gpu = {"auto": "auto", "true": True, "false": False, "torch": "torch"}[a.gpu]
    stats = mine_dense_negatives(a.model, a.train, a.corpus, [tuple(s) for s in a.shard], a.output,
                                 n_negatives=a.negatives, depth=a.depth, match_type=a.match_type,
                                 batch_size=a.batch_size, use_gpu=gpu, device=a.device,
                                 search_params=a.search_params)
    logging.info("done: %s", json.dumps(stats))


if __name__ == "__main__":
    main()
