"""Encode the questions of DPR qas TSVs with one question encoder (loaded once) into ``.npy``."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.retrieval.embed import embed_question_sets, qas_questions


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="bi-encoder directory (question_encoder/ inside)")
    ap.add_argument("--set", nargs=2, action="append", required=True, metavar=("QAS_TSV", "VECTORS_NPY"),
                    help="a DPR qas TSV and where its question vectors go (repeat for more sets)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precision", default="fp32", help="compute precision: auto, fp32, bf16, fp16 (dcsr.models.precision)")
    a = ap.parse_args()
    sets = [(qas_questions(qas), out) for qas, out in a.set]
    for stats in embed_question_sets(a.model, sets, batch_size=a.batch_size, device=a.device,
                                     precision=a.precision):
        logging.info("done: %s", json.dumps(stats))


if __name__ == "__main__":
    main()
