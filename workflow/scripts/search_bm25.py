#!/usr/bin/env python
"""BM25 top-k for every question of a DPR qas TSV, written as a TREC run (qid = 0-based line index)."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from dcsr.retrieval.bm25 import B, K1, search_to_run
from dcsr.cli import script
from dcsr.data.formats import iter_qas, output_folder
from dcsr.data.runs import read_trec, write_trec


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--index", required=True, help="BM25 index directory (index_bm25.py)")
    ap.add_argument("--questions", required=True, help="DPR qas TSV (question<TAB>[answers])")
    ap.add_argument("--output", required=True, help="TREC run to write")
    ap.add_argument("--k", type=int, default=100, help="hits per question")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--k1", type=float, default=K1)
    ap.add_argument("--b", type=float, default=B)
    ap.add_argument("--memory", default=None, help="JVM heap, e.g. 4g (default: $DCSR_JAVA_MEMORY or 2g)")
    args = ap.parse_args(argv)
    log = logging.getLogger("search_bm25")
    questions = [qa.question for qa in iter_qas(args.questions)]
    log.info("%s: %d questions", args.questions, len(questions))
    # Anserini writes the run (best first, ties broken by docid); re-write it through
    # dcsr.data.runs so that every run file of the pipeline has the same format and tag.
    out_dir = Path(args.output).resolve().parent
    with output_folder(out_dir), tempfile.TemporaryDirectory(prefix=".bm25-run.", dir=out_dir) as tmp:
        raw = Path(tmp) / "anserini.trec"
        search_to_run(args.index, enumerate(questions), raw, k=args.k, threads=args.threads,
                      k1=args.k1, b=args.b, memory=args.memory)
        run = read_trec(raw)
    # every question is in the run; one without hits as a '# no hits' line (dcsr.data.runs)
    empty = len(questions) - sum(1 for q in range(len(questions)) if run.get(q))
    write_trec(args.output, {q: run.get(q, []) for q in range(len(questions))}, tag="bm25")
    if empty:
        log.warning("%d of %d questions got no BM25 hit", empty, len(questions))
    return 0


if __name__ == "__main__":
    sys.exit(main())
