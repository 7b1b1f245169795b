"""Split every passage of a DPR corpus TSV into sentences: write the sentence table
(``passage_id, sentence, start, end``; character offsets into the passage text)."""
import argparse
import json
import logging

from dcsr.cli import script
from dcsr.fsutil import atomic_open
from dcsr.data.sentences import DEFAULT_SPLITTER, SPLITTERS, split_corpus


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", required=True, help="DPR passage TSV (id, text, title; .gz read too)")
    ap.add_argument("--output", required=True, help="sentence table TSV to write")
    # Not argparse choices: an unknown name is reported by dcsr.data.sentences as one error line.
    ap.add_argument("--splitter", default=DEFAULT_SPLITTER, help=f"one of {', '.join(SPLITTERS)} (default {DEFAULT_SPLITTER})")
    ap.add_argument("--stats", help="also write the statistics (passages, sentences per passage) as JSON here")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    a = ap.parse_args()
    stats = split_corpus(a.corpus, a.output, splitter=a.splitter, progress=not a.no_progress)
    if a.stats:
        with atomic_open(a.stats, "w", encoding="utf-8") as fh:
            json.dump(stats, fh, indent=1)
            fh.write("\n")
    logging.info("done: %s", json.dumps(stats))


if __name__ == "__main__":
    main()
