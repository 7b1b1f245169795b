"""DPR's file formats: read them streaming, check them, and write them back.

- corpus: ``psgs_w100.tsv`` (``id``, ``text``, ``title`` with a header row; tab-separated,
  csv-quoted as DPR ships it; ``.gz`` is read transparently).
- training / dev sets: DPR biencoder JSON, a list of records with ``question``, ``answers``,
  ``positive_ctxs``, ``negative_ctxs``, ``hard_negative_ctxs`` (contexts have ``title``,
  ``text``, ``passage_id``; DPR's TriviaQA files say ``psg_id``, which is accepted too).
- test questions: DPR qas TSV, one question per line: the question, a tab, then a Python
  literal list of answer strings.

Every reader names the file and line of a bad record in an :class:`~dcsr.errors.InputError`.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import gzip
import io
import json
import os
import sys
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from dcsr.data.answers import check_patterns
from dcsr.data.literals import (JSON_LIMITS, NOT_A_LIST, NOT_STRINGS, JSONProblem, answer_list_shape,
                                  json_limit_problem, no_surrogate, strict_object)
from dcsr.errors import InputError, at
from dcsr.fsutil import atomic_open

csv.field_size_limit(sys.maxsize)

CORPUS_HEADER = ["id", "text", "title"]
#: The record key that names the training set a record of a merged (*Multi*) training file came
#: from (:func:`dcsr.data.variants.iter_concatenated` writes it; the trainer batches by it).
SOURCE_KEY = "training_set"


@dataclass(frozen=True)
class Passage:
    id: int
    text: str
    title: str


@dataclass(frozen=True)
class QA:
    question: str
    answers: list[str]


def open_text(path: str | os.PathLike, mode: str = "r"):
    """Open a text file, gunzipping ``*.gz`` transparently; reading skips a UTF-8 byte order
    mark (an editor's: it would otherwise spoil the corpus header or a JSON file's '[')."""
    path = str(path)
    encoding = "utf-8-sig" if "r" in mode else "utf-8"
    if path.endswith(".gz"):
        return io.TextIOWrapper(gzip.open(path, mode.replace("t", "") + "b"), encoding=encoding, newline="")
    return open(path, mode, encoding=encoding, newline="")


def utf8_error_at(path: str | os.PathLike) -> tuple[int, int, int] | None:
    """``(line, byte offset, byte)`` of the first byte of ``path`` that is not UTF-8 (offsets
    into the decompressed data of a ``.gz``), or None when the whole file decodes."""
    opener = gzip.open if str(path).endswith(".gz") else open
    line, offset = 1, 0
    with opener(path, "rb") as fh:
        for raw in fh:  # '\n' never occurs inside a multi-byte UTF-8 sequence
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return line, offset + e.start, raw[e.start]
            line += 1
            offset += len(raw)
    return None


def not_utf8(path: str | os.PathLike) -> InputError:
    """The :class:`InputError` for a file that is not UTF-8, naming the line and byte offset."""
    found = utf8_error_at(path)
    if found is None:
        return InputError(str(path), "is not valid UTF-8; re-encode the file as UTF-8")
    line, offset, byte = found
    return InputError(at(path, line), f"not UTF-8 text (byte 0x{byte:02x} at byte offset {offset}); "
                                      "re-encode the file as UTF-8, e.g. with iconv -f latin1 -t utf-8")


@contextlib.contextmanager
def read_text(path: str | os.PathLike):
    """:func:`open_text` for reading, with undecodable bytes and a truncated ``.gz`` reported as
    an :class:`InputError` naming the file (and line) instead of a codec traceback."""
    with open_text(path) as fh:
        try:
            yield fh
        except UnicodeDecodeError:
            raise not_utf8(path) from None
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise InputError(str(path), f"is not a complete gzip file ({e}); it is truncated or corrupt, "
                                        "download or compress it again") from None


# --------------------------------------------------------------------------- corpus


def passage_id(text: str, path, line: int) -> int:
    """A corpus's passage id: decimal digits, at least 0 (FAISS pads a short hit list with -1,
    so a negative id would be read as "no hit") and below 2^63 (ids are stored as int64)."""
    shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
    if len(text.lstrip("0")) > 19 and text.isascii() and text.isdigit():  # past int64; int() of 4,300+ digits raises
        raise InputError(at(path, line), f"passage id {shown} does not fit in 64 bits; renumber the passages")
    try:
        pid = int(text)
    except ValueError:
        raise InputError(at(path, line), f"passage id {shown!r} is not an integer") from None
    if pid < 0:
        raise InputError(at(path, line), f"passage id {pid} is negative; passage ids must be 0 or more "
                                         "(FAISS marks a missing hit with -1): renumber the passages")
    if not text.isascii() or not text.isdigit():
        raise InputError(at(path, line), f"passage id {shown!r} is not an integer")
    if pid >= 1 << 63:
        raise InputError(at(path, line), f"passage id {pid} does not fit in 64 bits; renumber the passages")
    return pid


def check_one_line(path, row: list[str], first: int, last: int, what: str) -> None:
    """A record of a TSV (the csv reader's ``row``, read from lines ``first`` .. ``last``) lies on
    one line. A field that opens with '"' runs on to the next '"': an unbalanced quote would
    silently join the following lines into this record (and drop them as records)."""
    if last == first and not any("\n" in f or "\r" in f for f in row):
        return
    to = f"to line {last}" if last > first else "to the end of the file"
    raise InputError(at(path, first), f"a field that opens with '\"' runs on over a line break ({to}), joining "
                                      f"lines into one {what}: an unbalanced quote; csv-quote the field "
                                      "(\"...\" with each inner \" doubled) or remove the quote")


def one_line(field: object) -> object:
    """A field as the TSV writers write it: line breaks as spaces (DPR's TSV formats hold one
    record per line; every tokenizer downstream reads a line break as a space)."""
    if isinstance(field, str) and ("\n" in field or "\r" in field):
        return field.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return field


def iter_passages(path: str | os.PathLike) -> Iterator[Passage]:
    """Stream the passages of a DPR corpus TSV, checking every row (and that no passage id
    repeats: a bitmap of the ids seen, 2.6 MB for DPR's 21M ids)."""
    seen = bytearray()  # bit i: id i seen (ids 0 .. 2^28, at most 32 MB)
    seen_other: set[int] = set()  # huge ids
    n = 0
    with read_text(path) as fh:
        reader = csv.reader(fh, delimiter="\t")
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(str(path), "the corpus file is empty; expected the header row "
                                        "'id<TAB>text<TAB>title', then one passage per line")
        if [h.strip().lower() for h in header] != CORPUS_HEADER:
            raise InputError(at(path, 1), f"expected the header row 'id<TAB>text<TAB>title', found {header!r}; "
                                          "add that header as the first line (DPR's psgs_w100.tsv has it)")
        last_line = reader.line_num
        for row in reader:
            first, line = last_line + 1, reader.line_num
            last_line = line
            check_one_line(path, row, first, line, "passage")
            if len(row) != 3:
                raise InputError(at(path, line), f"expected 3 tab-separated fields (id, text, title), found {len(row)}; "
                                                 "a field holding a tab or a '\"' must be csv-quoted")
            pid, text, title = row
            pid_int = passage_id(pid, path, line)
            if not text.strip():
                raise InputError(at(path, line), f"passage {pid} has an empty text; give it its text or drop the row")
            if pid_int < 1 << 28:
                byte, bit = pid_int >> 3, 1 << (pid_int & 7)
                if byte >= len(seen):
                    seen.extend(bytes(max(byte + 1 - len(seen), len(seen))))
                repeated = seen[byte] & bit
                seen[byte] |= bit
            else:
                repeated = pid_int in seen_other
                seen_other.add(pid_int)
            if repeated:
                raise InputError(at(path, line), f"passage id {pid_int} occurs a second time; "
                                                 "passage ids must be unique (remove or renumber the duplicate)")
            n += 1
            yield Passage(pid_int, text, title)
    if n == 0:
        raise InputError(str(path), "the corpus has a header row but no passages")


def write_corpus(path: str | os.PathLike, passages: Iterable[Passage]) -> int:
    """Write passages as a DPR corpus TSV (atomically). Returns the number written."""
    n = 0
    with atomic_open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(CORPUS_HEADER)
        for p in passages:
            writer.writerow([p.id, one_line(p.text), one_line(p.title)])
            n += 1
    return n


def passage_texts(path: str | os.PathLike, wanted: set[int] | None = None) -> dict[int, Passage]:
    """Read the passages whose ids are in ``wanted`` (all when None), streaming the corpus once."""
    out: dict[int, Passage] = {}
    for p in iter_passages(path):
        if wanted is None or p.id in wanted:
            out[p.id] = p
            if wanted is not None and len(out) == len(wanted):
                break
    return out


# --------------------------------------------------------------------------- JSON


#: How close to the end of the buffer a decoding error may lie and still come from the element
#: being cut off there rather than from the file: a cut literal fails at its first character
#: (``-Infinit``: 8 back), a cut ``\\uXXXX`` escape at its ``u`` (5 back), a cut number's ``e+``
#: 2 back, anything else at the end itself. A cut string fails at its opening quote, however far
#: back (:func:`_cut_off`).
_CUT_MARGIN = 16


def _cut_off(buf: str, e: json.JSONDecodeError) -> bool:
    """Whether decoding ``buf`` failed (``e``) because the element runs past its end: only then can
    reading more help. Any other error is in the file and stays, however much more is read."""
    if e.pos >= len(buf) - _CUT_MARGIN or e.msg.startswith("Unterminated string"):
        return True
    if not buf.startswith('"', e.pos):
        return False
    # an unterminated string by the text, should the message read otherwise: no '"' after the
    # opening one at e.pos ends the string, i.e. none that follows an even run of backslashes
    quote = e.pos
    while (quote := buf.find('"', quote + 1)) >= 0:
        backslash = quote
        while buf[backslash - 1] == "\\":
            backslash -= 1
        if (quote - backslash) % 2 == 0:
            return False
    return True


def iter_json_array(path: str | os.PathLike, chunk_size: int = 1 << 20) -> Iterator[tuple[int, object]]:
    """Stream the elements of a top-level JSON array, yielding ``(line, element)``.

    Only one chunk and the current element are held in memory, so DPR's multi-GB
    training files stream; ``line`` is the 1-based line where the element starts.
    An element that does not fit in the buffer doubles it until it does; a malformed one
    is reported at once, without reading further.
    """
    decoder = json.JSONDecoder(object_pairs_hook=strict_object)
    with read_text(path) as fh:
        buf = fh.read(chunk_size)
        eof = len(buf) < chunk_size
        pos = 0
        line = 1
        line_start = 0  # where line `line` starts in buf (below 0: before what buf holds)

        def skip_ws() -> None:
            nonlocal pos, line, line_start
            while pos < len(buf) and buf[pos] in " \t\r\n":
                if buf[pos] == "\n":
                    line += 1
                    line_start = pos + 1
                pos += 1

        def refill(size: int = chunk_size) -> bool:
            nonlocal buf, pos, eof, line_start
            if eof:
                return False
            more = fh.read(size)
            eof = len(more) < size
            buf = buf[pos:] + more
            line_start -= pos
            pos = 0
            return bool(more)

        skip_ws()
        while pos >= len(buf) and refill():
            skip_ws()
        if pos >= len(buf):
            raise InputError(str(path), "the file is empty; expected a JSON array of records ('[' ...)")
        if buf[pos] != "[":
            raise InputError(at(path, line), f"expected a JSON array of records ('[' ...), found {buf[pos]!r}; "
                                             "a DPR biencoder file is one JSON list of records")
        pos += 1
        expect_value = True
        while True:
            skip_ws()
            while pos >= len(buf) and refill():
                skip_ws()
            if pos >= len(buf):
                raise InputError(at(path, line), "unexpected end of file inside the JSON array")
            ch = buf[pos]
            if ch == "]":
                return
            if ch == ",":
                if expect_value:
                    raise InputError(at(path, line), "unexpected ',' in the JSON array")
                pos += 1
                expect_value = True
                continue
            if not expect_value:
                raise InputError(at(path, line), f"expected ',' or ']' between records, found {ch!r}")
            while True:
                try:
                    obj, end = decoder.raw_decode(buf, pos)
                    break
                except json.JSONDecodeError as e:
                    start, start_of_line = pos, line_start  # offsets into e.doc, the buffer before a refill
                    # read as much again as the element has so far: a long element costs
                    # a few decodes, not one a chunk
                    if _cut_off(buf, e) and refill(max(chunk_size, len(buf) - pos)):
                        continue
                    bad_line = line + e.doc.count("\n", start, e.pos)
                    newline = e.doc.rfind("\n", start, e.pos)
                    column = e.pos - (newline + 1 if newline >= 0 else start_of_line) + 1
                    raise InputError(at(path, bad_line), f"malformed JSON: {e.msg} (column {column})") from None
                except JSONProblem as e:  # at the line where the element starts
                    raise InputError(at(path, line), str(e)) from None
                except JSON_LIMITS as e:
                    raise InputError(at(path, line), f"the record that starts on this line holds "
                                                     f"{json_limit_problem(e)}") from None
            start_line = line
            line += buf.count("\n", pos, end)
            newline = buf.rfind("\n", pos, end)
            if newline >= 0:
                line_start = newline + 1
            pos = end
            expect_value = False
            yield start_line, obj


def _check_ctx(ctx: object, where: str, key: str, i: int) -> dict:
    if not isinstance(ctx, dict):
        raise InputError(where, f"{key}[{i}] is not an object")
    if not isinstance(ctx.get("text"), str):
        raise InputError(where, f"{key}[{i}] has no string 'text'")
    # a missing or null title is no title, as DPR's JsonQADataset reads it (ctx["title"] = None):
    # the passage is then encoded as its text alone, as an empty title is
    title = ctx.get("title")
    if title is not None and not isinstance(title, str):
        raise InputError(where, f"{key}[{i}] has a 'title' that is not a string: {type(title).__name__}")
    pid = ctx.get("passage_id", ctx.get("psg_id"))
    out = {"title": title or "", "text": ctx["text"]}
    if pid is not None:
        out["passage_id"] = str(pid)
    # sentence: the sentence-specific negative of a DCSR miner (dcsr.retrieval.mining)
    for extra in ("score", "title_score", "has_answer", "sentence"):
        if extra in ctx:
            out[extra] = ctx[extra]
    return out


def iter_biencoder(path: str | os.PathLike, require_positive: bool = True) -> Iterator[dict]:
    """Stream and check the records of a DPR biencoder JSON file.

    Each record is normalised to ``question``, ``answers``, ``positive_ctxs``,
    ``negative_ctxs``, ``hard_negative_ctxs`` (missing negative lists become empty).
    """
    for _where, rec in iter_biencoder_at(path, require_positive):
        yield rec


def record_where(path: str | os.PathLike, line: int, n: int) -> str:
    """How errors name record ``n`` (0-based) of a JSON file: ``path:line (record n)``."""
    return f"{at(path, line)} (record {n})"


def iter_biencoder_at(path: str | os.PathLike, require_positive: bool = True) -> Iterator[tuple[str, dict]]:
    """:func:`iter_biencoder`, each record with where it is (:func:`record_where`)."""
    for n, (line, rec) in enumerate(iter_json_array(path)):
        where = record_where(path, line, n)
        if not isinstance(rec, dict):
            raise InputError(where, "record is not a JSON object")
        if not isinstance(rec.get("question"), str) or not rec["question"].strip():
            raise InputError(where, "record has no non-empty string 'question'")
        if "answers" not in rec:
            raise InputError(where, "record has no 'answers'")
        answers = rec["answers"]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InputError(where, "'answers' must be a list of strings")
        check_answers(answers, where)
        out = {"question": rec["question"], "answers": answers}
        for key in ("positive_ctxs", "negative_ctxs", "hard_negative_ctxs"):
            ctxs = rec.get(key, [])
            if not isinstance(ctxs, list):
                raise InputError(where, f"'{key}' must be a list")
            out[key] = [_check_ctx(c, where, key, i) for i, c in enumerate(ctxs)]
        if require_positive and not out["positive_ctxs"]:
            raise InputError(where, "record has no 'positive_ctxs' (training needs a positive passage "
                                    "per question); give it one or drop the record")
        for extra in ("id", "dataset", SOURCE_KEY):
            if extra in rec:
                out[extra] = rec[extra]
        yield where, out


def read_biencoder(path: str | os.PathLike, require_positive: bool = True) -> list[dict]:
    return list(iter_biencoder(path, require_positive=require_positive))


def write_biencoder(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write records as a DPR biencoder JSON array (atomically, one record at a time)."""
    n = 0
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        for rec in records:
            if n:
                fh.write(",\n")
            fh.write(json.dumps(rec, ensure_ascii=False, indent=1))
            n += 1
        fh.write("\n]\n")
    return n


# --------------------------------------------------------------------------- qas


def check_answers(answers: list[str], where: str) -> None:
    """No answer is empty: DPR's matching finds an answer without a word (``''``, spaces,
    invisible characters: no token of DrQA's tokenizer) in every passage."""
    for i, answer in enumerate(answers):
        if all(unicodedata.category(c)[0] in "ZC" for c in answer):  # no token (dcsr.data.answers)
            raise InputError(where, f"answer {i} ({answer!r}) is empty, and an empty answer matches every "
                                    "passage; remove it from the answer list")


#: The name ending of a question file whose questions are judged by qrels, not answers (a BEIR
#: test set, :mod:`dcsr.data.beir`): a qas TSV in which every answer list is empty (``[]``).
QUERIES_SUFFIX = ".queries.tsv"


def judged_by_qrels(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a question file of queries judged by qrels (:data:`QUERIES_SUFFIX`)."""
    return str(path).endswith(QUERIES_SUFFIX)


def iter_qas(path: str | os.PathLike, match: str = "string", bad_patterns: str = "refuse",
             never_found: list[tuple[str, int, str]] | None = None) -> Iterator[QA]:
    """Stream a DPR qas TSV: ``question<TAB>['answer', ...]`` per line, no header. Every
    question needs an answer (it could never be scored otherwise), and a file without any
    question is an error. With ``match="regex"`` (CuratedTREC) every answer must compile and
    match no empty string (:func:`dcsr.data.answers.check_patterns`); with
    ``bad_patterns="never_found"`` one that does not compile is let through, as DPR scores it,
    and ``(file:line, answer index, answer)`` is appended to ``never_found``. A ``*.queries.tsv``
    (:data:`QUERIES_SUFFIX`) holds queries judged by qrels: its answer lists are empty."""
    qrels_judged = judged_by_qrels(path)
    n = 0
    with read_text(path) as fh:
        reader = csv.reader(fh, delimiter="\t")
        last_line = 0
        for row in reader:
            first, line = last_line + 1, reader.line_num
            last_line = line
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            check_one_line(path, row, first, line, "question")
            if len(row) < 2:
                raise InputError(at(path, line), "expected 'question<TAB>answers', found one field; "
                                                 "separate the question from its answer list with a tab")
            question, raw = row[0], row[1]
            if not question.strip():
                raise InputError(at(path, line), "the question is empty; write it before the tab, or drop the line")
            shape = answer_list_shape(raw)
            try:
                if shape == NOT_A_LIST:
                    raise ValueError(shape)
                answers = None if shape == NOT_STRINGS else ast.literal_eval(raw)
            except (ValueError, SyntaxError, RecursionError, MemoryError):
                raise InputError(at(path, line), f"answers {raw[:80]!r} are not a Python literal list; "
                                                 "write them as ['answer', ...]") from None
            if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                raise InputError(at(path, line), "answers must be a list of strings, as ['answer', ...]")
            if not answers and not qrels_judged:
                raise InputError(at(path, line), "the question has no answers (an empty list); "
                                                 "give at least one answer string or drop the question")
            try:
                for text in (question, *answers):
                    no_surrogate(text)
            except JSONProblem as e:
                raise InputError(at(path, line), str(e)) from None
            check_answers(answers, at(path, line))
            if match == "regex":
                for i in check_patterns(answers, at(path, line), bad_patterns):
                    if never_found is not None:
                        never_found.append((at(path, line), i, answers[i]))
            n += 1
            yield QA(question, answers)
    if n == 0:
        raise InputError(str(path), "no questions (the file is empty); expected one "
                                    "'question<TAB>['answer', ...]' per line")


def read_qas(path: str | os.PathLike, match: str = "string") -> list[QA]:
    return list(iter_qas(path, match))


def write_qas(path: str | os.PathLike, qas: Iterable[QA]) -> int:
    n = 0
    with atomic_open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        for qa in qas:
            writer.writerow([one_line(qa.question), repr(list(qa.answers))])
            n += 1
    return n


# --------------------------------------------------------------------------- sentences


SENTENCES_HEADER = ["passage_id", "sentence", "start", "end"]


def iter_sentence_table(path: str | os.PathLike) -> Iterator[tuple[int, int, int, int]]:
    """Stream the sentence table: ``passage_id, sentence, start, end`` (character offsets
    into the passage text, end exclusive), sorted by passage then sentence."""
    with read_text(path) as fh:
        header = fh.readline().rstrip("\n").split("\t")
        if header != SENTENCES_HEADER:
            raise InputError(at(path, 1), f"expected header {SENTENCES_HEADER}, found {header}")
        previous, expected, done = None, 0, 0  # the passage, its next sentence number, where its last one ended
        for line_no, line in enumerate(fh, start=2):
            parts = line.rstrip("\n").split("\t")
            try:
                pid, sid, start, end = (int(x) for x in parts)
            except ValueError:
                raise InputError(at(path, line_no), "expected 4 integer fields (passage_id, sentence, start, end)")
            if pid != previous:
                previous, expected, done = pid, 0, 0
            # a passage's rows, apart or out of order, would silently lose sentences downstream
            if sid != expected:
                raise InputError(at(path, line_no), f"sentence {sid} of passage {pid}, expected {expected}: a "
                                                    "passage's sentences are rows 0, 1, ... together; the table is "
                                                    "damaged, split the corpus again")
            if not done <= start < end:
                raise InputError(at(path, line_no), f"sentence span {start}..{end} of passage {pid} is empty or "
                                                    "overlaps the sentence before; the table is damaged, split the "
                                                    "corpus again")
            expected, done = sid + 1, end
            yield pid, sid, start, end


def passage_sentences(path: str | os.PathLike) -> Iterator[tuple[int, list[tuple[int, int]]]]:
    """Group the sentence table by passage: yields ``(passage_id, [(start, end), ...])``."""
    current, spans = None, []
    for pid, _sid, start, end in iter_sentence_table(path):
        if pid != current:
            if current is not None:
                yield current, spans
            current, spans = pid, []
        spans.append((start, end))
    if current is not None:
        yield current, spans


def sentence_spans(path: str | os.PathLike, wanted: set[int] | None = None) -> dict[int, list[tuple[int, int]]]:
    """``{passage_id: [(start, end), ...]}`` from the sentence table, for the passages in
    ``wanted`` only (all when None), streaming the table once."""
    return {pid: spans for pid, spans in passage_sentences(path) if wanted is None or pid in wanted}


@contextlib.contextmanager
def output_folder(folder: str | os.PathLike):
    """Create ``folder`` (and its missing parents) for outputs; if the block fails, remove the
    folders made here again, innermost first, as far as they are still empty, so a failed step
    leaves no empty output folder behind."""
    folder = Path(folder).absolute()
    new = [d for d in (folder, *folder.parents) if not d.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        for d in new:
            if any(d.iterdir()):
                break
            d.rmdir()
        raise
