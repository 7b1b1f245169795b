#!/usr/bin/env python
"""Build a BM25 (Lucene/Anserini) index of a DPR corpus TSV."""

from __future__ import annotations

import argparse
import sys

from dcsr.retrieval.bm25 import build_index
from dcsr.cli import script


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--corpus", required=True, help="DPR corpus TSV (id, text, title; .gz ok)")
    ap.add_argument("--index", required=True, help="output index directory (written atomically)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--memory", default=None, help="JVM heap, e.g. 4g (default: $DCSR_JAVA_MEMORY or 2g)")
    args = ap.parse_args(argv)
    build_index(args.corpus, args.index, threads=args.threads, memory=args.memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
