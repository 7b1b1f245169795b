#!/usr/bin/env python
"""Add BM25 hard negatives (top passages without an answer, not positives) to a DPR biencoder JSON."""

from __future__ import annotations

import argparse
import json
import sys

from dcsr.retrieval.bm25 import B, K1, mine_hard_negatives
from dcsr.cli import script


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--train", required=True, help="DPR biencoder JSON (training set)")
    ap.add_argument("--corpus", required=True, help="DPR corpus TSV the index was built from")
    ap.add_argument("--index", required=True, help="BM25 index directory (index_bm25.py)")
    ap.add_argument("--output", required=True, help="biencoder JSON to write")
    ap.add_argument("--negatives", type=int, default=30, help="hard negatives kept per question")
    ap.add_argument("--depth", type=int, default=100, help="BM25 hits searched per question")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--match-type", default="string", choices=["string", "regex"])
    ap.add_argument("--keep-existing", action="store_true",
                    help="keep the hard negatives of records that already have some (default: replace)")
    ap.add_argument("--k1", type=float, default=K1)
    ap.add_argument("--b", type=float, default=B)
    ap.add_argument("--memory", default=None, help="JVM heap, e.g. 4g (default: $DCSR_JAVA_MEMORY or 2g)")
    args = ap.parse_args(argv)
    stats = mine_hard_negatives(args.train, args.corpus, args.index, args.output, n_negatives=args.negatives,
                                depth=args.depth, threads=args.threads, match_type=args.match_type,
                                keep_existing=args.keep_existing, k1=args.k1, b=args.b, memory=args.memory)
    print(json.dumps(stats), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
