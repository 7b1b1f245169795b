"""A BEIR-format folder as the pipeline's data (dcsr.data.beir).

``corpus``: corpus.jsonl as DPR's passage TSV (integer ids 0, 1, ... in file order) and the
mapping back to the documents' _ids. ``queries``: the queries that qrels/<split>.tsv judges, as
the pipeline's question file (a ``.queries.tsv``: no answers), their _ids, and the qrels with
the original ids in trec_eval's format. ``run``: a run of such a test set with its original
query and document ids, for the collection's own qrels and tools.
"""
import argparse
import logging

from dcsr.cli import script
from dcsr.data.beir import convert_corpus, convert_queries, write_original_id_run


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("corpus", help="corpus.jsonl -> passage TSV and id mapping")
    c.add_argument("--folder", required=True, help="the BEIR folder")
    c.add_argument("--corpus-out", required=True, help="DPR passage TSV")
    c.add_argument("--ids-out", required=True, help="passage id -> document _id (TSV)")
    q = sub.add_parser("queries", help="queries.jsonl + qrels/<split>.tsv -> a test set")
    q.add_argument("--folder", required=True, help="the BEIR folder")
    q.add_argument("--split", required=True, help="the qrels file, qrels/<split>.tsv")
    q.add_argument("--doc-ids", required=True, help="the converted corpus's id mapping")
    q.add_argument("--queries-out", required=True, help="the question file (*.queries.tsv)")
    q.add_argument("--query-ids-out", required=True, help="question number -> query _id (TSV)")
    q.add_argument("--qrels-out", required=True, help="the qrels, original ids, trec_eval's format")
    r = sub.add_parser("run", help="a run with its original ids")
    r.add_argument("--run", required=True, help="the pipeline's TREC run")
    r.add_argument("--query-ids", required=True)
    r.add_argument("--doc-ids", required=True)
    r.add_argument("--output", required=True)
    a = ap.parse_args()
    if a.what == "corpus":
        convert_corpus(a.folder, a.corpus_out, a.ids_out)
    elif a.what == "queries":
        convert_queries(a.folder, a.split, a.doc_ids, a.queries_out, a.query_ids_out, a.qrels_out)
    else:
        n = write_original_id_run(a.run, a.query_ids, a.doc_ids, a.output)
        logging.info("%s: %d hits with their original ids -> %s", a.run, n, a.output)


if __name__ == "__main__":
    main()
