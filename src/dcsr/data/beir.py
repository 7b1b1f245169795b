"""BEIR-format collections (Thakur et al., 2021) as the pipeline's corpora and test sets.

A BEIR folder holds ``corpus.jsonl`` (one JSON object a line: ``_id``, ``title``, ``text``),
``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (a header, then ``query-id``,
``corpus-id``, ``score``, tab-separated). The pipeline reads it as:

- **a corpus** (:func:`convert_corpus`): DPR's passage TSV with integer passage ids 0, 1, ... in
  the order of ``corpus.jsonl`` (FAISS and the passage store need integers), and beside it the
  mapping back, ``beir-doc-ids.tsv`` (``id``, ``_id``). A document without text is its title
  alone, as text; one with neither is left out.
- **a test set** (:func:`convert_queries`): the queries that ``qrels/<split>.tsv`` judges (BEIR's
  loader keeps those too), in the order of ``queries.jsonl``, as the pipeline's question file
  (``*.queries.tsv``: a qas TSV whose answer lists are empty, :data:`dcsr.data.formats.QUERIES_SUFFIX`),
  the query ``_id`` of each line (``*.query-ids.tsv``), and the qrels in trec_eval's format with
  the original ids (``qid 0 docid score``). Its runs are scored against those qrels, on the run
  with its original ids (:func:`original_id_run`), not by answer matching: it has no answers.

Malformed files are refused with the file and line: a byte order mark, a CRLF line end (a
``\\r`` would be read into an id or a score), bytes that are not UTF-8, a line that is not a JSON
object, an ``_id`` that is missing, empty, holds whitespace (it could not be written in a TREC
run), a control character or a bidirectional override (NUL, an ANSI escape, U+202E: invisible,
or read apart by other tools) or repeats, a query without text, a qrel naming an unknown query or
given twice, a qrels score that is not plain digits (``1_0``, ``٣``: Python's ``int`` reads
them as 10 and 3), qrels most of whose documents the corpus lacks, an empty corpus. They read
what BEIR's collections hold: a qrel naming a document the corpus lacks is kept, as BEIR's
evaluation keeps it (a relevant document no run retrieves); a document with neither title nor
text, which BEIR's loader keeps as an empty text (and a dense encoder may rank), is left out
here, as nothing of it can match. The id mappings the conversion writes (``beir-doc-ids.tsv``,
``*.query-ids.tsv``) are checked when read back, their ``_id`` as above.

:func:`squad_to_beir` writes SQuAD (via :mod:`dcsr.data.squad`) as a BEIR folder, its qrels
from DPR's answer matching (:func:`answer_match_qrels`).
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import json
import logging
import os
import re
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from dcsr.data.answers import has_answer_in_tokens, tokens
from dcsr.data.runs import read_trec
from dcsr.data.formats import (QA, JSONProblem, Passage, not_utf8, one_line, output_folder, strict_object,
                               write_corpus, write_qas)
from dcsr.data.literals import JSON_LIMITS, json_limit_problem
from dcsr.errors import InputError, at
from dcsr.fsutil import atomic_open, atomic_path

log = logging.getLogger(__name__)

CORPUS, QUERIES, QRELS_DIR = "corpus.jsonl", "queries.jsonl", "qrels"
QRELS_HEADER = ["query-id", "corpus-id", "score"]
DOC_IDS_HEADER = ["id", "_id"]
QUERY_IDS_HEADER = ["qid", "_id"]


def qrels_file(folder: str | os.PathLike, split: str) -> Path:
    """``<folder>/qrels/<split>.tsv``."""
    return Path(folder) / QRELS_DIR / f"{split}.tsv"


# --------------------------------------------------------------------------- reading, checked


def _lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a BEIR file, refusing a byte order mark, CRLF line ends and
    bytes that are not UTF-8 (each with its line)."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise InputError(str(path), "not found; a BEIR folder holds corpus.jsonl, queries.jsonl and "
                                    "qrels/<split>.tsv") from None
    with fh:
        for n, raw in enumerate(fh, start=1):
            if n == 1 and raw.startswith(codecs.BOM_UTF8):
                raise InputError(at(path, 1), "starts with a UTF-8 byte order mark, which BEIR's files do not have "
                                              "(it would be read into the first id); save the file without it")
            if raw.endswith(b"\r\n"):
                raise InputError(at(path, n), "ends in CRLF (\\r\\n), a Windows line end; BEIR's files end lines "
                                              "with LF alone (a '\\r' would be read into an id or a score): convert "
                                              "the file, e.g. with dos2unix")
            try:
                yield n, raw.decode("utf-8")
            except UnicodeDecodeError:
                raise not_utf8(path) from None


def _jsonl(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """The JSON objects of a JSONL file with their line numbers (blank lines skipped)."""
    for n, text in _lines(path):
        if not text.strip():
            continue
        try:
            obj = json.loads(text, object_pairs_hook=strict_object)
        except json.JSONDecodeError as e:
            raise InputError(at(path, n), f"malformed JSON: {e.msg} (column {e.colno}); a JSONL file holds one "
                                          "JSON object a line") from None
        except JSONProblem as e:
            raise InputError(at(path, n), str(e)) from None
        except JSON_LIMITS as e:
            raise InputError(at(path, n), f"the JSON object holds {json_limit_problem(e)}") from None
        if not isinstance(obj, dict):
            raise InputError(at(path, n), f"expected a JSON object ({{\"_id\": ..., ...}}), found {type(obj).__name__}")
        yield n, obj


#: Characters an id may not hold besides whitespace: controls (Unicode Cc: NUL, which ends a C
#: string, an ANSI escape) and the bidirectional overrides and isolates, which show an id's
#: characters in another order. Other format characters (a soft hyphen, a zero-width joiner or
#: non-joiner, which Persian and Indic words need) are a published id's own and are kept.
_BIDI_CONTROLS = frozenset(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))


def _check_id(value, where: str, what: str) -> str:
    """An ``_id`` (or qrels id) as the pipeline writes it into TREC files: a non-empty string
    without whitespace (a number is taken as its text), control characters (Unicode Cc: NUL, an
    ANSI escape) or bidirectional overrides, which no one can see in an id and other tools read
    apart."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(where, f"{what} is {value!r}; expected a string")
    text = str(value)
    if not text:
        raise InputError(where, f"{what} is empty")
    if " " in text or not text.isprintable():  # whitespace but ' ', Cc and Cf are all unprintable
        if any(c.isspace() for c in text):
            raise InputError(where, f"{what} {text!r} holds whitespace, which a TREC run or qrels line cannot hold "
                                    "(its fields are separated by whitespace); rename it")
        bad = next((c for c in text if unicodedata.category(c) == "Cc" or c in _BIDI_CONTROLS), None)
        if bad is not None:
            raise InputError(where, f"{what} {text!r} holds the control character U+{ord(bad):04X} "
                                    f"({unicodedata.name(bad, unicodedata.category(bad))}), which does not show in "
                                    "an id and which other tools read apart; rename it")
    return text


def _text_field(obj: dict, key: str, where: str, what: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(where, f"{what} '{key}' is {type(value).__name__}, not a string")
    return value


def _unique_id(obj: dict, where: str, line: int, seen: dict[str, int], what: str) -> str:
    """The checked ``_id`` of a ``corpus.jsonl`` or ``queries.jsonl`` line, recorded in ``seen``
    (``_id`` -> its line); one that occurs a second time is an error naming both lines."""
    value = _check_id(obj.get("_id"), where, f"{what} '_id'")
    if value in seen:
        raise InputError(where, f"{what} _id {value!r} occurs a second time (first at line {seen[value]}); "
                                f"{what} ids must be unique")
    seen[value] = line
    return value


def iter_corpus(path: str | os.PathLike) -> Iterator[tuple[str, str, str]]:
    """``(_id, title, text)`` of every document of a BEIR ``corpus.jsonl``, checked. A document
    without text is its title alone, as text with no title (encoded as BEIR encodes it, the title
    once; BM25 counts its words once); one with neither (FiQA has some) is left out, as no
    encoder or BM25 has anything of it to match: a qrel naming it names a document no run can
    retrieve (:func:`read_beir_qrels`). Both are counted in the log."""
    seen: dict[str, int] = {}
    n = untitled_text = 0
    empty: list[tuple[int, str]] = []
    for line, obj in _jsonl(path):
        where = at(path, line)
        doc = _unique_id(obj, where, line, seen, "document")
        title, text = _text_field(obj, "title", where, "document"), _text_field(obj, "text", where, "document")
        if not text.strip():
            if not title.strip():
                empty.append((line, doc))
                continue
            title, text, untitled_text = "", title, untitled_text + 1
        n += 1
        yield doc, title, text
    if n == 0:
        raise InputError(str(path), "holds no documents (an empty corpus); expected one JSON object a line "
                                    "with '_id', 'title' and 'text'"
                                    + (f" (its {len(empty)} have neither title nor text)" if empty else ""))
    if untitled_text:
        log.info("%s: %d documents without text are their title alone", path, untitled_text)
    if empty:
        log.warning("%s: %d documents with neither text nor title left out (the first: line %d, %r)", path,
                    len(empty), *empty[0])


def read_queries(path: str | os.PathLike) -> dict[str, str]:
    """``{_id: text}`` of a BEIR ``queries.jsonl``, in file order, checked."""
    out: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line, obj in _jsonl(path):
        where = at(path, line)
        qid = _unique_id(obj, where, line, lines, "query")
        text = obj.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputError(where, f"query {qid!r} has no text (a non-empty string 'text'); give it its text or "
                                    "drop the line")
        out[qid] = text
    if not out:
        raise InputError(str(path), "holds no queries; expected one JSON object a line with '_id' and 'text'")
    return out


def read_beir_qrels(path: str | os.PathLike, queries: Mapping[str, str] | None = None,
                    documents: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
    """``{query _id: {document _id: score}}`` of a BEIR ``qrels/<split>.tsv`` (its header, then
    ``query-id<TAB>corpus-id<TAB>score``), checked against the ``queries`` and ``documents``
    given: a qrel naming an unknown query, or a pair given twice, is an error at its line. A qrel
    naming a document the corpus lacks is kept, as BEIR's evaluation keeps it (a relevant document
    no run retrieves: ArguAna's qrels name one), and logged; when more than half of the judgments
    name such documents, the qrels and the corpus do not belong together: an error."""
    docs = documents if documents is None or isinstance(documents, (set, frozenset, dict)) else set(documents)
    qrels: dict[str, dict[str, int]] = {}
    unknown: list[tuple[int, str]] = []  # (line, corpus-id) of the judgments naming no document
    header_seen = False
    for n, text in _lines(path):
        if not text.strip():
            continue
        # as BEIR's GenericDataLoader reads them (csv, tab-separated, QUOTE_MINIMAL: "d1" is d1)
        fields = next(csv.reader([text.rstrip("\n")], delimiter="\t", quoting=csv.QUOTE_MINIMAL))
        if not header_seen:
            header_seen = True
            if [f.strip() for f in fields] != QRELS_HEADER:
                raise InputError(at(path, n), f"expected the header 'query-id<TAB>corpus-id<TAB>score', found "
                                              f"{text.rstrip()!r}; BEIR's qrels files start with it")
            continue
        if len(fields) != 3:
            raise InputError(at(path, n), f"expected 3 tab-separated fields (query-id, corpus-id, score), "
                                          f"found {len(fields)}")
        where = at(path, n)
        q = _check_id(fields[0], where, "query-id")
        d = _check_id(fields[1], where, "corpus-id")
        digits = fields[2].strip(" \t")  # spaces around it, as BEIR's int() reads them
        if not re.fullmatch(r"-?[0-9]+", digits):  # int() reads '1_0' as 10 and '٣' as 3
            raise InputError(where, f"score {fields[2]!r} is not an integer (plain digits, as 0, 1 or 2)")
        try:
            score = int(digits)
        except ValueError:  # past Python's 4,300 digits
            raise InputError(where, f"score {digits[:20]}... ({len(digits)} digits) is too long") from None
        if queries is not None and q not in queries:
            raise InputError(where, f"query-id {q!r} is not in the queries file (queries.jsonl)")
        if docs is not None and d not in docs:
            unknown.append((n, d))
        judged = qrels.setdefault(q, {})
        if d in judged:
            raise InputError(where, f"query {q!r} and document {d!r} are judged a second time; give each pair once")
        judged[d] = score
    if not header_seen:
        raise InputError(str(path), "is empty; expected the header 'query-id<TAB>corpus-id<TAB>score' and one "
                                    "judgment a line")
    if not qrels:
        raise InputError(str(path), "holds a header but no judgments")
    if unknown:
        total = sum(len(v) for v in qrels.values())
        line, first = unknown[0]
        if 2 * len(unknown) > total:
            raise InputError(at(path, line), f"corpus-id {first!r} is not a document of the corpus, and "
                                             f"{len(unknown)} of the {total} judgments name none of its documents; "
                                             "the qrels and the corpus do not belong together")
        log.warning("%s: %d of %d judgments name a document the corpus lacks (the first: line %d, %r); kept, as "
                    "BEIR's evaluation keeps them: relevant documents no run can retrieve", path, len(unknown), total,
                    line, first)
    return qrels


# --------------------------------------------------------------------------- the pipeline's files


def _write_tsv(fh, header: Sequence[str], rows: Iterable[Sequence]) -> int:
    fh.write("\t".join(header) + "\n")
    n = 0
    for row in rows:
        fh.write("\t".join(str(v) for v in row) + "\n")
        n += 1
    return n


def convert_corpus(folder: str | os.PathLike, corpus_out: str | os.PathLike, ids_out: str | os.PathLike) -> int:
    """A BEIR folder's ``corpus.jsonl`` as DPR's passage TSV (``corpus_out``, ids 0, 1, ... in
    file order) and the mapping back (``ids_out``: ``id<TAB>_id``). Both appear together, or
    neither (on an error). Returns the number of documents."""
    mapping: list[str] = []

    def passages():
        for i, (doc, title, text) in enumerate(iter_corpus(Path(folder) / CORPUS)):
            mapping.append(doc)
            yield Passage(i, text, title)

    with contextlib.ExitStack() as stack:
        for parent in dict.fromkeys((Path(corpus_out).parent, Path(ids_out).parent)):
            stack.enter_context(output_folder(parent))  # no empty output folder left on an error
        corpus_tmp = stack.enter_context(atomic_path(corpus_out))
        ids_tmp = stack.enter_context(atomic_path(ids_out))
        n = write_corpus(corpus_tmp, passages())
        with open(ids_tmp, "w", encoding="utf-8") as fh:
            _write_tsv(fh, DOC_IDS_HEADER, enumerate(mapping))
    log.info("%s: %d documents -> %s (ids: %s)", folder, n, corpus_out, ids_out)
    return n


def _read_id_map(path: str | os.PathLike, header: Sequence[str], what: str, wanted=None) -> dict[int, str]:
    """``{integer id: original _id}`` of a mapping the pipeline wrote (all, or the ``wanted``),
    checked as it may come from elsewhere: UTF-8, two fields a line, the integer plain digits,
    the ``_id`` one that :func:`_check_id` passes (it is written into TREC runs), with the line."""
    out: dict[int, str] = {}
    try:
        with open(path, encoding="utf-8", newline="") as fh:  # newline="": a '\r' stays in the _id, refused
            first = fh.readline().rstrip("\n").split("\t")
            if first != list(header):
                raise InputError(at(path, 1), f"expected the header {'<TAB>'.join(header)}, found {first!r}; "
                                              "the file is not an id mapping the pipeline wrote")
            for n, line in enumerate(fh, start=2):
                text = line.rstrip("\n")
                parts = text.split("\t")
                if len(parts) != 2 or not re.fullmatch(r"[0-9]{1,19}", parts[0]):
                    raise InputError(at(path, n), f"expected '<integer><TAB><_id>', found {text!r}")
                value = _check_id(parts[1], at(path, n), what)
                key = int(parts[0])
                if wanted is None or key in wanted:
                    out[key] = value
    except UnicodeDecodeError:
        raise not_utf8(path) from None
    return out


def read_doc_ids(path: str | os.PathLike, wanted: Iterable[int] | None = None) -> dict[int, str]:
    """``{passage id: document _id}`` of a converted corpus (``beir-doc-ids.tsv``)."""
    return _read_id_map(path, DOC_IDS_HEADER, "document _id", None if wanted is None else set(wanted))


def read_query_ids(path: str | os.PathLike) -> list[str]:
    """The query ``_id`` of each line of a converted test set's question file, in order."""
    ids = _read_id_map(path, QUERY_IDS_HEADER, "query _id")
    if sorted(ids) != list(range(len(ids))):
        raise InputError(str(path), "the question numbers are not 0, 1, ... in order; the file is damaged, convert "
                                    "the test set again")
    return [ids[i] for i in range(len(ids))]


def convert_queries(folder: str | os.PathLike, split: str, doc_ids: str | os.PathLike,
                    queries_out: str | os.PathLike, query_ids_out: str | os.PathLike,
                    qrels_out: str | os.PathLike) -> int:
    """A BEIR test set: the queries ``qrels/<split>.tsv`` judges (checked against ``queries.jsonl``
    and the converted corpus's ``doc_ids``), written as the pipeline's question file, their ids,
    and the qrels with the original ids in trec_eval's format. Returns the number of queries."""
    folder = Path(folder)
    queries = read_queries(folder / QUERIES)
    documents = set(read_doc_ids(doc_ids).values())
    qrels = read_beir_qrels(qrels_file(folder, split), queries, documents)
    chosen = [q for q in queries if q in qrels]
    with contextlib.ExitStack() as stack:
        for parent in dict.fromkeys(Path(p).parent for p in (queries_out, query_ids_out, qrels_out)):
            stack.enter_context(output_folder(parent))
        tmp = {k: stack.enter_context(atomic_path(p)) for k, p in
               (("queries", queries_out), ("ids", query_ids_out), ("qrels", qrels_out))}
        # no question has answers: the file is judged by qrels (formats.QUERIES_SUFFIX)
        write_qas(tmp["queries"], (QA(queries[q], []) for q in chosen))
        with open(tmp["ids"], "w", encoding="utf-8") as fh:
            _write_tsv(fh, QUERY_IDS_HEADER, enumerate(chosen))
        with open(tmp["qrels"], "w", encoding="utf-8") as fh:
            for q in chosen:
                for d, score in qrels[q].items():
                    fh.write(f"{q} 0 {d} {score}\n")
    log.info("%s: %d of %d queries judged in %s (%d judgments)", folder, len(chosen), len(queries),
             qrels_file(folder, split), sum(len(v) for v in qrels.values()))
    return len(chosen)


def original_id_run(run: Mapping[int, Sequence[tuple[int, float]]], query_ids: Sequence[str],
                    doc_ids: Mapping[int, str], where: str = "run") -> dict[str, list[tuple[str, float]]]:
    """A run (``{qid: [(passage id, score), ...]}``, as :func:`dcsr.data.runs.read_trec` reads it)
    with the original query and document ids, in question order; a passage the mapping lacks is an
    error."""
    out = {}
    for q, hits in sorted(run.items()):
        if not 0 <= q < len(query_ids):
            raise InputError(where, f"names question {q}, but the test set has {len(query_ids)} queries")
        mapped = []
        for pid, score in hits:
            if pid not in doc_ids:
                raise InputError(where, f"retrieves passage {pid}, which the corpus's id mapping lacks; was the run "
                                        "made over another corpus?")
            mapped.append((doc_ids[pid], score))
        out[query_ids[q]] = mapped
    return out


def drop_identical_ids(run: Mapping[int, Sequence[tuple[int, float]]], query_ids: Sequence[str],
                       doc_ids: Mapping[int, str]) -> tuple[dict[int, list[tuple[int, float]]], int]:
    """The run without the hits whose document ``_id`` is the query's own ``_id``, and how many were
    dropped: BEIR's evaluation drops them (``EvaluateRetrieval.evaluate(..., ignore_identical_ids=True)``,
    its default) and so do Pyserini's BEIR regressions (``--remove-query``), since in a collection
    whose queries are documents too (ArguAna, Quora, CQADupStack) a query finds itself first."""
    out, dropped = {}, 0
    for q, hits in run.items():
        if not 0 <= q < len(query_ids):  # not a question of the test set: original_id_run says so
            out[q] = list(hits)
            continue
        kept = [(pid, score) for pid, score in hits if doc_ids.get(pid) != query_ids[q]]
        dropped += len(hits) - len(kept)
        out[q] = kept
    return out, dropped


def write_original_id_run(run_trec: str | os.PathLike, query_ids: str | os.PathLike, doc_ids: str | os.PathLike,
                          out: str | os.PathLike) -> int:
    """``run_trec`` with its original query and document ids (:func:`original_id_run`), as a TREC
    run for the collection's own tools (trec_eval, ir_measures, BEIR's evaluation) and qrels:
    the same hits, ranks and scores (written in full), the same tag, but a hit that is the query
    itself (:func:`drop_identical_ids`, as our measures and Pyserini's ``--remove-query``). A
    query without hits has no line (our ``# no hits`` comment would be read as a hit by trec_eval). Returns the lines
    written."""
    run = read_trec(run_trec)
    docs = read_doc_ids(doc_ids, {pid for hits in run.values() for pid, _ in hits})
    qids = read_query_ids(query_ids)
    run, _dropped = drop_identical_ids(run, qids, docs)  # the hits our measures read (Pyserini's --remove-query)
    mapped = original_id_run(run, qids, docs, where=str(run_trec))
    tag = "run"
    with open(run_trec, encoding="utf-8") as fh:  # the run's tag, as its first hit gives it
        for line in fh:
            parts = line.split()
            if len(parts) == 6 and not line.lstrip().startswith("#"):
                tag = parts[5]
                break
    n = 0
    with output_folder(Path(out).parent), atomic_open(out, "w", encoding="utf-8") as fh:
        for qid, hits in mapped.items():
            for rank, (doc, score) in enumerate(hits, start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {float(score)!r} {tag}\n")
                n += 1
    return n


# --------------------------------------------------------------------------- writing a BEIR folder


def write_beir(folder: str | os.PathLike, corpus: Iterable[tuple[str, str, str]], queries: Iterable[tuple[str, str]],
               qrels: Mapping[str, Mapping[str, Mapping[str, int]]], readme: str | None = None) -> None:
    """Write a BEIR folder: ``corpus`` as ``(_id, title, text)``, ``queries`` as ``(_id, text)``,
    ``qrels`` as ``{split: {query: {document: score}}}``, and a ``README.md`` when given. Every
    file appears complete (atomically)."""
    folder = Path(folder)
    with output_folder(folder):
        with atomic_open(folder / CORPUS, "w", encoding="utf-8") as fh:
            for doc, title, text in corpus:
                fh.write(json.dumps({"_id": doc, "title": title, "text": text}, ensure_ascii=False) + "\n")
        with atomic_open(folder / QUERIES, "w", encoding="utf-8") as fh:
            for q, text in queries:
                fh.write(json.dumps({"_id": q, "text": text}, ensure_ascii=False) + "\n")
        for split, judged in qrels.items():
            with atomic_open(qrels_file(folder, split), "w", encoding="utf-8") as fh:
                _write_tsv(fh, QRELS_HEADER, ((q, d, s) for q, docs in judged.items() for d, s in docs.items()))
        if readme is not None:
            with atomic_open(folder / "README.md", "w", encoding="utf-8") as fh:
                fh.write(readme)


def answer_match_qrels(questions: Iterable[tuple[str, Sequence[str]]], passages: Iterable[tuple[str, str]]
                       ) -> dict[str, dict[str, int]]:
    """``{question: {passage: 1}}``: every passage that holds one of the question's answers by
    DPR's string matching (:func:`dcsr.data.answers.has_answer_in_tokens` on the passage text,
    exactly what top-k answer recall checks), over the whole corpus. Candidates come from an
    inverted index of the passages' tokens; each is confirmed by the matcher itself. Questions
    without such a passage are left out."""
    words: dict[str, list[str]] = {}
    index: dict[str, set[str]] = {}
    for pid, text in passages:
        words[pid] = tokens(text)
        for t in set(words[pid]):
            index.setdefault(t, set()).add(pid)
    qrels: dict[str, dict[str, int]] = {}
    for q, answers in questions:
        relevant = set()
        for answer in answers:
            toks = tokens(answer)
            if not toks:
                continue
            candidates = set.intersection(*(index.get(t, set()) for t in set(toks)))
            relevant |= {pid for pid in candidates - relevant if has_answer_in_tokens([answer], words[pid])}
        if relevant:
            qrels[q] = {pid: 1 for pid in sorted(relevant, key=lambda p: (len(p), p))}
    return qrels


def md_code_span(text: str) -> str:
    """``text`` (a file name of the user's, a command line) as a Markdown code span, shown as
    written and never read as Markdown or HTML: fenced by more backticks than any run of them in
    it (which would close the span), line breaks as spaces (a blank line would end it)."""
    text = " ".join(str(text).splitlines())
    fence = "`" * (max(map(len, re.findall("`+", text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""  # else a fence or stripped
    return f"{fence}{pad}{text}{pad}{fence}"


def squad_to_beir(source: str | os.PathLike, folder: str | os.PathLike, **squad_options) -> dict:
    """SQuAD v1.1 as a BEIR folder: DPR's 100-word passages of :func:`dcsr.data.squad.squad_to_dpr`
    (``_id`` = the DPR conversion's passage id) as the corpus, the test questions of its
    article split as the queries (``_id`` = SQuAD's question id), and ``qrels/test.tsv`` from
    answer matching (:func:`answer_match_qrels`), said so in the folder's README.md.
    ``squad_options`` are :func:`~dcsr.data.squad.squad_to_dpr`'s. Returns the statistics."""
    from dcsr.data.squad import DEFAULT_SEED, DEFAULT_SPLIT, squad_to_dpr

    data = squad_to_dpr(source, **squad_options)
    qids = [str(qid) if qid is not None else f"q{i}" for i, qid in enumerate(data.test_ids)]
    duplicated = [q for q, c in Counter(qids).items() if c > 1]
    if duplicated:
        raise InputError(str(source), f"question id {duplicated[0]!r} occurs twice among the test questions")
    qrels = answer_match_qrels(((q, qa.answers) for q, qa in zip(qids, data.test)),
                               ((str(p.id), p.text) for p in data.passages))
    judged = len(qrels)
    stats = {"passages": len(data.passages), "queries": len(qids), "queries_with_qrels": judged,
             "judgments": sum(len(v) for v in qrels.values()), "articles": data.stats["articles"]}
    readme = (
        f"# SQuAD v1.1 as a BEIR collection\n\n"
        f"Converted from {md_code_span(Path(source).name)} by workflow/scripts/squad_to_beir.py "
        "(dcsr.data.beir.squad_to_beir).\n\n"
        f"- corpus.jsonl: {len(data.passages)} passages, every article cut into {squad_options.get('passage_words', 100)}-word "
        "blocks as DPR cut Wikipedia (dcsr.data.squad); `_id` is the passage id of the DPR-format conversion.\n"
        f"- queries.jsonl: the {len(qids)} questions of the {data.stats['articles']['test']} test articles of the "
        f"article split {json.dumps(squad_options.get('split', DEFAULT_SPLIT))} (seed {squad_options.get('seed', DEFAULT_SEED)}: "
        "the test questions of prepare_squad.py with the same options); `_id` is SQuAD's question id.\n"
        f"- qrels/test.tsv: a passage is relevant (score 1) to a question when it holds one of the question's answers "
        "by DPR's string matching (dcsr.data.answers, DPR's has_answer: token match on the passage text), over the "
        "whole corpus, not the paragraph the question was written on. So Success@k against these qrels is DPR's "
        f"top-k answer recall. {len(qids) - judged} of the {len(qids)} questions have no such passage and no qrels "
        "(BEIR's loader drops them; top-k counts them as misses).\n")
    write_beir(folder, ((str(p.id), p.title, p.text) for p in data.passages),
               ((q, one_line(qa.question)) for q, qa in zip(qids, data.test)), {"test": qrels}, readme=readme)
    log.info("%s -> %s: %s", source, folder, json.dumps(stats))
    return stats
