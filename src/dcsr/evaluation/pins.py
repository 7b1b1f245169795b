"""Regression pins: the expected top-k of a pipeline run, checked cell by cell.

As Pyserini's reproduction matrix: ``config/pins.yaml`` holds, per named run (``ci``: the
CI-scale pipeline of ``make test``; ``demo``: ``make demo``), the command that makes it, the
table it is read from, a tolerance in percentage points and the expected value of every
cell (row x test set x metric), with each test set's question count. A change that moves a
pinned number fails with the cell named; a change that moves one on purpose updates the
file in the same commit and says why (``python workflow/scripts/check_pins.py --update``).
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from dcsr.errors import InputError
from dcsr.yamlutil import strict_load


@dataclass(frozen=True)
class Cell:
    row: str
    test_set: str
    metric: str
    expected: float | None
    actual: float | None
    tolerance: float

    @property
    def ok(self) -> bool:
        return (self.expected is not None and self.actual is not None
                and abs(self.actual - self.expected) <= self.tolerance + 1e-9)


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


def machine_key() -> str:
    """The CPU's vendor and the SIMD level torch runs its kernels at (``GenuineIntel/AVX512``,
    ``AuthenticAMD/AVX2``). fp32 results are deterministic on one kind of CPU, but MKL and ATen
    take other code paths on another, and a tiny model's near-ties may then flip: pins record the
    machine they were made on (``machine:``)."""
    vendor = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch

        level = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - no torch, no level: the key still names the vendor
        level = "unknown"
    return f"{vendor}/{level}"


def variants(path: str | os.PathLike, name: str, pins: Any = None) -> dict[str, dict]:
    """The pinned variants of run ``name``: the entry ``name`` and every ``name@<machine>``
    entry (the same run pinned on another kind of CPU), in file order (``pins``: the file,
    when it is loaded already)."""
    pins = strict_load(Path(path)) if pins is None else pins
    found = {k: _entry(pins, path, k) for k in (pins or {}) if k == name or str(k).startswith(name + "@")}
    if not found:
        _entry(pins, path, name)  # the error naming the runs there are
    return found


def cross_kind_questions(path: str | os.PathLike, pins: Any = None) -> int:
    """How many questions a cell may move by on a kind of CPU that has no pins of its own (the
    file's ``cross_kind: {questions: N}``): the most seen between two kinds, measured on at least
    two kinds of CPU, and said why in the file."""
    pins = (strict_load(Path(path)) if pins is None else pins) or {}
    spec = pins.get("cross_kind") if isinstance(pins, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("questions"), int) or spec["questions"] < 0:
        raise InputError(str(path), "lacks 'cross_kind: {questions: N}', the tolerance in questions on a kind "
                         "of CPU that has no pins of its own")
    return spec["questions"]


def check_variants(path: str | os.PathLike, name: str, table_csv: str | os.PathLike,
                   machine: str | None = None) -> tuple[str, list[Cell], list[str], bool]:
    """Compare a table with the pins of run ``name`` made on this kind of machine, if there are
    such (``machine:`` equal to :func:`machine_key`), at their own tolerance (below one
    question). On any other kind of CPU no variant is this machine's: the table is compared
    with every variant at the cross-kind tolerance (:func:`cross_kind_questions`, in
    questions, so in points ``N x 100 / questions`` of each test set), and passes if one
    matches. Nothing passes everything: a cell moved past that fails on every kind.
    Returns ``(variant compared, cells, problems, same machine)``."""
    machine = machine or machine_key()
    pins = strict_load(Path(path))  # read once for the variants and the cross-kind tolerance
    found = variants(path, name, pins)
    same = [k for k, e in found.items() if e.get("machine") == machine]
    if same:
        cells, problems = compare(found[same[0]], table_csv)
        return same[0], cells, problems, True
    n = cross_kind_questions(path, pins)
    results = {k: compare(e, table_csv, cross_kind_questions=n) for k, e in found.items()}
    for k, (cells, problems) in results.items():
        if not failures(cells, problems):
            return k, cells, problems, False
    # the variant with the fewest cells outside: the one the report shows
    best = min(results, key=lambda k: len(failures(*results[k])))
    return best, *results[best], False


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
            cross_kind_questions: int | None = None) -> tuple[list[Cell], list[str]]:
    """Every pinned cell against the table; also the problems that are not a cell (a test set
    whose question count changed, a table row or cell that is not pinned). With
    ``cross_kind_questions`` N, a cell's tolerance is N questions of its test set (N x 100 / n
    points), or the entry's own if that is larger."""
    values, questions = read_table(table_csv)
    tol = float(entry["tolerance"])
    pinned_questions = entry.get("questions") or {}
    cells, problems = [], []
    pinned = set()
    for row, by_set in entry["cells"].items():
        for test_set, by_metric in by_set.items():
            cell_tol = tol
            if cross_kind_questions is not None:
                n = pinned_questions.get(test_set) or questions.get(test_set)
                if not n:
                    raise InputError(f"pins of {row!r}", f"test set {test_set!r} has no question count, so a "
                                     "tolerance in questions cannot be applied")
                cell_tol = max(tol, round(cross_kind_questions * 100 / n, 2))
            for metric, expected in by_metric.items():
                pinned.add((row, test_set, metric))
                cells.append(Cell(row, test_set, metric, float(expected), values.get((row, test_set, metric)),
                                  cell_tol))
    for test_set, n in (entry.get("questions") or {}).items():
        if questions.get(test_set) != n:
            problems.append(f"test set {test_set}: {questions.get(test_set)} questions, pinned {n}")
    for key in sorted(set(values) - pinned):
        problems.append(f"cell {' / '.join(key)} = {values[key]} is not pinned")
    return cells, problems


def report(cells: list[Cell], problems: list[str]) -> str:
    """Expected against actual for every cell, a mark on each one outside its tolerance."""
    lines = [f"{'row':<40} {'test set':<14} {'metric':<7} {'expected':>9} {'actual':>9} {'diff':>7}"]
    for c in cells:
        actual = "missing" if c.actual is None else f"{c.actual:.2f}"
        diff = "" if c.actual is None else f"{c.actual - c.expected:+.2f}"
        mark = "" if c.ok else f"  <-- outside +-{c.tolerance:g}"
        lines.append(f"{c.row:<40} {c.test_set:<14} {c.metric:<7} {c.expected:>9.2f} {actual:>9} {diff:>7}{mark}")
    bad = [c for c in cells if not c.ok]
    lines.append(f"{len(cells) - len(bad)} of {len(cells)} pinned cells within tolerance"
                 + (f"; {len(problems)} other problem(s)" if problems else ""))
    lines += [f"  {p}" for p in problems]
    return "\n".join(lines)


def failures(cells: list[Cell], problems: list[str]) -> list[str]:
    """One line per cell outside its tolerance, then the other problems."""
    out = [f"{c.row} / {c.test_set} / {c.metric}: expected {c.expected:.2f} +- {c.tolerance:g}, got "
           + ("nothing" if c.actual is None else f"{c.actual:.2f}") for c in cells if not c.ok]
    return out + problems


def pins_from_table(table_csv: str | os.PathLike) -> tuple[dict, dict]:
    """``(cells, questions)`` of a table, in the layout of ``config/pins.yaml``."""
    values, questions = read_table(table_csv)
    cells: dict = {}
    for (row, test_set, metric), value in values.items():
        cells.setdefault(row, {}).setdefault(test_set, {})[metric] = value
    return cells, questions


def ledger_verdicts(table_csv: str | os.PathLike) -> dict[str, str]:
    """``{"<claim> (<metric>)": verdict}`` of a claims ledger (``claims.csv``), the layout its
    pins keep them in; empty for a table that is not a ledger."""
    with open(table_csv, newline="", encoding="utf-8") as fh:
        return {f"{r['claim']} ({r['metric']})": r["verdict"] for r in csv.DictReader(fh) if "claim" in r}


def update_pins(path: str | os.PathLike, name: str, table_csv: str | os.PathLike, why: str,
                drop_other_kinds: bool = False) -> list[str]:
    """Re-pin run ``name`` to ``table_csv``'s numbers as made on this kind of CPU (``machine:``
    becomes :func:`machine_key`), recording ``why``; a claims ledger's verdicts are pinned with
    its values. The file's leading comment block and the other runs are kept, except, with
    ``drop_other_kinds``, the run's variants of other kinds of CPU (``<run>@<machine>``): when a
    change moves the numbers on purpose they pin the old ones, and those kinds are compared at
    the cross-kind tolerance until they are pinned again there. Returns the variants dropped."""
    import yaml

    from dcsr.fsutil import atomic_open

    path = Path(path)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    header = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    pins = strict_load(path) if text.strip() else {}
    cells, questions = pins_from_table(table_csv)
    entry = dict(pins.get(name) or {"table": Path(table_csv).stem, "tolerance": 0.01})
    entry = {"machine": machine_key(), **{k: v for k, v in entry.items() if k != "machine"}}
    entry.update(why=why, questions=questions, cells=cells)
    verdicts = ledger_verdicts(table_csv)
    if verdicts:
        entry["verdicts"] = verdicts
    pins[name] = entry
    dropped = [k for k in variants(path, name.split("@", 1)[0], pins) if k != name] if drop_other_kinds else []
    for k in dropped:
        del pins[k]
    body = yaml.safe_dump(pins, sort_keys=False, default_flow_style=None, width=120, allow_unicode=True)
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(header) + ("\n" if header else "") + body)
    return dropped
