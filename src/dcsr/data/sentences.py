"""Sentence splitting of the corpus, for DCSR's one-vector-per-sentence index.

DCSR splits DPR's 100-word passages (not the original articles) into sentences, so the
first and last "sentences" of a passage are often fragments; that is the paper's set-up
(Appendix C) and is reproduced here on purpose.

Sentences are stored as character spans ``(start, end)`` (end exclusive) into the passage
text, never as copies of the text: the table stays small for 21M passages, and the encoder
can mark sentence boundaries inside the passage it encodes anyway.

The default splitter is Blingfire, chosen by measurement on real Wikipedia passages
(``benchmarks/sentence-splitting/sentence_splitters.py``, results in ``benchmarks/sentence-splitting/sentence-splitting.md``): it was
right most often where the splitters disagree (hand-checked), and at ~6,000 passages/s on one
core it splits DPR's 21M passages in about an hour, 3-20x faster than the pure-Python splitters.
The others (pysbd, syntok, segtok, sentencex, spaCy's rule-based sentencizer) can be selected by
name for comparison when their package is installed.
"""

from __future__ import annotations

import os
import sys
import time
from functools import lru_cache
from importlib import metadata
from typing import Callable, Iterable

from dcsr.errors import InputError, at
from dcsr.data.formats import SENTENCES_HEADER, iter_passages, passage_sentences
from dcsr.fsutil import atomic_open

DEFAULT_SPLITTER = "blingfire"

# name -> the PyPI distribution that provides it (to name it in errors and in stats).
SPLITTER_PACKAGES = {
    "blingfire": "blingfire",
    "pysbd": "pysbd",
    "syntok": "syntok",
    "segtok": "segtok",
    "sentencex": "sentencex",
    "spacy": "spacy",
}
SPLITTERS = tuple(SPLITTER_PACKAGES)

Span = tuple[int, int]


# --------------------------------------------------------------------------- adapters
#
# Each adapter returns the character offsets where the library thinks sentences start.
# Only starts are trusted: libraries disagree on whether trailing spaces belong to a
# sentence, some drop or rewrite characters, and pysbd's own char_span mode is known to
# mis-place repeated sentences. Re-deriving spans from starts (``_spans_from_starts``)
# guarantees that every non-space character is covered exactly once whatever the library does.


def _starts_from_strings(text: str, sentences: Iterable[str]) -> list[int]:
    """Locate the sentences a library returned as strings, in order, in ``text``."""
    starts: list[int] = []
    cursor = 0
    for sent in sentences:
        sent = sent.strip()
        if not sent:
            continue
        pos = text.find(sent, cursor)
        if pos < 0:
            # The library rewrote something inside the sentence; anchoring on its first
            # word still places the boundary, and the span is rebuilt from the original text.
            head = sent.split(None, 1)[0]
            pos = text.find(head, cursor)
            if pos < 0:
                continue
            sent = head
        starts.append(pos)
        cursor = pos + len(sent)
    return starts


def _blingfire() -> Callable[[str], list[int]]:
    import blingfire

    def starts(text: str) -> list[int]:
        _, offsets = blingfire.text_to_sentences_and_offsets(text)
        return [a for a, _b in offsets or ()]

    return starts


def _pysbd() -> Callable[[str], list[int]]:
    import pysbd

    # clean=False keeps the text as is, so the returned strings can be found in it.
    seg = pysbd.Segmenter(language="en", clean=False)
    return lambda text: _starts_from_strings(text, seg.segment(text))


def _syntok() -> Callable[[str], list[int]]:
    import syntok.segmenter as segmenter

    def starts(text: str) -> list[int]:
        return [sent[0].offset for para in segmenter.analyze(text) for sent in para if sent]

    return starts


def _segtok() -> Callable[[str], list[int]]:
    from segtok.segmenter import split_multi

    # split_multi also breaks at newlines, as the other splitters do.
    return lambda text: _starts_from_strings(text, split_multi(text))


def _sentencex() -> Callable[[str], list[int]]:
    import sentencex

    return lambda text: _starts_from_strings(text, sentencex.segment("en", text))


def _spacy() -> Callable[[str], list[int]]:
    import spacy

    # The rule-based sentencizer needs no model download (models are not on PyPI).
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return lambda text: [s.start_char for s in nlp(text).sents]


_ADAPTERS: dict[str, Callable[[], Callable[[str], list[int]]]] = {
    "blingfire": _blingfire,
    "pysbd": _pysbd,
    "syntok": _syntok,
    "segtok": _segtok,
    "sentencex": _sentencex,
    "spacy": _spacy,
}


@lru_cache(maxsize=None)
def _starts_fn(splitter: str) -> Callable[[str], list[int]]:
    if splitter not in _ADAPTERS:
        raise InputError("splitter", f"unknown sentence splitter {splitter!r}; choose one of {', '.join(SPLITTERS)}")
    try:
        return _ADAPTERS[splitter]()
    except ImportError as e:
        package = SPLITTER_PACKAGES[splitter]
        raise InputError("splitter", f"sentence splitter {splitter!r} needs the package {package!r} (pip install {package}): {e}")


def splitter_version(splitter: str = DEFAULT_SPLITTER) -> str | None:
    """Installed version of the package behind ``splitter`` (None when not installed)."""
    try:
        return metadata.version(SPLITTER_PACKAGES[splitter])
    except (KeyError, metadata.PackageNotFoundError):
        return None


# --------------------------------------------------------------------------- spans


def _spans_from_starts(text: str, starts: Iterable[int]) -> list[Span]:
    """Partition the non-space characters of ``text`` at ``starts`` into trimmed spans."""
    n = len(text)
    first = n - len(text.lstrip())
    if first >= n:
        return []
    bounds = {first}
    for s in starts:
        if first < s < n:
            # Snap a start that points at whitespace to the next character that is not.
            s += len(text[s:]) - len(text[s:].lstrip())
            if s < n:
                bounds.add(s)
    ordered = sorted(bounds)
    spans: list[Span] = []
    for i, s in enumerate(ordered):
        e = ordered[i + 1] if i + 1 < len(ordered) else n
        e = s + len(text[s:e].rstrip())
        spans.append((s, e))
    return spans


def split_sentences(text: str, splitter: str = DEFAULT_SPLITTER) -> list[Span]:
    """Split ``text`` into sentences, as ``(start, end)`` character spans (end exclusive).

    The spans index the original ``text``, are in order, carry no leading or trailing
    whitespace, and together cover every non-space character exactly once (text between
    two sentences is whitespace only). A text without sentence punctuation is one sentence;
    an empty or all-space text has none. ``splitter`` names the library (:data:`SPLITTERS`).
    """
    return _split(text, _starts_fn(splitter))


def _split(text: str, starts_fn: Callable[[str], list[int]]) -> list[Span]:
    if not text.strip():
        return []  # and Blingfire fails an assertion on the empty string
    return _spans_from_starts(text, starts_fn(text))


# --------------------------------------------------------------------------- corpus


def split_corpus(
    corpus_tsv: str | os.PathLike,
    out_tsv: str | os.PathLike,
    splitter: str = DEFAULT_SPLITTER,
    progress: bool = True,
) -> dict:
    """Split every passage of a DPR corpus TSV and write the sentence table.

    The table (:data:`dcsr.data.formats.SENTENCES_HEADER`) has one row per sentence:
    ``passage_id, sentence, start, end`` with sentences numbered from 0 in each passage and
    offsets into the passage text (not its title), in corpus order. The corpus is streamed
    and the table written row by row, so memory stays constant for DPR's 21M passages; the
    table appears under ``out_tsv`` only once complete. Returns statistics: ``passages``,
    ``sentences``, ``mean_sentences_per_passage``, ``max_sentences_per_passage``, and the
    splitter with its version.
    """
    from tqdm import tqdm

    starts_fn = _starts_fn(splitter)  # fail on a bad splitter before reading anything
    passages = sentences = max_sents = 0
    previous_id = None
    t0 = time.perf_counter()
    with atomic_open(out_tsv, "w", encoding="utf-8", newline="") as out:
        out.write("\t".join(SENTENCES_HEADER) + "\n")
        bar = tqdm(
            iter_passages(corpus_tsv),
            desc=f"split sentences ({splitter})",
            unit=" passages",
            file=sys.stderr,
            disable=not progress,
            mininterval=1.0,
            unit_scale=True,
        )
        for passage in bar:
            # Readers group the table by runs of equal ids, so two consecutive rows with the
            # same id would silently merge into one passage downstream.
            if passage.id == previous_id:
                raise InputError(at(corpus_tsv), f"passage id {passage.id} appears twice in a row")
            previous_id = passage.id
            spans = _split(passage.text, starts_fn)
            out.write("".join(f"{passage.id}\t{i}\t{s}\t{e}\n" for i, (s, e) in enumerate(spans)))
            passages += 1
            sentences += len(spans)
            max_sents = max(max_sents, len(spans))
        bar.close()
    return {
        "passages": passages,
        "sentences": sentences,
        "mean_sentences_per_passage": sentences / passages if passages else 0.0,
        "max_sentences_per_passage": max_sents,
        "splitter": splitter,
        "splitter_version": splitter_version(splitter),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def average_sentences_per_passage(sentence_table_path: str | os.PathLike) -> float:
    """Mean number of sentences per passage in a sentence table (DCSR's ``k``: the index is
    searched for the top ``100 * k`` sentences to find 100 passages)."""
    passages = sentences = 0
    for _pid, spans in passage_sentences(sentence_table_path):
        passages += 1
        sentences += len(spans)
    if not passages:
        raise InputError(at(sentence_table_path), "the sentence table has no sentences")
    return sentences / passages
