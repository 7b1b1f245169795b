"""Dataset variants and multi-dataset training sets, in DPR's formats.

- A dataset's *dev questions* as a qas TSV (DCSR Table 8 searches SQuAD's dev questions as a
  test set): :func:`write_dev_questions`.
- One training set from several (DCSR Table 2, *Multi*: one bi-encoder on NQ + Trivia +
  SQuAD): :func:`concat_biencoder` streams the files one after another into one JSON; the
  trainer shuffles, as DPR's multi-set training concatenates its files before shuffling.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Iterator, Sequence

from tqdm import tqdm

from dcsr.data.formats import QA, iter_biencoder, write_biencoder, write_qas

log = logging.getLogger(__name__)


def dev_questions(dev_json: str | os.PathLike) -> Iterator[QA]:
    """Every question of a biencoder dev JSON with its answers, in file order. Questions without
    a positive passage are kept: a test set is scored by its answers, not by gold passages."""
    for rec in iter_biencoder(dev_json, require_positive=False):
        yield QA(rec["question"], rec["answers"])


def write_dev_questions(dev_json: str | os.PathLike, out_qas: str | os.PathLike) -> int:
    """Write :func:`dev_questions` as a DPR qas TSV (atomically). Returns the questions written."""
    n = write_qas(out_qas, dev_questions(dev_json))
    log.info("%s: %d dev questions -> %s", dev_json, n, out_qas)
    return n


def iter_concatenated(paths: Sequence[str | os.PathLike], progress: bool = False) -> Iterator[dict]:
    """The records of several biencoder JSON files, file after file, each streamed."""
    for path in paths:
        n = 0
        # DPR's mined training sets are GBs each: say how far a merge is
        bar = tqdm(desc=os.path.basename(path), unit=" records", file=sys.stderr, disable=not progress, mininterval=2.0)
        for n, rec in enumerate(iter_biencoder(path, require_positive=False), start=1):
            yield rec
            bar.update()
        bar.close()
        log.info("%s: %d records", path, n)


def concat_biencoder(paths: Sequence[str | os.PathLike], out_json: str | os.PathLike, progress: bool = False) -> int:
    """Write the records of ``paths`` in order as one biencoder JSON (atomically: a bad record
    in any input leaves no output). Returns the records written."""
    return write_biencoder(out_json, iter_concatenated(paths, progress))
