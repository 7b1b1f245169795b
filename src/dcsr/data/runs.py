"""Retrieval runs as TREC run files: ``qid Q0 docid rank score tag``, one line per hit.

``qid`` is the 0-based index of the question in its qas file (or training JSON); ``docid``
is the passage id of the corpus. Every retriever (BM25, DPR, DCSR, any encoder pair)
writes this one format, and evaluation reads only it.

A run lists every question it searched: a question that got no hit at all (BM25 finds none
of its words) has the comment line ``# no hits: QID`` instead, so that evaluation can tell a
question without hits from a question missing from the run (an error). Other lines that
start with ``#`` are comments.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from typing import Iterable, Iterator, Mapping, Sequence

from dcsr.errors import InputError, at
from dcsr.data.formats import not_utf8
from dcsr.fsutil import atomic_open

Hits = Sequence[tuple[int, float]]  # (passage id, score), best first

NO_HITS = "# no hits: {qid}"
_NO_HITS_RE = re.compile(r"#\s*no hits:\s*(-?\d+)\s*")


def write_trec(path: str | os.PathLike, run: Mapping[int, Hits] | Iterable[tuple[int, Hits]], tag: str) -> None:
    """Write a run (atomically); a question with an empty hit list gets a ``# no hits`` line.

    Scores are written in full (``repr`` of the float: the shortest text that reads back as the
    same float), not rounded: trec_eval and ir_measures rank by the score column, ties by docid,
    so scores that differ only past a rounding (DCSR's HasAns probabilities far down a ranking)
    must stay apart for them to rank as we do (trec_eval keeps a score as a float32, so ties
    closer than that remain: :mod:`dcsr.evaluation.trec_eval`)."""
    items = run.items() if isinstance(run, Mapping) else run
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for qid, hits in sorted(items, key=lambda kv: kv[0]):
            if not hits:
                fh.write(NO_HITS.format(qid=qid) + "\n")
            for rank, (pid, score) in enumerate(hits, start=1):
                fh.write(f"{qid} Q0 {pid} {rank} {float(score)!r} {tag}\n")


def iter_trec(path: str | os.PathLike) -> Iterator[tuple[int, int | None, int, float]]:
    """The lines of a TREC run, streamed, as ``(qid, pid, rank, score)``; a ``# no hits: QID``
    line as ``(qid, None, 0, 0.0)``. The one parser of the format: a malformed line is an
    :class:`InputError` naming the file and line."""
    for _line, *hit in iter_trec_lines(path):
        yield tuple(hit)


def iter_trec_lines(path: str | os.PathLike) -> Iterator[tuple[int, int, int | None, int, float]]:
    """:func:`iter_trec` with each hit's line number first: ``(line, qid, pid, rank, score)``."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if line.lstrip().startswith("#"):
                    m = _NO_HITS_RE.fullmatch(line.strip())
                    if m:
                        yield line_no, int(m.group(1)), None, 0, 0.0
                    continue
                parts = line.split()
                if not parts:
                    continue
                if len(parts) != 6:
                    raise InputError(at(path, line_no), f"expected 6 fields: qid Q0 docid rank score tag, found {len(parts)}")
                try:
                    qid, pid, rank, score = int(parts[0]), int(parts[2]), int(parts[3]), float(parts[4])
                except ValueError:
                    raise InputError(at(path, line_no), "qid, docid and rank must be integers, score a number")
                if score != score:
                    raise InputError(at(path, line_no), f"score {parts[4]!r} is not a number; a NaN score has no "
                                                        "place in a ranking (trec_eval would order it arbitrarily)")
                if math.isinf(score):
                    raise InputError(at(path, line_no), f"score {parts[4]!r} is infinite; a ranking's scores are "
                                                        "finite (fusion would divide by an infinite span)")
                yield line_no, qid, pid, rank, score
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def read_trec(path: str | os.PathLike) -> dict[int, list[tuple[int, float]]]:
    """Read a TREC run; hits of each question come back best first, by the rank column (``# no
    hits`` questions with an empty list). A passage listed twice for one question is an
    :class:`InputError`: it would take two of the top k places (and trec_eval keeps one of its
    scores). So is a rank given twice for one question (some tools write every hit as rank 0 or
    1): which hit is first would be up to the reader (trec_eval goes by score, a sort by rank by
    passage id), and top-k would change with it."""
    run: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    seen: dict[int, set[int]] = defaultdict(set)
    ranks: dict[int, set[int]] = defaultdict(set)
    for line, qid, pid, rank, score in iter_trec_lines(path):
        if pid is None:
            run[qid]  # noqa: B018 - present, without hits
            continue
        if pid in seen[qid]:
            raise InputError(at(path, line), f"passage {pid} is listed a second time for question {qid}; a run "
                                             "ranks each passage once per question")
        if rank in ranks[qid]:
            raise InputError(at(path, line), f"rank {rank} is given a second time for question {qid} (passage "
                                             f"{pid}); a run gives each hit of a question its own rank, so that "
                                             "the order of its hits is the run's and not the reader's")
        seen[qid].add(pid)
        ranks[qid].add(rank)
        run[qid].append((rank, pid, score))
    return {q: [(pid, s) for _, pid, s in sorted(hits)] for q, hits in run.items()}


def run_arrays(path: str | os.PathLike, n_questions: int, depth: int):
    """A TREC run as NumPy arrays ``(pids [n, depth] int64, -1 padded; scores [n, depth]
    float32)``, streamed (no per-hit Python objects: a mining run of 10^5 questions x 100 hits
    stays small). Questions outside ``0..n-1`` and ranks beyond ``depth`` are left out; a rank
    given twice for one question is an :class:`InputError` (as in :func:`read_trec`), not a hit
    silently written over."""
    import numpy as np

    pids = np.full((n_questions, depth), -1, dtype=np.int64)
    scores = np.zeros((n_questions, depth), dtype=np.float32)
    for line, qid, pid, rank, score in iter_trec_lines(path):
        if pid is not None and 0 <= qid < n_questions and 1 <= rank <= depth:
            if pids[qid, rank - 1] != -1:
                raise InputError(at(path, line), f"rank {rank} is given a second time for question {qid} "
                                                 f"(passage {pid}); a run gives each hit of a question its own rank")
            pids[qid, rank - 1] = pid
            scores[qid, rank - 1] = score
    return pids, scores
