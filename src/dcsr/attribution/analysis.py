"""Encoder attribution (the DPR encoder attribution paper, Sections 5-6, 9 and 10.1).

Any question encoder can be paired with any passage encoder's index, so the evaluation scores
form a pair matrix ``r[question encoder][passage encoder][test set][metric]`` (e.g. ``top20``
in percent, from the metrics JSON of that pair's run). In-domain encoder marginalization
(Eq. 6-7) scores one encoder on a test set by the mean of its row (or column) over an empirical
prior: the encoders trained on each of the K datasets. Figure 2 divides each marginal by the
in-domain DPR's score in tandem, ``r(Q_T, D_T, T)``, so that the tandem is 100%.

The data-efficiency sweep (Section 10.1, Figure 3) trains on nested uniform samples of a
training set (10%, 25%, ..., 100%): :func:`nested_samples` draws them as prefixes of one
seeded permutation and :func:`write_sample` writes one as a DPR biencoder JSON.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from dcsr.errors import InputError, at
from dcsr.data.formats import iter_biencoder, write_biencoder
from dcsr.data.subsets import sample_size

Cell = tuple[str, str, str]  # (question encoder, passage encoder, test set)


# --------------------------------------------------------------------------- pair matrix


def _describe(q: str, p: str, test_set: str) -> str:
    return f"question encoder {q!r} x passage encoder {p!r} on test set {test_set!r}"


@dataclass
class PairMatrix:
    """Scores ``r[q][p][test_set][metric]`` of (question encoder, passage encoder) pairs.

    ``sources`` remembers the metrics file of each cell, so an error about a cell names it.
    """

    r: dict[str, dict[str, dict[str, dict[str, float]]]] = field(default_factory=dict)
    sources: dict[Cell, str] = field(default_factory=dict)

    def add(self, q: str, p: str, test_set: str, scores: Mapping[str, float], source: str = "") -> None:
        """Set one cell; a cell given twice is an error naming both sources."""
        if (q, p, test_set) in self:
            raise InputError(source or "pair matrix", f"{_describe(q, p, test_set)} is already given by "
                             f"{self.sources.get((q, p, test_set)) or 'an earlier entry'}")
        self.r.setdefault(q, {}).setdefault(p, {})[test_set] = dict(scores)
        self.sources[(q, p, test_set)] = source

    def __contains__(self, cell: Cell) -> bool:
        q, p, test_set = cell
        return test_set in self.r.get(q, {}).get(p, {})

    def score(self, q: str, p: str, test_set: str, metric: str) -> float:
        """``r(q, p, test_set)[metric]``; a missing cell or metric is an :class:`InputError`."""
        if (q, p, test_set) not in self:
            raise InputError(_describe(q, p, test_set), "no metrics for this pair")
        scores = self.r[q][p][test_set]
        if metric not in scores:
            where = self.sources.get((q, p, test_set)) or _describe(q, p, test_set)
            raise InputError(where, f"no {metric!r} score (has {', '.join(sorted(scores)) or 'none'})")
        return scores[metric]


def _is_score(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: the counts of a regex test set's metrics (``{"regex": {...}}``) kept in a cell as ``regex_<name>``
NEVER_FOUND = ("answers_never_found", "questions_never_found")


def read_scores(path: str | os.PathLike) -> dict[str, float]:
    """The numeric entries of a metrics JSON (``{"top1": 33.1, ..., "top100": 80.2}``).

    Entries that are not scores (``"match": "string"``) are dropped, but for a regex test set's
    counts of patterns never found (``regex_answers_never_found``, ``regex_questions_never_found``,
    from ``{"regex": {...}}``); a ``top<k>`` entry that
    is not a finite number is an error, as it would silently leave a hole in a table.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise InputError(str(path), "metrics file not found")
    except json.JSONDecodeError as e:
        raise InputError(at(path, e.lineno), f"malformed JSON: {e.msg}")
    if not isinstance(data, dict):
        raise InputError(str(path), "expected a JSON object of metrics ({\"top20\": 78.4, ...})")
    for key, v in data.items():
        if key.startswith("top") and not _is_score(v):
            raise InputError(str(path), f"{key!r} is {v!r}, not a finite number")
    scores = {key: float(v) for key, v in data.items() if _is_score(v)}
    regex = data.get("regex")  # a regex test set's patterns DPR's code never finds (bad_patterns: never_found)
    if isinstance(regex, dict):
        scores.update({f"regex_{k}": float(regex[k]) for k in NEVER_FOUND if _is_score(regex.get(k))})
    return scores


def load_pair_matrix(metrics: Iterable[tuple[str, str, str, str | os.PathLike]]) -> PairMatrix:
    """Read ``(question encoder, passage encoder, test set, metrics JSON)`` entries into a matrix."""
    matrix = PairMatrix()
    for q, p, test_set, path in metrics:
        matrix.add(q, p, test_set, read_scores(path), source=str(path))
    return matrix


def missing_pairs(matrix: PairMatrix, q_encoders: Sequence[str], p_encoders: Sequence[str],
                  test_sets: Sequence[str]) -> list[Cell]:
    """The cells of ``q_encoders x p_encoders x test_sets`` the matrix lacks, in that order."""
    return [(q, p, t) for q in q_encoders for p in p_encoders for t in test_sets if (q, p, t) not in matrix]


# --------------------------------------------------------------------------- Eq. 7


def _check_prior(prior: Sequence[str], name: str) -> None:
    if not prior:
        raise InputError(name, "is empty: Eq. 7 averages over at least one encoder")
    dup = sorted(e for e, n in Counter(prior).items() if n > 1)
    if dup:
        raise InputError(name, f"names {dup[0]!r} twice; each sampled encoder counts once")


def _mean_over(matrix: PairMatrix, cells: Sequence[Cell], metric: str, what: str) -> float:
    missing = [c for c in cells if c not in matrix]
    if missing:
        raise InputError(what, f"{len(missing)} of {len(cells)} pairs have no metrics: "
                         + "; ".join(_describe(*c) for c in missing))
    return sum(matrix.score(*c, metric) for c in cells) / len(cells)


def marginalize_question(matrix: PairMatrix, q: str, test_set: str, metric: str, p_prior: Sequence[str]) -> float:
    """Eq. 7 for question encoder ``q``: the mean of ``r(q, D, test_set)`` over ``D`` in ``p_prior``.

    ``p_prior`` is the empirical prior of passage encoders (the paper: the five in-domain
    DPRs' passage encoders, ``q``'s own partner included). Every cell must exist: a missing
    one is an error listing all the missing pairs, never a mean over fewer encoders.
    """
    _check_prior(p_prior, "passage encoder prior")
    return _mean_over(matrix, [(q, p, test_set) for p in p_prior], metric,
                      f"marginalizing question encoder {q!r} on {test_set!r}")


def marginalize_passage(matrix: PairMatrix, p: str, test_set: str, metric: str, q_prior: Sequence[str]) -> float:
    """Eq. 7 for passage encoder ``p``: the mean of ``r(Q, p, test_set)`` over ``Q`` in ``q_prior``."""
    _check_prior(q_prior, "question encoder prior")
    return _mean_over(matrix, [(q, p, test_set) for q in q_prior], metric,
                      f"marginalizing passage encoder {p!r} on {test_set!r}")


def relative_to_tandem(matrix: PairMatrix, marginal: float, q: str, p: str, test_set: str, metric: str) -> float:
    """``marginal / r(q, p, test_set) * 100``: a marginal score in percent of the tandem pair
    (Figure 2: the in-domain DPR ``(Q_T, D_T)`` on its own test set is 100%)."""
    tandem = matrix.score(q, p, test_set, metric)
    if tandem == 0:
        raise InputError(matrix.sources.get((q, p, test_set)) or _describe(q, p, test_set),
                         f"tandem {metric} is 0, so nothing can be relative to it")
    return 100.0 * marginal / tandem


# --------------------------------------------------------------------------- data-efficiency samples


def nested_samples(n_records: int, fractions: Sequence[float], seed: int) -> dict[float, np.ndarray]:
    """Nested uniform samples of ``range(n_records)``: ``{fraction: sorted record indices}``.

    Every sample is a prefix of one permutation drawn from ``seed``, so a smaller fraction's
    sample is a subset of every larger one's and 1.0 gives all records. Sizes follow
    :func:`sample_size`. Indices are int64, sorted ascending (the records' file order).
    """
    if isinstance(n_records, bool) or not isinstance(n_records, (int, np.integer)) or n_records < 1:
        raise InputError("n_records", f"must be a positive number of records, got {n_records!r}")
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1:
            raise InputError("fractions", f"each fraction must be in (0, 1], got {f!r}")
    order = np.random.default_rng(seed).permutation(int(n_records))
    return {f: np.sort(order[:sample_size(int(n_records), f)]).astype(np.int64) for f in fractions}


def count_records(train_json: str | os.PathLike) -> int:
    """Number of records in a DPR biencoder JSON (those without a positive included)."""
    return sum(1 for _ in iter_biencoder(train_json, require_positive=False))


def _checked_indices(indices: Iterable[int]) -> set[int]:
    chosen: set[int] = set()
    for i in np.asarray(list(indices)).ravel().tolist():
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise InputError("indices", f"record indices must be non-negative integers, got {i!r}")
        if i in chosen:
            raise InputError("indices", f"record {i} is chosen twice")
        chosen.add(i)
    return chosen


def iter_sample(train_json: str | os.PathLike, indices: Iterable[int]) -> Iterator[dict]:
    """Stream the records of ``train_json`` whose 0-based position is in ``indices``, in file order.

    Records are as :func:`~dcsr.data.formats.iter_biencoder` normalises them (those without a
    positive are kept: they are part of the sample). An index past the end is an error
    raised after the last record, naming the file.
    """
    chosen = _checked_indices(indices)
    n = -1
    for n, rec in enumerate(iter_biencoder(train_json, require_positive=False)):
        if n in chosen:
            yield rec
    beyond = sorted(i for i in chosen if i > n)
    if beyond:
        raise InputError(str(train_json), f"has {n + 1} records, but record {beyond[0]} was chosen")


def write_sample(train_json: str | os.PathLike, out_json: str | os.PathLike, indices: Iterable[int]) -> int:
    """Write the chosen records of ``train_json`` to ``out_json`` in their original order.

    Streams both files and writes atomically: on a bad index or a bad record no ``out_json``
    appears (an old one stays untouched). Returns the number of records written.
    """
    chosen = _checked_indices(indices)  # bad indices fail before anything is opened
    return write_biencoder(out_json, iter_sample(train_json, chosen))


# --------------------------------------------------------------------------- sweep names


def percent_label(fraction: float) -> str:
    """``0.1 -> "10"``, ``0.125 -> "12.5"``: a fraction as the percent used in file and model names
    (computed in decimal, so ``0.55`` gives ``"55"``, not ``"55.00000000000001"``). Every digit of
    the fraction is kept, so two fractions never share a name and :func:`fraction_of` gives the
    fraction back exactly (``0.1000001 -> "10.00001"``)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise InputError("fraction", f"must be in (0, 1], got {fraction!r}")
    return format((Decimal(repr(float(fraction))) * 100).normalize(), "f")


def fraction_of(percent: str) -> float:
    """The inverse of :func:`percent_label`: ``"55" -> 0.55``."""
    try:
        value = float(Decimal(percent) / 100)
    except ArithmeticError:
        raise InputError("percent", f"{percent!r} is not a number")
    if not 0 < value <= 1:
        raise InputError("percent", f"{percent!r} is not in (0, 100]")
    return value


def sweep_model_name(model: str, fraction: float) -> str:
    """The name of ``model`` retrained on ``fraction`` of its training set: ``dpr-nq-40pct``."""
    return f"{model}-{percent_label(fraction)}pct"
