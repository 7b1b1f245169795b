"""The values that users' files write as text, read strictly: a JSON object (a key given twice, a
lone surrogate; what Python's JSON reader cannot hold) and the Python list literal of a qas file's
answers, checked before ``ast.literal_eval`` sees it. The readers (:mod:`dcsr.data.formats`,
:mod:`dcsr.data.beir`, :mod:`dcsr.data.squad`) add the file and line; :func:`read_json_object`
reads a whole file that holds one JSON object (a model's ``dcsr.json``, a downloads lock file)."""

from __future__ import annotations

import json
import os
import re
import sys

from dcsr.errors import InputError, at


class JSONProblem(ValueError):
    """What :func:`strict_object` refuses; the reader adds the file and line."""


#: What Python's JSON reader raises, besides :class:`json.JSONDecodeError`, on a document it
#: parses but cannot hold: a number of more than ``sys.get_int_max_str_digits()`` digits
#: (ValueError), arrays or objects nested past the recursion limit (RecursionError), a value too
#: large for memory (MemoryError). Catch :class:`JSONProblem` (a ValueError too) before these.
JSON_LIMITS = (ValueError, RecursionError, MemoryError)


def json_limit_problem(e: BaseException) -> str:
    """What is wrong with a JSON document that raised one of :data:`JSON_LIMITS`, for a message."""
    if isinstance(e, RecursionError):
        return (f"arrays or objects nested too deeply to read (Python's JSON reader stops at about "
                f"{sys.getrecursionlimit()} levels; this format needs a few): look for a long run of "
                "'[' or '{'")
    if isinstance(e, MemoryError):
        return "a value too large to read into memory"
    # the only other ValueError of the decoder: int() refusing a long run of digits
    return (f"a number of more than {sys.get_int_max_str_digits()} digits, which Python refuses to read "
            "(no field of this format needs one): fix the number")


def no_surrogate(text: str) -> None:
    """``text`` holds no lone surrogate: JSON's ``"\\ud800"`` escape (or a Python literal's) decodes
    to a code point that is not text, and the first tokenizer or UTF-8 write meets it with a
    traceback."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        shown = text if len(text) <= 60 else f"{text[:50]}..."
        raise JSONProblem(f"the string {shown!r} holds a lone surrogate ({text[e.start]!r}): an escape "
                          "\\ud800-\\udfff without its pair, which is not text; fix the escape or remove it") from None


def _strings_in(value) -> None:
    if isinstance(value, str):
        no_surrogate(value)
    elif isinstance(value, list):  # objects inside were checked when they were made
        for item in value:
            _strings_in(item)


def strict_object(pairs: list) -> dict:
    """``object_pairs_hook`` of every JSON reader of a user's file: a key given twice in one object
    is an error (``json`` keeps the last value and drops the first, so a pasted ``answers`` list
    silently replaced the real one), and so is a string holding a lone surrogate."""
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise JSONProblem(f"duplicate key {key!r} in a JSON object (a JSON reader keeps the last and drops "
                              "the first silently); remove or rename one")
        no_surrogate(key)
        _strings_in(value)
        obj[key] = value
    return obj


def read_json_object(path: str | os.PathLike, expected: str = "a JSON object") -> dict:
    """The JSON object that the file ``path`` holds, read strictly: bytes that are not UTF-8,
    malformed JSON, what :func:`strict_object` refuses, one of :data:`JSON_LIMITS`, or a value
    other than an object (``expected`` says which) is an :class:`~dcsr.errors.InputError` naming
    the file (and the line), never a traceback."""
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(at(path, raw.count(b"\n", 0, e.start) + 1),
                         f"not UTF-8 text (byte 0x{raw[e.start]:02x} at byte offset {e.start}); the file is "
                         "damaged or was not written by this code: re-encode it as UTF-8 or write it again") from None
    try:
        value = json.loads(text, object_pairs_hook=strict_object)
    except json.JSONDecodeError as e:
        raise InputError(at(path, e.lineno), f"malformed JSON: {e.msg} (column {e.colno})") from None
    except JSONProblem as e:
        raise InputError(str(path), str(e)) from None
    except JSON_LIMITS as e:
        raise InputError(str(path), f"the JSON holds {json_limit_problem(e)}") from None
    if not isinstance(value, dict):
        found = {list: "an array", str: "a string", bool: "true or false",
                 type(None): "null"}.get(type(value), "a number")
        raise InputError(str(path), f"expected {expected}, found {found}")
    return value


# --------------------------------------------------------------------------- qas answers


#: One Python string literal as an answer list writes it: a prefix (r, u; b or f are let through
#: to be refused by ``literal_eval``), then '...' or "..." or a triple-quoted string.
_PY_STRING = re.compile("[A-Za-z]{0,2}(?:"
                        r"'''(?:[^'\\]|\\.|'(?!''))*'''"
                        r'|"""(?:[^"\\]|\\.|"(?!""))*"""'
                        r"|'(?:[^'\\\n]|\\.)*'"
                        r'|"(?:[^"\\\n]|\\.)*"'
                        ")", re.DOTALL)
_PY_STRING_START = re.compile(r"""[A-Za-z]{0,2}['"]""")
#: What may stand between the tokens of a Python literal: white space and a comment.
_PY_GAP = re.compile(r"(?:\s|#[^\n]*)*")

NOT_A_LIST = "not a list"
NOT_STRINGS = "not strings"


def answer_list_shape(raw: str) -> str | None:
    """None when ``raw`` is a flat Python list of string literals (``['Paris', "l'Orient"]``, as
    DPR's qas files write answers), else :data:`NOT_A_LIST` or :data:`NOT_STRINGS`.

    Checked in one linear pass before ``ast.literal_eval``, which is only ever given such a flat
    list: Python's parser and ``literal_eval`` recurse into nested values, so a long run of '-'
    (unary minus) or '[' in a bad file ended in a RecursionError or a MemoryError, as the docs of
    ``ast.literal_eval`` warn. Which strings the literals stand for is left to ``literal_eval``,
    so valid files read exactly as before; a string in parentheses (``[('a')]``), which no writer
    of DPR's format makes, is refused."""
    pos = _PY_GAP.match(raw).end()
    if not raw.startswith("[", pos):
        return NOT_A_LIST
    pos += 1
    after_element = False
    while True:
        pos = _PY_GAP.match(raw, pos).end()
        if pos == len(raw):
            return NOT_A_LIST  # unclosed
        if raw[pos] == "]":
            return None if _PY_GAP.match(raw, pos + 1).end() == len(raw) else NOT_A_LIST
        if raw[pos] == ",":
            if not after_element:
                return NOT_A_LIST  # '[,' or ',,'
            pos += 1
            after_element = False
            continue
        string = _PY_STRING.match(raw, pos)
        if string is not None:  # a second one after a string is Python's implicit concatenation
            pos = string.end()
            after_element = True
            continue
        if after_element or _PY_STRING_START.match(raw, pos):
            return NOT_A_LIST  # a missing ',' or an unterminated string
        return NOT_STRINGS  # a number, a name, a nested list ...
