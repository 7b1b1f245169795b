"""Dataset variants and multi-dataset training sets, in DPR's formats.

- A dataset's *dev questions* as a qas TSV (DCSR Table 8 searches SQuAD's dev questions as a
  test set): :func:`write_dev_questions`.
- One training set from several (DCSR Table 2, *Multi*: one bi-encoder on NQ + Trivia +
  SQuAD): :func:`concat_biencoder` streams the files one after another into one JSON, each
  record marked with the file it came from (``training_set``); the trainer then makes every
  global batch one file's, as DPR's multi-set training (``MultiSetDataIterator``) does.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Iterator, Sequence

from tqdm import tqdm

from dcsr.data.formats import QA, SOURCE_KEY, iter_biencoder, iter_qas, write_biencoder, write_qas
from dcsr.errors import InputError

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
    """The records of several biencoder JSON files, file after file, each streamed, each marked
    with its file as ``training_set`` (``<position>:<file name>``), for the trainer's batches."""
    for position, path in enumerate(paths):
        n = 0
        # DPR's mined training sets are GBs each: say how far a merge is
        bar = tqdm(desc=os.path.basename(path), unit=" records", file=sys.stderr, disable=not progress, mininterval=2.0)
        for n, rec in enumerate(iter_biencoder(path, require_positive=False), start=1):
            yield {**rec, SOURCE_KEY: f"{position}:{os.path.basename(path)}"}
            bar.update()
        bar.close()
        log.info("%s: %d records", path, n)


def concat_biencoder(paths: Sequence[str | os.PathLike], out_json: str | os.PathLike, progress: bool = False) -> int:
    """Write the records of ``paths`` in order as one biencoder JSON (atomically: a bad record
    in any input leaves no output). Returns the records written."""
    return write_biencoder(out_json, iter_concatenated(paths, progress))


def _normalized(question: str) -> str:
    return " ".join(question.lower().split())


def check_dev_disjoint(dev_qas: str | os.PathLike, test_qas: str | os.PathLike, refuse: bool = True) -> int:
    """Refuse dev questions that are also test questions (compared lower-cased, whitespace
    collapsed): what is chosen on dev questions (a HasAns temperature, a fusion weight) would
    be chosen on the test set. A user's own ``<dataset>.dev`` replaces the generated split, so
    nothing else keeps the two apart. With ``refuse`` False (a dataset's own dev split, whose
    publisher may repeat a question word for word), the overlap is logged instead. Returns
    the dev questions checked."""
    test = {_normalized(qa.question) for qa in iter_qas(test_qas)}
    dev = [qa.question for qa in iter_qas(dev_qas)]
    shared = [q for q in dev if _normalized(q) in test]
    if shared and not refuse:
        log.warning("%d of the %d dev questions of %s are also test questions of %s (the first: %r): the dataset's "
                    "own splits share them", len(shared), len(dev), dev_qas, test_qas, shared[0][:80])
    elif shared:
        raise InputError(str(dev_qas), f"{len(shared)} of its {len(dev)} dev questions are test questions of "
                         f"{test_qas} (the first: {shared[0][:80]!r}); choosing a setting on them would choose it on "
                         "the test set: remove them from the dev split")
    return len(dev)
