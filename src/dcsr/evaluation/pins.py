"""Regression pins: the expected top-k of a pipeline run, checked cell by cell.

As Pyserini's reproduction matrix: ``config/pins.yaml`` holds, per named run (``ci``: the
CI-scale pipeline of ``make test``; ``demo``: ``make demo``), the command that makes it, the
table it is read from, a tolerance in percentage points and the expected value of every
cell (row x test set x metric), with each test set's question count. A change that moves a
pinned number fails with the cell named; a change that moves one on purpose updates the
file in the same commit and says why (``python workflow/scripts/check_pins.py --update``).

A pinned run records the *kind* it was made on (``machine:``, :func:`kind_key`): the host
(the CPU's vendor and torch's SIMD level, with its bf16 instructions where it computed in
bf16; or the CUDA device's name), the compute precision and the passage encoder's runtime
that actually ran, as the run's embedding shards record them (:func:`run_kind`). On its own
kind a run must match its pins within their tolerance (below one question); on another, the
cross-kind tolerance measured for its precision applies, in whole questions
(:func:`cross_kind_questions`); a kind with neither is *unpinned*, and said so.
"""

from __future__ import annotations

import csv
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from dcsr.errors import InputError
from dcsr.models.precision import kind_key  # a run's kind; embedding jobs read it there, not this checker
from dcsr.yamlutil import strict_load


@dataclass(frozen=True)
class Cell:
    row: str
    test_set: str
    metric: str
    expected: float | None
    actual: float | None
    tolerance: float  # in points, as printed
    questions: int | None = None  # the test set's size, when the cell is compared in whole questions
    tolerance_questions: int | None = None

    @property
    def ok(self) -> bool:
        if self.expected is None or self.actual is None:
            return False
        if self.tolerance_questions is not None and self.questions:
            # whole questions: both values are printed to 2 decimals, so comparing the rounded
            # points against a rounded tolerance fails a cell moved by exactly the tolerance
            return abs(in_questions(self.actual, self.questions)
                       - in_questions(self.expected, self.questions)) <= self.tolerance_questions
        return abs(self.actual - self.expected) <= self.tolerance + 1e-9


def in_questions(value: float, n: int) -> int:
    """A value in percentage points of a test set of ``n`` questions, as a whole number of
    questions (a top-k cell printed to 2 decimals is exactly its count again, for n up to
    10,000; a mean measure, as MRR, is so read in units of one question)."""
    return round(value * n / 100)


def load_pins(path: str | os.PathLike, name: str) -> dict:
    return _entry(strict_load(Path(path)), path, name)


def _entry(pins, path: str | os.PathLike, name: str) -> dict:
    """Run ``name``'s entry of a loaded pins file, checked for its required keys."""
    if not isinstance(pins, dict) or name not in pins:
        raise InputError(str(path), f"has no pinned run {name!r} ({', '.join(pins or {})})")
    entry = pins[name]
    for key in ("table", "tolerance", "cells"):
        if key not in entry:
            raise InputError(f"{path}: {name}", f"lacks {key!r}")
    return entry


def kind_precision(kind: str) -> str:
    """The precision named by a kind (:func:`kind_key`); ``fp32`` for a key of the old form
    (the host alone)."""
    parts = str(kind).rsplit(" ", 2)
    return parts[1] if len(parts) == 3 else "fp32"


def kind_device(kind: str) -> str:
    return "cuda" if str(kind).startswith("cuda:") else "cpu"


def kind_slug(kind: str) -> str:
    """A kind as a pins entry's suffix: ``demo-bf16@AuthenticAMD-AVX512-avx512_bf16-bf16-openvino``."""
    return re.sub(r"[^A-Za-z0-9_.]+", "-", str(kind)).strip("-")


def run_kind(results: str | os.PathLike) -> str | None:
    """The kind a finished run's passage embeddings ran on, from the ``shard-<n>.json`` each
    embedding job writes beside its vectors (``results/embeddings/<corpus>/<model>/``); None
    when none is there (a run made before they were written). Kinds that differ between
    shards are joined with `` + ``: such a run matches no pins of one kind. Links are not
    followed out of ``results``."""
    root = Path(results) / "embeddings"
    kinds: set[str] = set()
    if not root.is_dir() or root.is_symlink():
        return None
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in filenames:
            path = Path(dirpath) / name
            if not re.fullmatch(r"shard-\d+\.json", name) or path.is_symlink():
                continue
            try:
                kind = json.loads(path.read_text(encoding="utf-8")).get("kind")
            except (OSError, ValueError, AttributeError) as e:
                raise InputError(str(path), f"is not an embedding shard's stats file ({e})") from None
            if isinstance(kind, str) and kind:
                kinds.add(kind)
    return " + ".join(sorted(kinds)) if kinds else None


def table_kind(table_csv: str | os.PathLike) -> str | None:
    """:func:`run_kind` of the results a table lies in (``<results>/tables/<name>.csv`` or
    ``<results>/claims.csv``)."""
    table = Path(table_csv)
    for results in (table.parent, table.parent.parent):
        if (results / "embeddings").is_dir():
            return run_kind(results)
    return None


def variants(path: str | os.PathLike, name: str, pins: Any = None) -> dict[str, dict]:
    """The pinned variants of run ``name``: the entry ``name`` and every ``name@<kind>``
    entry (the same run pinned on another kind), in file order (``pins``: the file, when it
    is loaded already)."""
    pins = strict_load(Path(path)) if pins is None else pins
    found = {k: _entry(pins, path, k) for k in (pins or {}) if k == name or str(k).startswith(name + "@")}
    if not found:
        _entry(pins, path, name)  # the error naming the runs there are
    return found


def cross_kind_questions(path: str | os.PathLike, pins: Any = None, kind: str | None = None) -> int | None:
    """How many questions a cell may move by on a kind that has no pins of its own, measured
    for the kind's precision on CPUs (the file's ``cross_kind: {fp32: {questions: N}, bf16:
    ...}``): the most seen between two kinds of CPU, said why in the file. A CUDA kind uses
    ``cuda-<precision>`` where one was measured; None means no tolerance is known for the
    kind: it is unpinned."""
    pins = (strict_load(Path(path)) if pins is None else pins) or {}
    spec = pins.get("cross_kind") if isinstance(pins, dict) else None
    precision = kind_precision(kind) if kind else "fp32"
    key = precision if kind_device(kind or "") == "cpu" else f"cuda-{precision}"
    if not isinstance(spec, dict) or not isinstance(spec.get("fp32"), dict):
        raise InputError(str(path), "lacks 'cross_kind: {fp32: {questions: N, why: ...}}', the tolerance in questions "
                         "on a kind of CPU that has no pins of its own")
    sub = spec.get(key)
    if sub is None:
        return None
    if not isinstance(sub, dict) or not isinstance(sub.get("questions"), int) or sub["questions"] < 0:
        raise InputError(f"{path}: cross_kind.{key}", "must be {questions: N, why: ...} with N a whole number >= 0")
    return sub["questions"]


@dataclass(frozen=True)
class Check:
    """The outcome of :func:`check_variants`: the variant compared, its cells and other
    problems, whether it was pinned on this kind, and whether any tolerance applies at all
    (``unpinned``: a kind with no pins of its own and no measured cross-kind tolerance; the
    cells are then shown against the closest variant, and nothing fails)."""
    variant: str
    cells: list
    problems: list
    same: bool
    unpinned: bool = False

    def __iter__(self):  # (variant, cells, problems, same), as callers unpack it
        return iter((self.variant, self.cells, self.problems, self.same))

    def failures(self) -> list[str]:
        return [] if self.unpinned else failures(self.cells, self.problems)


def check_variants(path: str | os.PathLike, name: str, table_csv: str | os.PathLike,
                   machine: str | None = None) -> Check:
    """Compare a table with the pins of run ``name`` made on its kind (``machine``, a
    :func:`kind_key`; by default the kind the table's results recorded, else this machine's
    fp32 torch), if there are such, at their own tolerance (below one question), verdicts
    too. On any other kind the table is compared with every variant at the cross-kind
    tolerance of its precision, in whole questions, and passes if one matches; a kind with no
    such tolerance is unpinned (:class:`Check`). Nothing passes everything: a cell moved past
    the tolerance fails on every pinned kind."""
    machine = machine or table_kind(table_csv) or kind_key()
    pins = strict_load(Path(path))  # read once for the variants and the cross-kind tolerance
    found = variants(path, name, pins)
    same = [k for k, e in found.items() if e.get("machine") == machine]
    if same:
        cells, problems = compare(found[same[0]], table_csv, verdicts=True)
        return Check(same[0], cells, problems, True)
    n = cross_kind_questions(path, pins, machine)
    results = {k: compare(e, table_csv, cross_kind_questions=n or 0) for k, e in found.items()}
    for k, (cells, problems) in results.items():
        if not failures(cells, problems):
            return Check(k, cells, problems, False)
    # the variant with the fewest cells outside: the one the report shows
    best = min(results, key=lambda k: len(failures(*results[k])))
    return Check(best, *results[best], False, unpinned=n is None)


def read_table(path: str | os.PathLike) -> tuple[dict, dict]:
    """``({(row, test_set, metric): value}, {test_set: questions})`` of a table CSV, or of the
    claims ledger (``claims.csv``: a claim's two sides' values and their difference, in points,
    its row the claim's text)."""
    values, questions = {}, {}
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if "claim" in r:  # the ledger
                for side in ("baseline_value", "method_value", "difference"):
                    values[(r["claim"], r["test_set"], f"{r['metric']} {side}")] = float(r[side])
                questions[r["test_set"]] = int(r["questions"])
                continue
            values[(r["row"], r["test_set"], r["metric"])] = float(r["ours"]) if r["ours"] else None
            if r.get("questions"):
                questions[r["test_set"]] = int(r["questions"])
    return values, questions


def compare(entry: Mapping[str, Any], table_csv: str | os.PathLike,
            cross_kind_questions: int | None = None, verdicts: bool = False) -> tuple[list[Cell], list[str]]:
    """Every pinned cell against the table; also the problems that are not a cell (a test set
    whose question count changed, a table row or cell that is not pinned, and with
    ``verdicts`` a ledger verdict other than pinned). With ``cross_kind_questions`` N, a
    cell is compared in whole questions of its test set (:func:`in_questions`), within N
    questions or the entry's own tolerance if that is larger."""
    values, questions = read_table(table_csv)
    tol = float(entry["tolerance"])
    pinned_questions = entry.get("questions") or {}
    cells, problems = [], []
    pinned = set()
    for row, by_set in entry["cells"].items():
        for test_set, by_metric in by_set.items():
            n = pinned_questions.get(test_set) or questions.get(test_set)
            cell_tol, tol_q = tol, None
            if cross_kind_questions is not None:
                if not n:
                    raise InputError(f"pins of {row!r}", f"test set {test_set!r} has no question count, so a "
                                     "tolerance in questions cannot be applied")
                tol_q = max(cross_kind_questions, int(tol * n / 100 + 1e-9))
                cell_tol = tol_q * 100 / n
            for metric, expected in by_metric.items():
                pinned.add((row, test_set, metric))
                cells.append(Cell(row, test_set, metric, float(expected), values.get((row, test_set, metric)),
                                  cell_tol, n if tol_q is not None else None, tol_q))
    for test_set, n in (entry.get("questions") or {}).items():
        if questions.get(test_set) != n:
            problems.append(f"test set {test_set}: {questions.get(test_set)} questions, pinned {n}")
    for key in sorted(set(values) - pinned):
        problems.append(f"cell {' / '.join(key)} = {values[key]} is not pinned")
    if verdicts and entry.get("verdicts"):
        got = ledger_verdicts(table_csv)
        for key, want in entry["verdicts"].items():
            if got.get(key) != want:
                problems.append(f"verdict {key}: {got.get(key) or 'missing'}, pinned {want}")
        problems += [f"verdict {key} = {v} is not pinned" for key, v in got.items() if key not in entry["verdicts"]]
    return cells, problems


def report(cells: list[Cell], problems: list[str]) -> str:
    """Expected against actual for every cell, a mark on each one outside its tolerance."""
    lines = [f"{'row':<40} {'test set':<14} {'metric':<7} {'expected':>9} {'actual':>9} {'diff':>7}"]
    for c in cells:
        actual = "missing" if c.actual is None else f"{c.actual:.2f}"
        diff = "" if c.actual is None else f"{c.actual - c.expected:+.2f}"
        mark = "" if c.ok else f"  <-- outside +-{_tolerance(c)}"
        lines.append(f"{c.row:<40} {c.test_set:<14} {c.metric:<7} {c.expected:>9.2f} {actual:>9} {diff:>7}{mark}")
    bad = [c for c in cells if not c.ok]
    lines.append(f"{len(cells) - len(bad)} of {len(cells)} pinned cells within tolerance"
                 + (f"; {len(problems)} other problem(s)" if problems else ""))
    lines += [f"  {p}" for p in problems]
    return "\n".join(lines)


def _tolerance(c: Cell) -> str:
    if c.tolerance_questions is not None:
        return f"{c.tolerance:.4g} ({c.tolerance_questions} of {c.questions} questions)"
    return f"{c.tolerance:g}"


def failures(cells: list[Cell], problems: list[str]) -> list[str]:
    """One line per cell outside its tolerance, then the other problems."""
    out = [f"{c.row} / {c.test_set} / {c.metric}: expected {c.expected:.2f} +- {_tolerance(c)}, got "
           + ("nothing" if c.actual is None else f"{c.actual:.2f}") for c in cells if not c.ok]
    return out + problems


def pins_from_table(table_csv: str | os.PathLike) -> tuple[dict, dict]:
    """``(cells, questions)`` of a table, in the layout of ``config/pins.yaml``."""
    values, questions = read_table(table_csv)
    cells: dict = {}
    for (row, test_set, metric), value in values.items():
        cells.setdefault(row, {}).setdefault(test_set, {})[metric] = value
    return cells, questions


def verdict_key(claim: str, test_set: str, metric: str) -> str:
    return f"{claim} [{test_set}] ({metric})"


def ledger_verdicts(table_csv: str | os.PathLike) -> dict[str, str]:
    """``{"<claim> [<test set>] (<metric>)": verdict}`` of a claims ledger (``claims.csv``),
    the layout its pins keep them in (two claims of the same text on two test sets do not
    collide); empty for a table that is not a ledger."""
    with open(table_csv, newline="", encoding="utf-8") as fh:
        return {verdict_key(r["claim"], r["test_set"], r["metric"]): r["verdict"]
                for r in csv.DictReader(fh) if "claim" in r}


def update_pins(path: str | os.PathLike, name: str, table_csv: str | os.PathLike, why: str,
                drop_other_kinds: bool = False, kind: str | None = None) -> tuple[str, list[str]]:
    """Re-pin run ``name`` to ``table_csv``'s numbers as made on ``kind`` (by default the kind
    its results recorded, :func:`run_kind`, else this machine's fp32 torch), recording
    ``why``; a claims ledger's verdicts are pinned with its values. Another kind's entry is
    never rewritten: the variant of this kind is (``<run>@<kind>``, made when there is none).
    With ``drop_other_kinds`` (numbers moved on purpose on every kind) the run's entry
    ``name`` is this kind's and every other kind's variant goes: those kinds are compared at
    the cross-kind tolerance until they are pinned again. The file's leading comment block
    and the other runs are kept. Returns ``(entry written, variants dropped)``."""
    import yaml

    from dcsr.fsutil import atomic_open

    path = Path(path)
    kind = kind or table_kind(table_csv) or kind_key()
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    header = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    pins = strict_load(path) if text.strip() else {}
    base = name.split("@", 1)[0]
    found = {k: e for k, e in pins.items() if (k == base or str(k).startswith(base + "@")) and isinstance(e, dict)}
    if drop_other_kinds:
        target = base
    else:
        mine = [k for k, e in found.items() if e.get("machine") == kind]
        if mine:
            target = mine[0]
        elif name in pins and pins[name].get("machine") not in (None, kind):
            target = f"{base}@{kind_slug(kind)}"  # another kind's entry stays as it is
        else:
            target = name
    if target in pins and pins[target].get("machine") not in (None, kind) and not drop_other_kinds:
        raise InputError(str(path), f"entry {target!r} was pinned on {pins[target]['machine']!r}, not on this run's "
                         f"kind {kind!r}: it is not rewritten")
    cells, questions = pins_from_table(table_csv)
    entry = dict(pins.get(target) or pins.get(base) or {"table": Path(table_csv).stem, "tolerance": 0.01})
    entry = {"machine": kind, **{k: v for k, v in entry.items() if k not in ("machine", "verdicts")}}
    entry.update(why=why, questions=questions, cells=cells)
    verdicts = ledger_verdicts(table_csv)
    if verdicts:
        entry["verdicts"] = verdicts
    pins[target] = entry
    dropped = [k for k in found if k != target] if drop_other_kinds else []
    for k in dropped:
        del pins[k]
    body = yaml.safe_dump(pins, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(header) + ("\n" if header else "") + body)
    return target, dropped
