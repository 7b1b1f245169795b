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
name for comparison when their package is installed. ``dcsr`` is DCSR's own rule
(:func:`dcsr_sentence_starts`, the authors' ``process_ctx.py``), which made the corpus the paper's
numbers come from: the paper configs take it (``dcsr.splitter``).
"""

from __future__ import annotations

import os
import re
import sys
import time
from functools import lru_cache
from importlib import metadata
from typing import Callable, Iterable, Sequence

from dcsr.errors import InputError, at
from dcsr.data.formats import SENTENCES_HEADER, iter_passages, passage_sentences
from dcsr.fsutil import atomic_open
from dcsr.settings import DEFAULT_SPLITTER
from dcsr.settings import SPLITTERS as SETTING_SPLITTERS

# name -> the PyPI distribution that provides it (to name it in errors and in stats); None: this module.
SPLITTER_PACKAGES = {
    "blingfire": "blingfire",
    "dcsr": None,
    "pysbd": "pysbd",
    "syntok": "syntok",
    "segtok": "segtok",
    "sentencex": "sentencex",
    "spacy": "spacy",
}
SPLITTERS = tuple(SPLITTER_PACKAGES)
assert set(SPLITTERS) == set(SETTING_SPLITTERS), "dcsr.settings.SPLITTERS names these splitters"

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


#: What the ``dcsr`` rule follows, as a splitter's version: the authors' file at their commit.
DCSR_RULE_VERSION = "chengzhipanpan/DCSR@1daaf81 downloads/data/wikipedia_split/process_ctx.py"
#: The words DCSR's rule never ends a sentence at (``process_ctx.py``'s list).
DCSR_NO_END = frozenset(["etc.", "e.g.", "diff.", "vs.", "i.e.", "Mr.", "Miss.", "Mrs.", "B.C.", "A.D."])
#: A sentence of DCSR's rule ends only after this many words (``len(...) > 8`` with its ``<sent>`` counted) ...
DCSR_MIN_WORDS = 8
#: ... and a passage's last sentence of fewer words than this joins the one before (``< 8``, the same count).
DCSR_MIN_LAST_WORDS = 7


def _ascii_letter(c: str) -> bool:
    return "A" <= c <= "Z" or "a" <= c <= "z"


def dcsr_sentence_starts(text: str) -> list[int]:
    """DCSR's own rule (chengzhipanpan/DCSR, ``downloads/data/wikipedia_split/process_ctx.py``,
    ``process_paragraph_v2``, which made the corpus the paper's numbers come from), as the
    character offsets where its sentences start. Over the whitespace-separated words: a word
    ending in ``.``, ``!`` or ``?`` ends a sentence unless it is in :data:`DCSR_NO_END`, has
    anything but ASCII letters before its last character (``U.S.``, ``1990.``), two or more
    capitals, or is one capital and the stop (``J.``), or the next word does not start with an
    ASCII capital; and only once the sentence has :data:`DCSR_MIN_WORDS` words. A last
    sentence of fewer than :data:`DCSR_MIN_LAST_WORDS` words is joined to the one before (the
    authors' training files, ``downloads/data/retriever/process_ctx.py``, keep it apart; the
    corpus, which retrieval searches, joins it). A passage the rule leaves without a sentence
    (under 7 words: the authors' corpus gives it no ``<sent>``, so no vector) is one sentence here."""
    words = [(m.start(), m.group()) for m in re.finditer(r"\S+", text)]
    starts, size = [words[0][0]] if words else [], 0
    for i, (_, word) in enumerate(words):
        size += 1
        if word[-1] not in ".!?" or word in DCSR_NO_END:
            continue
        body = word[:-1]
        capitals = sum("A" <= c <= "Z" for c in body)
        if not all(_ascii_letter(c) for c in body) or capitals > 1 or (len(body) == 1 and capitals == 1):
            continue
        last = i == len(words) - 1
        if not last and not ("A" <= words[i + 1][1][0] <= "Z"):
            continue
        if size >= DCSR_MIN_WORDS and not last:
            starts.append(words[i + 1][0])
            size = 0
    if len(starts) > 1 and size < DCSR_MIN_LAST_WORDS:
        starts.pop()
    return starts


def _dcsr() -> Callable[[str], list[int]]:
    return dcsr_sentence_starts


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
    "dcsr": _dcsr,
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
    if splitter in SPLITTER_PACKAGES and SPLITTER_PACKAGES[splitter] is None:
        return DCSR_RULE_VERSION  # this module's own port (jobs import src/, with no package metadata)
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


def spans_fit(text: str, spans: Sequence[Span]) -> bool:
    """Whether ``spans`` (a sentence table's, split from some text) are sentence spans of
    ``text`` as :func:`split_sentences` makes them: they start at ``text``'s first non-space
    character, end at its last, carry no edge whitespace, and only whitespace lies between
    them. Spans of another text (a passage whose text in a training file differs from the
    corpus's) almost never pass, and are split again rather than cut words."""
    return _spans_from_starts(text, [s for s, _ in spans]) == [tuple(sp) for sp in spans]


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
