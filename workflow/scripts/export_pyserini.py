#!/usr/bin/env python
"""Export a passage encoder's shard indexes of a corpus as one Pyserini dense index (see
dcsr.retrieval.pyserini_export): ``index`` (FAISS) and ``docid`` (passage ids; DCSR:
``<passage id>#<sentence number>``), and for a DPR model its question encoder in the form
Pyserini's DprQueryEncoder / AutoQueryEncoder load:

    python workflow/scripts/export_pyserini.py --index results/index/nq/dpr/shard-{0,1}.faiss \\
        --ids results/embeddings/nq/dpr/shard-{0,1}.ids.npy --model results/models/dpr \\
        --output results/export/pyserini/nq/dpr [--sentence-numbers ...sents.npy] [--name dpr --corpus nq]

Shards that do not merge (several of a factory other than Flat) print ``error: config:
index.factory: ...`` and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys

from dcsr.cli import script


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", nargs="+", required=True, help="the shard indexes (.faiss), in shard order")
    ap.add_argument("--ids", nargs="+", required=True, help="their passage ids (.ids.npy), in the same order")
    ap.add_argument("--sentence-numbers", nargs="+", default=None,
                    help="DCSR: their sentence numbers (.sents.npy), in the same order")
    ap.add_argument("--model", default=None, help="the saved bi-encoder (results/models/<pmodel>): its method, "
                                                  "and its question encoder, written beside the index")
    ap.add_argument("--output", required=True, help="the folder to write (results/export/pyserini/<corpus>/<pmodel>)")
    ap.add_argument("--name", default=None, help="the model's name, for messages and export.json")
    ap.add_argument("--corpus", default=None, help="the corpus's name, for export.json")
    ap.add_argument("--search-params", default="", help="index.search_params, set on a single shard's index")
    ap.add_argument("--doc-ids", default=None, help="a BEIR corpus's beir-doc-ids.tsv: docid names each document "
                                                    "by its _id, as the collection's qrels do")
    args = ap.parse_args(argv)
    sents = args.sentence_numbers or [None] * len(args.index)
    if not len(args.index) == len(args.ids) == len(sents):
        ap.error(f"{len(args.index)} --index, {len(args.ids)} --ids and {len(sents)} --sentence-numbers files: "
                 "give one of each per shard")
    from dcsr.retrieval.pyserini_export import export_pyserini

    method = None if args.model else ("dcsr" if args.sentence_numbers else "dpr")  # None: the model's
    info = export_pyserini(list(zip(args.index, args.ids, sents)), args.output, args.model, method=method,
                           name=args.name, corpus=args.corpus, search_params=args.search_params,
                           doc_ids=args.doc_ids)
    encoder = info["query_encoder"]
    print(f"exported {info['vectors']} vectors of {info['model']} to {args.output} ({info['merge']}); query encoder: "
          f"{encoder['class'] if encoder else 'none (' + info['no_query_encoder'] + ')'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
