"""Write a subset of a DPR passage TSV: the first N passages, or a seeded random sample of a
fraction of them (exact size), ids and order kept; the source is streamed twice, never loaded."""
import argparse

from dcsr.cli import script
from dcsr.data.subsets import write_corpus_subset


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", required=True, help="DPR passage TSV (.tsv or .tsv.gz)")
    ap.add_argument("--output", required=True, help="subset TSV to write")
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--first", type=int, help="keep the first N passages")
    how.add_argument("--fraction", type=float, help="keep round(fraction x passages) drawn at random")
    ap.add_argument("--seed", type=int, help="seed of the random sample (with --fraction)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    a = ap.parse_args()
    write_corpus_subset(a.corpus, a.output, first=a.first, fraction=a.fraction, seed=a.seed, progress=not a.no_progress)


if __name__ == "__main__":
    main()
