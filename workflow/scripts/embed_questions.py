"""Encode the questions of a DPR qas TSV with a question encoder into ``.npy``."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.embed import embed_questions, qas_questions


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", required=True, help="bi-encoder directory (question_encoder/ inside)")
    ap.add_argument("--questions", required=True, help="DPR qas TSV")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--vectors", required=True)
    a = ap.parse_args()
    stats = embed_questions(a.model, qas_questions(a.questions), a.vectors, batch_size=a.batch_size, device=a.device)
    logging.info("done: %s", json.dumps(stats))


if __name__ == "__main__":
    main()
