"""Retrieval runs as TREC run files: ``qid Q0 docid rank score tag``, one line per hit.

``qid`` is the 0-based index of the question in its qas file (or training JSON); ``docid``
is the passage id of the corpus. Every retriever (BM25, DPR, DCSR, any encoder pair)
writes this one format, and evaluation reads only it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Iterable, Mapping, Sequence

from .errors import InputError, at
from .fsutil import atomic_open

Hits = Sequence[tuple[int, float]]  # (passage id, score), best first


def write_trec(path: str | os.PathLike, run: Mapping[int, Hits] | Iterable[tuple[int, Hits]], tag: str) -> None:
    items = run.items() if isinstance(run, Mapping) else run
    with atomic_open(path, "w", encoding="utf-8") as fh:
        for qid, hits in sorted(items, key=lambda kv: kv[0]):
            for rank, (pid, score) in enumerate(hits, start=1):
                fh.write(f"{qid} Q0 {pid} {rank} {float(score):.6f} {tag}\n")


def read_trec(path: str | os.PathLike) -> dict[int, list[tuple[int, float]]]:
    """Read a TREC run; hits of each question come back best first."""
    run: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for line_no, line in enumerate(fh, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise InputError(at(path, line_no), "expected 6 fields: qid Q0 docid rank score tag")
            try:
                qid, pid, rank, score = int(parts[0]), int(parts[2]), int(parts[3]), float(parts[4])
            except ValueError:
                raise InputError(at(path, line_no), "qid, docid and rank must be integers, score a number")
            run[qid].append((rank, pid, score))
    return {q: [(pid, s) for _, pid, s in sorted(hits)] for q, hits in run.items()}
