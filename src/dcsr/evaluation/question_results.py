"""A run's per-question results (``*.questions.jsonl``, written by
:func:`dcsr.evaluation.metrics.evaluate_run`): one JSON object a line with the question's
``qid``, ``question``, ``answers``, ``first_hit`` (the rank of the first passage holding an
answer, or null), the retrieved ``hits`` and their ``has_answer`` flags. The claims ledger and
the answer-match qrels read them.
"""

from __future__ import annotations

import json
import os
from typing import Callable, TypeVar

from dcsr.data.formats import strict_object
from dcsr.errors import InputError, at

T = TypeVar("T")


def read_question_results(questions_jsonl: str | os.PathLike, read: Callable[[dict], T]) -> dict[int, T]:
    """``{qid: read(record)}`` of a run's per-question results (the ``*.questions.jsonl`` that
    :func:`evaluate_run` writes); a line ``read`` cannot take, or a question given a second time
    (the later line would silently replace the earlier), is an :class:`InputError` naming it."""
    out = {}
    lines: dict[int, int] = {}
    with open(questions_jsonl, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line, object_pairs_hook=strict_object)  # a key twice, a lone surrogate: refused
                qid = int(rec["qid"])
                value = read(rec)
            except (ValueError, KeyError, TypeError) as e:
                raise InputError(at(questions_jsonl, n), f"not a per-question result ({e})")
            if qid in lines:
                raise InputError(at(questions_jsonl, n), f"question {qid} is given a second time (first at line "
                                                         f"{lines[qid]}); a run's results give each question once")
            out[qid], lines[qid] = value, n
    return out
