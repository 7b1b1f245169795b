"""Write a corpus's passage store (passages.jsonl, ids.npy, offsets.npy) for random access by
id: scoring a run then reads only the passages it retrieved (dcsr.data.passage_store)."""
import argparse
import logging

from dcsr.cli import script
from dcsr.data.passage_store import build_store


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", required=True, help="DPR passage TSV (id, text, title; .gz read too)")
    ap.add_argument("--output", required=True, help="the store's directory")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    a = ap.parse_args()
    n = build_store(a.corpus, a.output, progress=not a.no_progress)
    logging.info("stored %d passages of %s in %s", n, a.corpus, a.output)


if __name__ == "__main__":
    main()
