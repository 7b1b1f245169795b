"""Encode one corpus shard with a passage encoder: ``.npy`` vectors, ``.ids.npy`` passage ids
and ``.sents.npy`` sentence numbers (DCSR: one vector per sentence; DPR: one per passage, -1)."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.models.precision import kind_key
from dcsr.fsutil import atomic_open
from dcsr.retrieval.embed import embed_corpus_shard
from dcsr.settings import EMBED_BACKENDS


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="bi-encoder directory (passage_encoder/ inside)")
    ap.add_argument("--corpus", required=True, help="DPR passage TSV, or its passage store (a directory: only the shard is read)")
    ap.add_argument("--shard", type=int, required=True)
    ap.add_argument("--num-shards", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=None)
    ap.add_argument("--fp16", action="store_true", help="store float16 vectors (the compute precision is --precision's)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32", help="compute precision: auto, fp32, bf16, fp16 (dcsr.models.precision)")
    ap.add_argument("--backend", default="torch", choices=EMBED_BACKENDS,
                    help="runtime of the passage encoder (dcsr.models.onnx_int8, dcsr.models.openvino_encoder)")
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--ids", required=True)
    ap.add_argument("--sentence-numbers", default=None, help="output: sentence number of each vector (.npy)")
    ap.add_argument("--sentences", default=None, help="DCSR: the corpus's sentence table")
    ap.add_argument("--stats", default=None, help="output: the shard's stats and kind (.json; dcsr.evaluation.pins)")
    a = ap.parse_args()
    stats = embed_corpus_shard(a.model, a.corpus, a.shard, a.num_shards, a.vectors, a.ids,
                               batch_size=a.batch_size, max_length=a.max_length, fp16=a.fp16, device=a.device,
                               sentences=a.sentences, out_sentences=a.sentence_numbers, precision=a.precision,
                               backend=a.backend)
    stats["kind"] = kind_key(stats["device"], stats["precision"], stats["backend"], stats["device_name"])
    logging.info("done: %s", json.dumps(stats))
    if a.stats:
        with atomic_open(a.stats, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, indent=1)


if __name__ == "__main__":
    main()
