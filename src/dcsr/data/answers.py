"""DPR's answer matching, reproduced exactly (``dpr/data/qa_validation.py`` and DrQA's
``SimpleTokenizer``): a passage "has the answer" when the NFD-normalised, lower-cased token
sequence of some answer occurs in the passage's token sequence. CuratedTREC's answers are
regular expressions and use ``match_type="regex"``.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex

from dcsr.settings import MATCH_TYPES

# As DrQA's SimpleTokenizer: runs of letters/numbers/marks, or any other non-space character.
_ALPHA_NUM = r"[\p{L}\p{N}\p{M}]+"
_NON_WS = r"[^\p{Z}\p{C}]"
_TOKEN_RE = regex.compile(f"({_ALPHA_NUM})|({_NON_WS})", flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)


def _normalize(text: str) -> str:
    return unicodedata.normalize("NFD", text)


def tokens(text: str) -> list[str]:
    """Lower-cased SimpleTokenizer tokens of NFD-normalised ``text`` (DPR's ``words(uncased=True)``)."""
    return [m.group().lower() for m in _TOKEN_RE.finditer(_normalize(text))]


@lru_cache(maxsize=65536)
def _answer_tokens(answer: str) -> tuple[str, ...]:
    return tuple(tokens(answer))


@lru_cache(maxsize=4096)
def _compile(pattern: str):
    try:
        return regex.compile(_normalize(pattern), flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE)
    except regex.error:
        return None  # as DPR: an answer that is not a valid regex never matches


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
            if pattern is not None and pattern.search(prepared) is not None:
                return True
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
