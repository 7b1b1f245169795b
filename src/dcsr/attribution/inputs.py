"""The two inputs of the encoder-attribution analysis (:mod:`dcsr.attribution.report`): the
:class:`AttributionSpec` (what it covers, from the config's ``attribution`` section) and the pair
matrix file (``pair_matrix.csv``: one line per question encoder x passage encoder x test set x
metric, written from every pair's metrics JSON and read back with errors that name its line)."""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from typing import Mapping, Sequence

from dcsr.attribution.analysis import NEVER_FOUND, PairMatrix, read_scores
from dcsr.errors import InputError
from dcsr.fsutil import atomic_open

MATRIX_HEADER = ["question_encoder", "passage_encoder", "test_set", "metric", "value", "source"]


# --------------------------------------------------------------------------- spec


@dataclass(frozen=True)
class Sweep:
    """The data-efficiency sweep of one dataset: ``models`` = ``[(fraction, model), ...]``,
    ascending, ending with ``(1.0, the family's in-domain model)``."""

    dataset: str
    models: tuple[tuple[float, str], ...]


@dataclass(frozen=True)
class AttributionSpec:
    """What the analysis covers (built by the workflow from the config's ``attribution`` section).

    ``families``: ``{label: {dataset: model}}``, each a set of in-domain bi-encoders trained
    with the same recipe (the paper's prior: one DPR per dataset); ``sweep_family`` names the
    family whose encoders are the 100% samples of the sweep; ``compare`` = (baseline, method)
    families for the side-by-side marginals (e.g. DPR, DCSR).
    """

    test_sets: tuple[str, ...]
    metrics: tuple[str, ...]
    families: Mapping[str, Mapping[str, str]]
    paper_names: Mapping[str, str | None]
    bm25: bool = True
    sweep_family: str | None = None
    sweeps: tuple[Sweep, ...] = ()
    compare: tuple[str, str] | None = None
    #: test sets judged by qrels of their own (BEIR collections): their cells are ``nDCG@10 (qrels)``,
    #: ``R@100 (qrels)`` and ``RR@10 (qrels)`` (:meth:`metrics_of`), not ``metrics``
    qrels_test_sets: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping) -> "AttributionSpec":
        try:
            sweeps = tuple(Sweep(s["dataset"], tuple((float(f), m) for f, m in sorted(s["models"], key=lambda x: float(x[0]))))
                           for s in d.get("sweeps", []))
            spec = cls(tuple(d["test_sets"]), tuple(d["metrics"]), {k: dict(v) for k, v in d["families"].items()},
                       dict(d.get("paper_names", {})), bool(d.get("bm25", True)), d.get("sweep_family"), sweeps,
                       tuple(d["compare"]) if d.get("compare") else None, tuple(d.get("qrels_test_sets", ())))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError("attribution spec", f"malformed: {e!r}")
        for label, family in spec.families.items():
            if not family:
                raise InputError(f"attribution spec: families.{label}", "has no models")
        if spec.sweeps and spec.sweep_family not in spec.families:
            raise InputError("attribution spec: sweep_family", f"{spec.sweep_family!r} is not a family")
        if spec.compare and any(f not in spec.families for f in spec.compare):
            raise InputError("attribution spec: compare", f"{spec.compare} names a family that is not defined")
        return spec

    def metrics_of(self, test_set: str) -> tuple[str, ...]:
        """The metrics of a test set's cells: ``metrics`` (top-k answer recall), or for a test set
        judged by its own qrels, its measures against them."""
        if test_set in self.qrels_test_sets:
            from dcsr.evaluation.trec_eval import QRELS_MEASURES, qrels_metric

            return tuple(qrels_metric(m) for m in QRELS_MEASURES)
        return self.metrics

    @property
    def answer_test_sets(self) -> tuple[str, ...]:
        """The test sets judged by answers (whose cells share ``metrics``)."""
        return tuple(t for t in self.test_sets if t not in self.qrels_test_sets)

    def in_domain(self, family: str) -> dict[str, tuple[str, str]]:
        """``{test set: (Q_T, D_T)}`` for the family's datasets that are also test sets."""
        return {t: (m, m) for t, m in self.families[family].items() if t in self.test_sets}

    def prior(self, family: str) -> list[str]:
        """The empirical encoder prior of Eq. 7: the family's K in-domain models."""
        return list(self.families[family].values())

    def paper_name(self, dataset: str) -> str | None:
        return self.paper_names.get(dataset) or None


# --------------------------------------------------------------------------- the pair matrix file


def write_pair_matrix(cells: Sequence[tuple[str, str, str, str | os.PathLike]], out_csv: str | os.PathLike,
                      metrics: Sequence[str] | None = None) -> int:
    """Collect ``(question encoder, passage encoder, test set, metrics JSON)`` cells into one CSV.

    Every ``top<k>`` score of each metrics file is written, and a BEIR test set's measures against
    its qrels (``nDCG@10 (qrels)``, ...: :data:`dcsr.evaluation.trec_eval.QRELS_MEASURES`), and a
    regex test set's counts of patterns never found with its number of questions, or only
    ``metrics``, each of which must then be present; a cell given twice is an error. Returns the
    number of cells.
    """
    from dcsr.evaluation.trec_eval import QRELS_MEASURES, qrels_metric

    matrix = PairMatrix()
    rows = []
    for q, p, t, path in cells:
        scores = read_scores(path)
        matrix.add(q, p, t, scores, source=str(path))
        wanted = list(metrics) if metrics is not None else sorted((m for m in scores if m.startswith("top")),
                                                                   key=lambda m: int(m[3:]) if m[3:].isdigit() else 0)
        if metrics is None:
            wanted += [qrels_metric(m) for m in QRELS_MEASURES if qrels_metric(m) in scores]
            never = [f"regex_{k}" for k in NEVER_FOUND if f"regex_{k}" in scores]  # for the tables' notes
            wanted += never + (["questions"] if never and "questions" in scores else [])
        for m in wanted:
            rows.append([q, p, t, m, repr(matrix.score(q, p, t, m)), str(path)])
    with atomic_open(out_csv, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(MATRIX_HEADER)
        w.writerows(rows)
    return len(cells)


def read_pair_matrix(path: str | os.PathLike) -> PairMatrix:
    """The :class:`PairMatrix` of a ``pair_matrix.csv``; errors name the file and line."""
    matrix = PairMatrix()
    cells: dict[tuple[str, str, str], dict[str, float]] = {}
    sources: dict[tuple[str, str, str], str] = {}
    try:
        fh = open(path, encoding="utf-8", newline="")
    except OSError as e:
        raise InputError(str(path), f"cannot read the pair matrix: {e.strerror}")
    with fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if header != MATRIX_HEADER:
            raise InputError(f"{path}:1", f"expected the header {','.join(MATRIX_HEADER)}, found {header}")
        for line, row in enumerate(reader, start=2):
            if len(row) != len(MATRIX_HEADER):
                raise InputError(f"{path}:{line}", f"expected {len(MATRIX_HEADER)} fields, found {len(row)}")
            q, p, t, metric, value, source = row
            try:
                v = float(value)
            except ValueError:
                raise InputError(f"{path}:{line}", f"value {value!r} is not a number")
            if not math.isfinite(v):
                raise InputError(f"{path}:{line}", f"value {value!r} is not finite")
            scores = cells.setdefault((q, p, t), {})
            if metric in scores:
                raise InputError(f"{path}:{line}", f"{metric} of ({q}, {p}, {t}) is given twice")
            scores[metric] = v
            sources[(q, p, t)] = f"{source} (via {path})" if source else str(path)
    for (q, p, t), scores in cells.items():
        matrix.add(q, p, t, scores, sources[(q, p, t)])
    return matrix
