"""Corpus subsets (DCSR Tables 4-7): the first N passages, or a seeded random sample of an
exact size, written as a DPR passage TSV with the passages' ids and order kept.

Both stream the source corpus (21M passages never sit in memory): the sample counts the rows
in a first pass, draws the row numbers, marks them in a byte mask (21 MB for 21M rows) and
keeps the marked rows in a second pass.

The gold passages of the training and test questions are not forced into a subset: the DCSR
paper samples "1/20 of the whole corpus" and says nothing of keeping them, so a question whose
gold passage was not drawn can only be answered by another passage that contains the answer.
"""

from __future__ import annotations

import logging
import os
import sys
from decimal import ROUND_HALF_UP, Decimal
from typing import Iterator

import numpy as np
from tqdm import tqdm

from dcsr.errors import InputError
from dcsr.data.formats import Passage, iter_passages, write_corpus

log = logging.getLogger(__name__)


def sample_size(n_records: int, fraction: float) -> int:
    """``round(fraction * n_records)``, halves rounded up, at least 1.

    Rounded in decimal so that a fraction written as ``0.15`` of 10 records is 2 (1.5 rounded
    up), not 1 as binary ``0.15 * 10 = 1.4999...`` would give.
    """
    return max(1, int((Decimal(repr(float(fraction))) * n_records).to_integral_value(ROUND_HALF_UP)))


def count_passages(corpus: str | os.PathLike, progress: bool = False) -> int:
    """Passages (rows after the header) of a DPR corpus TSV, every row checked."""
    bar = tqdm(desc=f"counting {os.path.basename(corpus)}", unit=" passages", file=sys.stderr,
               disable=not progress, mininterval=2.0)
    n = 0
    for _ in iter_passages(corpus):
        n += 1
        bar.update()
    bar.close()
    return n


def sample_rows(n_rows: int, fraction: float, seed: int) -> np.ndarray:
    """A boolean mask over ``n_rows`` rows with exactly ``round(fraction * n_rows)`` rows set
    (halves up, at least 1; :func:`sample_size`), drawn uniformly without
    replacement from ``seed``. The same (n_rows, fraction, seed) always gives the same rows."""
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 1:
        raise InputError("corpus", f"has {n_rows} passages; a sample needs at least one")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise InputError("fraction", f"must be in (0, 1], got {fraction!r}")
    k = sample_size(int(n_rows), fraction)
    mask = np.zeros(int(n_rows), dtype=bool)
    mask[np.random.default_rng(seed).choice(int(n_rows), size=k, replace=False)] = True
    return mask


def iter_subset(corpus: str | os.PathLike, first: int | None = None, fraction: float | None = None,
                seed: int | None = None, progress: bool = False) -> Iterator[Passage]:
    """The passages of a subset of ``corpus`` in corpus order: the ``first`` N, or the seeded
    sample of ``fraction`` of all rows (give exactly one of the two; ``seed`` with ``fraction``).

    ``first`` larger than the corpus is an error: a "first 1.05M" that silently is the whole
    corpus would mislabel a table row.
    """
    if (first is None) == (fraction is None):
        raise InputError("subset", "give exactly one of 'first' and 'fraction'")
    name = os.path.basename(corpus)
    if first is not None:
        if isinstance(first, bool) or not isinstance(first, int) or first < 1:
            raise InputError("subset.first", f"must be a positive number of passages, got {first!r}")
        bar = tqdm(total=first, desc=f"first {first} of {name}", unit=" passages", file=sys.stderr,
                   disable=not progress, mininterval=2.0)
        n = 0
        for n, p in enumerate(iter_passages(corpus), start=1):
            yield p
            bar.update()
            if n == first:
                break
        bar.close()
        if n < first:
            raise InputError(str(corpus), f"has {n} passages, fewer than the first {first} asked for")
        return
    if seed is None:
        raise InputError("subset.seed", "a random sample needs a seed")
    mask = sample_rows(count_passages(corpus, progress), fraction, seed)
    bar = tqdm(total=len(mask), desc=f"sampling {name}", unit=" passages", file=sys.stderr,
               disable=not progress, mininterval=2.0)
    rows = 0
    for rows, p in enumerate(iter_passages(corpus), start=1):
        bar.update()
        if rows > len(mask):
            break
        if mask[rows - 1]:
            yield p
    bar.close()
    if rows != len(mask):  # the file changed between the two passes
        raise InputError(str(corpus), f"had {len(mask)} passages when counted, {rows} when sampled")


def write_corpus_subset(corpus: str | os.PathLike, out: str | os.PathLike, first: int | None = None,
                        fraction: float | None = None, seed: int | None = None, progress: bool = False) -> int:
    """Write :func:`iter_subset` as a DPR corpus TSV, atomically. Returns the passages written."""
    n = write_corpus(out, iter_subset(corpus, first=first, fraction=fraction, seed=seed, progress=progress))
    log.info("%s: %d passages -> %s", corpus, n, out)
    return n
