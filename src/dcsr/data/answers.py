"""DPR's question text (``normalize_question``) and DPR's answer matching, reproduced exactly (``dpr/data/qa_validation.py`` and DrQA's
``SimpleTokenizer``): a passage "has the answer" when the NFD-normalised, lower-cased token
sequence of some answer occurs in the passage's token sequence. CuratedTREC's answers are
regular expressions and use ``match_type="regex"``.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

from dcsr.errors import InputError
from dcsr.settings import BAD_PATTERNS, MATCH_TYPES, QUESTION_TEXTS

# As DrQA's SimpleTokenizer: runs of letters/numbers/marks, or any other non-space character.
_ALPHA_NUM = r"[\p{L}\p{N}\p{M}]+"
_NON_WS = r"[^\p{Z}\p{C}]"
_TOKEN_RE = regex.compile(f"({_ALPHA_NUM})|({_NON_WS})", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)


def encoder_question(question: str, rule: str, where: str = "question_text") -> str:
    """The question as an encoder sees it under ``question_text`` ``rule``: ``raw``, as written;
    ``dpr``, as DPR's and DCSR's ``normalize_question`` gives it to the question encoder in
    training and in retrieval (a right single quote ``’`` written ``'``, which BERT's tokenizers
    keep apart). An unknown rule is an :class:`InputError` naming ``where``."""
    if rule not in QUESTION_TEXTS:
        raise InputError(where, f"unknown question_text {rule!r}; expected {' or '.join(QUESTION_TEXTS)}")
    return question.replace("\u2019", "'") if rule == "dpr" else question


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def tokens(text: str) -> list[str]:
    """Lower-cased SimpleTokenizer tokens of NFD-normalised ``text`` (DPR's ``words(uncased=True)``)."""
    return [m.group().lower() for m in _TOKEN_RE.finditer(_normalize(text))]


@lru_cache(maxsize=65536)
def _answer_tokens(answer: str) -> tuple[str, ...]:
    return tuple(tokens(answer))


_FLAGS = regex.IGNORECASE | regex.UNICODE | regex.MULTILINE

#: Seconds one regex answer may search one passage: DPR's CuratedTREC patterns take microseconds
#: on a 100-word passage; a pattern that backtracks catastrophically (``(a|aa)+$``) would hang
#: the job instead (:class:`PatternTimeout`).
REGEX_TIMEOUT = 1.0

#: Texts on which a regex answer must find no empty match: one that does (``a*``, ``(x)?``,
#: ``\b``) matches in every passage (or every passage with a word), its question answered at rank 1.
_EMPTY_PROBES = ("", " ", "a 1 , A")


class PatternTimeout(InputError):
    """A regex answer that took more than :data:`REGEX_TIMEOUT` seconds on one passage."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        super().__init__(f"regex answer {pattern!r}",
                         f"took more than {REGEX_TIMEOUT:g} s to search one passage (catastrophic backtracking, as in "
                         "(a+)+$); rewrite the pattern")


def _compile_problem(normalized: str) -> str | None:
    """Why the NFD-normalized regex answer does not compile with ``regex``, the module DPR
    matches with (``dpr/data/qa_validation.py``: ``import regex as re``); None when it compiles.
    So a pattern only ``regex`` takes, as ``\\p{L}``, is found here as in DPR."""
    try:
        regex.compile(normalized, flags=_FLAGS)
    except (regex.error, OverflowError, RecursionError, ValueError) as e:
        return str(e)
    return None


@lru_cache(maxsize=4096)
def _compile(pattern: str):
    normalized = _normalize(pattern)
    if _compile_problem(normalized) is not None:
        return None  # as DPR: an answer that is not a valid regex never matches (check_patterns says so)
    return regex.compile(normalized, flags=_FLAGS)


def pattern_compiles(pattern: str) -> bool:
    """Whether DPR's matching can search with the regex answer ``pattern`` (after its NFD
    normalization): one that does not compile is never found."""
    return _compile(pattern) is not None


def check_patterns(answers: list[str], where: str, bad: str = "refuse") -> list[int]:
    """Every regex answer compiles and finds no empty match: DPR's matching scores a pattern that
    does not compile as never found (its question a miss, silently) and one that matches the
    empty string as found in every passage. An :class:`InputError` at ``where`` (the question's
    file and line) names the answer.

    ``bad="never_found"`` lets a pattern that does not compile through, as DPR's
    ``regex_match`` scores it: never found. DPR's CuratedTREC test file likely holds such
    patterns: an accented letter escaped (``P\\étain``, ``re.escape`` before Python 3.7), which
    DPR's NFD normalization turns into an escaped ASCII letter, mostly a bad escape (3 of the 694
    test questions of brmson/dataset-factoid-curated's ``large2180-test.tsv`` in its last
    version; ``\\á`` and ``\\ñ`` become ``\\a`` and ``\\n``, which compile to other characters, so
    such an alternative never matches without a word, in DPR's code as here). Returns the
    indices of those answers (empty with ``bad="refuse"``). An empty match or a timeout is
    refused either way."""
    if bad not in BAD_PATTERNS:
        raise InputError("bad_patterns", f"unknown value {bad!r}; expected {' or '.join(BAD_PATTERNS)}")
    never = []
    for i, answer in enumerate(answers):
        pattern = _compile(answer)
        if pattern is None:
            if bad == "never_found":
                never.append(i)
                continue
            raise InputError(where, f"answer {i} ({answer!r}) is not a valid regular expression "
                                    f"({_compile_problem(_normalize(answer))}); a pattern that does not compile "
                                    "never matches: fix it, or escape it (regex.escape) to match it as text (or, for "
                                    "DPR's own files, set the dataset's bad_patterns: never_found, as DPR scores it)")
        try:
            empty = any(m.start() == m.end() for probe in _EMPTY_PROBES
                        for m in pattern.finditer(probe, timeout=REGEX_TIMEOUT))
        except TimeoutError:
            raise InputError(where, PatternTimeout(answer).problem) from None
        if empty:
            raise InputError(where, f"answer {i} ({answer!r}) matches the empty string, so it would be found in "
                                    "every passage; make it match at least one character")
    return never


def has_answer(answers: list[str], text: str, match_type: str = "string") -> bool:
    """True when ``text`` contains one of ``answers`` under DPR's matching rules."""
    matcher = PassageMatcher(match_type)
    return matcher.match(answers, matcher.prepare(text))


class PassageMatcher:
    """``has_answer`` over many questions and few passages: each passage is tokenized (or
    normalized, for regex matching) once, not once per question that retrieved it."""

    def __init__(self, match_type: str = "string"):
        if match_type not in MATCH_TYPES:
            raise ValueError(f"match_type must be one of {MATCH_TYPES}, not {match_type!r}")
        self.match_type = match_type
        self._cache: dict = {}

    def __call__(self, answers: list[str], key, text: str) -> bool:
        """``has_answer(answers, text)``; ``key`` names the passage in the cache."""
        prepared = self._cache.get(key)
        if prepared is None:
            prepared = self._cache[key] = self.prepare(text)
        return self.match(answers, prepared)

    def prepare(self, text: str):
        """The passage as the matcher compares it (tokens, or NFD text for regex)."""
        return tokens(text) if self.match_type == "string" else _normalize(text)

    def match(self, answers: list[str], prepared) -> bool:
        """``has_answer`` on a passage that :meth:`prepare` made."""
        if self.match_type == "string":
            return has_answer_in_tokens(answers, prepared)
        for answer in answers:
            pattern = _compile(answer)
            if pattern is None:
                continue
            try:
                if pattern.search(prepared, timeout=REGEX_TIMEOUT) is not None:
                    return True
            except TimeoutError:
                raise PatternTimeout(answer) from None
        return False


def has_answer_in_tokens(answers: list[str], words: list[str]) -> bool:
    """DPR's string match on an already tokenized passage (``tokens(text)``)."""
    for answer in answers:
        ans = _answer_tokens(answer)
        n = len(ans)
        if n == 0:
            return True  # as DPR: an answer with no tokens matches every passage
        first = ans[0]
        for i in range(0, len(words) - n + 1):
            if words[i] == first and tuple(words[i : i + n]) == ans:
                return True
    return False
