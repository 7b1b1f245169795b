"""Regression pins (dcsr.evaluation.pins, config/pins.yaml): a moved cell fails and is named."""

import csv
import json
import subprocess
import sys

import pytest
import yaml

from dcsr.errors import InputError
from dcsr.evaluation.pins import (check_variants, compare, failures, kind_key, load_pins, report, run_kind,
                                  update_pins)

ROWS = [("BM25", "trivia", "top1", "40.00", "10"), ("BM25", "trivia", "top5", "70.00", "10"),
        ("DPR", "trivia", "top1", "50.00", "10"), ("DPR", "trivia", "top5", "80.00", "10")]


KIND = "TestVendor/AVX512 fp32 torch"  # the kind the tests' runs record


def _table(path, rows=ROWS, kind=KIND):
    """A table CSV at ``path`` (``<results>/tables/<name>.csv``), its results recording ``kind``
    as the embedding jobs do (``embeddings/<corpus>/<model>/shard-<n>.json``)."""
    if kind:
        stats = path.parent.parent / "embeddings" / "c" / "m" / "shard-0.json"
        stats.parent.mkdir(parents=True, exist_ok=True)
        stats.write_text(json.dumps({"shard": 0, "kind": kind}))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "test_set", "metric", "ours", "paper", "paper_source", "questions"])
        for row, ts, m, v, n in rows:
            w.writerow([row, ts, m, v, "", "", n])
    return path


@pytest.fixture()
def pins(tmp_path):
    path = tmp_path / "pins.yaml"
    # pinned on this kind of CPU, so its own tolerance applies
    path.write_text(f"# header kept\nrun:\n  command: x\n  machine: {KIND}\n  table: t\n  tolerance: 0.5\n")
    assert update_pins(path, "run", _table(tmp_path / "r" / "tables" / "t.csv"), why="first pins") == ("run", [])
    return path


def test_pins_round_trip_and_pass(pins, tmp_path):
    entry = load_pins(pins, "run")
    assert pins.read_text().startswith("# header kept\n")
    assert entry["why"] == "first pins" and entry["questions"] == {"trivia": 10}
    assert entry["cells"]["DPR"]["trivia"] == {"top1": 50.0, "top5": 80.0}
    cells, problems = compare(entry, tmp_path / "r" / "tables" / "t.csv")
    assert len(cells) == 4 and failures(cells, problems) == []
    text = report(cells, problems)
    assert "4 of 4 pinned cells within tolerance" in text
    assert all(f"{float(v):>9.2f}" in text for *_, v, _ in ROWS)


def test_a_moved_cell_fails_and_is_named(pins, tmp_path):
    moved = [r if r[:3] != ("DPR", "trivia", "top5") else (*r[:3], "70.00", r[4]) for r in ROWS]
    nudged = [r if r[:3] != ("BM25", "trivia", "top1") else (*r[:3], "40.50", r[4]) for r in moved]
    cells, problems = compare(load_pins(pins, "run"), _table(tmp_path / "t2" / "tables" / "t.csv", nudged))
    assert failures(cells, problems) == ["DPR / trivia / top5: expected 80.00 +- 0.5, got 70.00"]
    assert "80.00     70.00  -10.00  <-- outside +-0.5" in report(cells, problems)


def test_a_missing_cell_an_unpinned_cell_and_another_test_set_size_fail(pins, tmp_path):
    rows = [r for r in ROWS if r[:3] != ("DPR", "trivia", "top1")] + [("DCSR", "trivia", "top1", "55.00", "10")]
    rows = [(*r[:4], "11") for r in rows]
    cells, problems = compare(load_pins(pins, "run"), _table(tmp_path / "t3" / "tables" / "t.csv", rows))
    assert failures(cells, problems) == ["DPR / trivia / top1: expected 50.00 +- 0.5, got nothing",
                                         "test set trivia: 11 questions, pinned 10",
                                         "cell DCSR / trivia / top1 = 55.0 is not pinned"]


def test_pins_file_errors(tmp_path):
    path = tmp_path / "pins.yaml"
    path.write_text("a: {table: t, tolerance: 0, cells: {}}\na: {}\n")
    with pytest.raises(InputError, match="duplicate key 'a'"):
        load_pins(path, "a")
    path.write_text("a: {table: t, tolerance: 0, cells: {}}\n")
    with pytest.raises(InputError) as e:
        load_pins(path, "b")
    assert str(e.value) == f"{path}: has no pinned run 'b' (a)"


def test_the_script_prints_every_cell_and_exits_1_naming_the_moved_one(pins, tmp_path, repo):
    moved = [r if r[:3] != ("BM25", "trivia", "top5") else (*r[:3], "60.00", r[4]) for r in ROWS]
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins", str(pins),
                        "--run", "run", "--table", str(_table(tmp_path / "t4" / "tables" / "t.csv", moved))],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stdout.count("\n") >= 6 and "3 of 4 pinned cells within tolerance" in r.stdout
    assert "BM25 / trivia / top5: expected 70.00 +- 0.5, got 60.00" in r.stderr


def test_the_project_pins_file_has_both_runs(repo):
    pins = yaml.safe_load((repo / "config" / "pins.yaml").read_text())
    for run in ("ci", "demo-bf16", "demo-fp32"):
        entry = load_pins(repo / "config" / "pins.yaml", run)
        assert entry["cells"] and entry["questions"] and entry["why"]
        assert pins[run]["tolerance"] < 100 / max(entry["questions"].values())  # below one question


def _cells(rows=ROWS, shift=0.0):
    cells = {}
    for row, test_set, metric, ours, _questions in rows:
        cells.setdefault(row, {}).setdefault(test_set, {})[metric] = float(ours) + shift
    return cells


CROSS = {"cross_kind": {"fp32": {"questions": 2, "why": "test"}, "bf16": {"questions": 6, "why": "test"}}}


def test_by_precision_checks_the_pins_of_the_precision_the_run_recorded(tmp_path, repo):
    base = {"table": "t", "tolerance": 0.5, "questions": {}, "cells": _cells()}
    for here, other in (("bf16", "fp32"), ("fp32", "bf16")):
        kind = f"TestVendor/AVX512 {here} torch"
        table = _table(tmp_path / here / "tables" / "t.csv", ROWS, kind=kind)
        (tmp_path / "pins.yaml").write_text(yaml.safe_dump({
            **CROSS, f"demo-{here}": {**base, "machine": kind},
            f"demo-{other}": {**base, "machine": f"TestVendor/AVX512 {other} torch", "cells": _cells(shift=10)}}))
        r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins",
                            str(tmp_path / "pins.yaml"), "--run", "demo", "--by-precision", "--table", str(table)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"regression pins of 'demo-{here}'" in r.stdout and f"kind: {kind} (recorded by" in r.stdout


def test_pins_of_this_kind_are_strict_and_otherwise_a_measured_tolerance_applies(tmp_path):
    table = _table(tmp_path / "r" / "tables" / "t.csv", ROWS)  # 10 questions: one question is 10 points
    cells, moved, far = _cells(), _cells(shift=10), _cells(shift=30)
    entry = {"table": "t", "tolerance": 0.01, "questions": {"trivia": 10}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        **CROSS,
        "run": {**entry, "cells": far},                                     # pinned on a machine of old
        "run@b": {**entry, "machine": "B/AVX2 fp32 torch", "cells": cells}}))
    # on kind B the B pins decide (and they match)
    assert check_variants(tmp_path / "p.yaml", "run", table, machine="B/AVX2 fp32 torch").variant == "run@b"
    # on an unknown kind a variant must match within 2 questions (20 points here): run@b does
    name, got, problems, same = check_variants(tmp_path / "p.yaml", "run", table, machine="C/AVX512 fp32 torch")
    assert (name, same) == ("run@b", False) and all(c.ok for c in got) and got[0].tolerance == 20
    # on kind A, pinned with other numbers (one question off), the run fails against A's pins only
    (tmp_path / "q.yaml").write_text(yaml.safe_dump({
        **CROSS, "run": {**entry, "machine": "A/AVX512 fp32 torch", "cells": moved},
        "run@b": {**entry, "machine": "B/AVX2 fp32 torch", "cells": far}}))
    name, got, _, same = check_variants(tmp_path / "q.yaml", "run", table, machine="A/AVX512 fp32 torch")
    assert (name, same) == ("run", True) and not any(c.ok for c in got)
    # on an unknown kind: within 2 questions of run (A), so it passes against A at 20 points
    name, got, _, same = check_variants(tmp_path / "q.yaml", "run", table, machine="C/AVX512 fp32 torch")
    assert (name, same) == ("run", False) and all(c.ok for c in got)
    # nothing passes everything: 3 questions from every variant fails on every kind of CPU
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({**CROSS, "run": {**entry, "machine": "A/AVX512 fp32 torch",
                                                                      "cells": far}}))
    for machine in ("A/AVX512 fp32 torch", "C/AVX512 fp32 torch", "D/DEFAULT fp32 torch"):
        check = check_variants(tmp_path / "r.yaml", "run", table, machine=machine)
        assert not all(c.ok for c in check.cells) and check.failures()
    # a pins file without the cross-kind tolerance says so
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"run": {**entry, "machine": "A/AVX512 fp32 torch",
                                                             "cells": cells}}))
    with pytest.raises(InputError, match="cross_kind"):
        check_variants(tmp_path / "s.yaml", "run", table, machine="C/AVX512 fp32 torch")


@pytest.mark.parametrize("n", [15, 45, 657, 965])
@pytest.mark.parametrize("precision, questions", [("fp32", 2), ("bf16", 6)])
def test_a_cell_moved_by_exactly_the_cross_kind_tolerance_passes_and_one_more_question_fails(tmp_path, n, precision,
                                                                                           questions):
    """Both values are printed to 2 decimals, so in points a cell moved by exactly N questions
    could read as more (squad-b: 2 x 100 / 657 = 0.3044, printed values 0.31 apart against a
    tolerance rounded to 0.30): compared in whole questions, it passes at every n."""
    def pct(count):
        return f"{100 * count / n:.2f}"

    base = n // 3  # a top-k cell: base questions of n found
    pinned = {"BM25": {"s": {"top1": float(pct(base))}}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**CROSS, "run": {
        "table": "t", "tolerance": 0.01, "questions": {"s": n}, "machine": f"A/AVX512 {precision} torch",
        "cells": pinned}}))
    kind = f"C/AVX512 {precision} torch"  # another kind of CPU, the same precision
    for moved, ok in ((questions, True), (-questions, True), (questions + 1, False), (-questions - 1, False)):
        table = _table(tmp_path / f"m{moved}" / "tables" / "t.csv", [("BM25", "s", "top1", pct(base + moved), str(n))],
                       kind=kind)
        check = check_variants(tmp_path / "p.yaml", "run", table)
        assert not check.same and (not check.failures()) == ok, (n, moved, report(check.cells, check.problems))
        cell = check.cells[0]
        assert cell.tolerance_questions == questions and cell.questions == n


@pytest.mark.parametrize("n", [15, 45, 657])
def test_the_points_comparison_failed_cells_moved_by_exactly_two_questions(n):
    """Why whole questions: with both values printed to 2 decimals and the tolerance
    round(2 x 100 / n, 2), some cell moved by exactly 2 questions read as outside it."""
    def pct(count):
        return float(f"{100 * count / n:.2f}")

    assert any(abs(pct(c + 2) - pct(c)) > round(2 * 100 / n, 2) + 1e-9 for c in range(n - 1))


def test_the_kind_names_the_device_the_precision_and_the_runtime(tmp_path, monkeypatch):
    import dcsr.models.precision as precision

    monkeypatch.setattr(precision, "cpu_bf16", lambda: "avx512_bf16")
    fp32, bf16 = kind_key("cpu", "fp32", "torch"), kind_key("cpu", "bf16", "torch")
    assert fp32.endswith(" fp32 torch") and bf16.endswith("+avx512_bf16 bf16 torch")
    assert kind_key("cpu", "bf16", "openvino") != bf16  # what auto ran on a Zen 4 is a kind of its own
    monkeypatch.setattr(precision, "cpu_bf16", lambda: "amx_bf16")
    assert kind_key("cpu", "bf16", "torch") != bf16  # AMX and AVX-512 BF16 take other bf16 kernels
    assert kind_key("cuda", "bf16", "torch", "NVIDIA H100 80GB HBM3") == "cuda:NVIDIA H100 80GB HBM3 bf16 torch"
    # a run's kind is what its embedding shards recorded; shards of two kinds are named together
    results = tmp_path / "results"
    assert run_kind(results) is None
    for i, kind in enumerate(("cuda:X bf16 torch", "cuda:X bf16 torch")):
        (results / "embeddings" / "c" / f"m{i}").mkdir(parents=True)
        (results / "embeddings" / "c" / f"m{i}" / "shard-0.json").write_text(json.dumps({"kind": kind}))
    assert run_kind(results) == "cuda:X bf16 torch"
    (results / "embeddings" / "c" / "m1" / "shard-1.json").write_text(json.dumps({"kind": fp32}))
    assert run_kind(results) == " + ".join(sorted(["cuda:X bf16 torch", fp32]))
    (results / "embeddings" / "c" / "m1" / "shard-2.json").write_text("not json")
    with pytest.raises(InputError, match="shard-2.json: is not an embedding shard's stats file"):
        run_kind(results)


def test_a_gpu_kind_with_no_pins_is_unpinned_and_fails_nothing_against_a_cpu(tmp_path, repo):
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({**CROSS, "run": {
        "table": "t", "tolerance": 0.01, "questions": {"trivia": 10}, "machine": "A/AVX512 bf16 torch",
        "cells": _cells(shift=30)}}))  # three questions from the CPU's strict pins
    table = _table(tmp_path / "r" / "tables" / "t.csv", kind="cuda:NVIDIA H100 80GB HBM3 bf16 torch")
    check = check_variants(tmp_path / "p.yaml", "run", table)
    assert check.unpinned and not check.same and check.failures() == [] and failures(check.cells, check.problems)
    r = _script(repo, tmp_path / "p.yaml", table)
    assert r.returncode == 0 and "UNPINNED" in r.stdout, r.stdout + r.stderr
    # a measured tolerance for the GPU kind makes it pinned again
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({"cross_kind": {**CROSS["cross_kind"], "cuda-bf16": {
        "questions": 2, "why": "test"}}, "run": yaml.safe_load((tmp_path / "p.yaml").read_text())["run"]}))
    r = _script(repo, tmp_path / "p.yaml", table)
    assert r.returncode == 1 and "UNPINNED" not in r.stdout, r.stdout + r.stderr


def _script(repo, pins, table, run="run"):
    return subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins",
                           str(pins), "--run", run, "--table", str(table)], capture_output=True, text=True)


def test_the_script_fails_on_another_kind_of_cpu_past_the_cross_kind_tolerance(tmp_path, repo):
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        "cross_kind": {"fp32": {"questions": 1, "why": "test"}},
        "run": {"table": "t", "tolerance": 0.01, "questions": {"trivia": 10}, "machine": "NoSuchVendor/NONE fp32 torch",
                "cells": _cells()}}))
    one = [r if r[:3] != ("BM25", "trivia", "top5") else (*r[:3], "60.00", r[4]) for r in ROWS]
    r = _script(repo, tmp_path / "p.yaml", _table(tmp_path / "one" / "tables" / "t.csv", one))
    assert r.returncode == 0, r.stdout + r.stderr  # one question moved: within the cross-kind tolerance
    assert "no pins of this kind" in r.stdout
    two = [r if r[:3] != ("BM25", "trivia", "top5") else (*r[:3], "50.00", r[4]) for r in ROWS]
    r = _script(repo, tmp_path / "p.yaml", _table(tmp_path / "two" / "tables" / "t.csv", two))
    assert r.returncode == 1, r.stdout + r.stderr  # two questions: a failure, on any kind of CPU
    assert "<-- outside" in r.stdout and "BM25 / trivia / top5: expected 70.00 +- 10 (1 of 10 questions)" in r.stderr


def test_a_re_pin_writes_its_own_kind_and_never_another_kinds_entry(tmp_path, repo):
    table = _table(tmp_path / "r" / "tables" / "t.csv", ROWS)
    old = {"table": "t", "tolerance": 0.01, "questions": {"trivia": 10}, "why": "old", "cells": {}, "command": "c"}
    path = tmp_path / "pins.yaml"
    path.write_text("# kept\n" + yaml.safe_dump({**CROSS,
                                                 "run": {**old, "machine": "Other/AVX2 fp32 torch"},
                                                 "run@Another-AVX512": {**old, "machine": "Another/AVX512 fp32 torch"},
                                                 "runner": {**old, "machine": "Other/AVX2 fp32 torch"}}))
    # re-pinned on a third kind: a variant of its own, the others untouched
    assert update_pins(path, "run", table, why="this kind") == ("run@TestVendor-AVX512-fp32-torch", [])
    pins = yaml.safe_load(path.read_text())
    assert pins["run@TestVendor-AVX512-fp32-torch"]["machine"] == KIND
    assert pins["run"]["machine"] == "Other/AVX2 fp32 torch" and pins["run"]["why"] == "old"
    assert pins["run@Another-AVX512"]["why"] == "old"
    # again on that kind: its own variant is rewritten, whichever name was asked for
    assert update_pins(path, "run", table, why="again") == ("run@TestVendor-AVX512-fp32-torch", [])
    assert yaml.safe_load(path.read_text())["run@TestVendor-AVX512-fp32-torch"]["why"] == "again"
    # asked for another kind's entry by name: written to the run's own kind, the other left as it was
    assert update_pins(path, "run@Another-AVX512", _table(tmp_path / "s" / "tables" / "t.csv", kind="Z/AVX fp32 torch"),
                       why="x") == ("run@Z-AVX-fp32-torch", [])
    assert yaml.safe_load(path.read_text())["run@Another-AVX512"]["why"] == "old"
    # numbers moved on purpose: the other kinds' variants go, other runs stay, the entry's own keys stay
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins", str(path),
                        "--run", "run", "--table", str(table), "--update", "--why", "moved", "--drop-other-kinds"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removed the other kinds' variants run@Another-AVX512, run@TestVendor-AVX512-fp32-torch, run@Z-AVX-fp32-torch" in r.stdout
    pins = yaml.safe_load(path.read_text())
    assert set(pins) == {"cross_kind", "run", "runner"} and path.read_text().startswith("# kept\n")
    assert pins["run"]["machine"] == KIND and pins["run"]["why"] == "moved"
    assert pins["run"]["command"] == "c" and pins["run"]["cells"]["DPR"]


def _ledger(path, rows):
    _table(path.parent / "tables" / "t.csv")  # its results record KIND
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["claim", "test_set", "metric", "baseline_value", "method_value", "difference", "questions",
                    "verdict"])
        w.writerows(rows)
    return path


def test_a_re_pinned_ledger_pins_its_verdicts_by_test_set_and_check_pins_compares_them(tmp_path, repo):
    rows = [["DCSR beats DPR", "squad", "top20", "80.0", "85.0", "5.0", "100", "holds"],
            ["DCSR beats DPR", "squad", "top1", "40.0", "41.0", "1.0", "100", "inconclusive at this scale"],
            ["DCSR beats DPR", "trivia", "top20", "80.0", "85.0", "5.0", "100", "inconclusive at this scale"]]
    path = _ledger(tmp_path / "r" / "claims.csv", rows)
    update_pins(tmp_path / "pins.yaml", "claims", path, why="first", kind=KIND)
    entry = yaml.safe_load((tmp_path / "pins.yaml").read_text())["claims"]
    assert entry["verdicts"] == {"DCSR beats DPR [squad] (top20)": "holds",
                                 "DCSR beats DPR [squad] (top1)": "inconclusive at this scale",
                                 "DCSR beats DPR [trivia] (top20)": "inconclusive at this scale"}
    assert entry["cells"]["DCSR beats DPR"]["squad"]["top20 difference"] == 5.0
    (tmp_path / "pins.yaml").write_text(yaml.safe_dump({**CROSS, **yaml.safe_load((tmp_path / "pins.yaml").read_text())}))
    # the same values, one verdict flipped: check_pins fails on the pinned kind, naming it
    flipped = _ledger(tmp_path / "f" / "claims.csv", [rows[0], rows[1], rows[2][:-1] + ["holds"]])
    check = check_variants(tmp_path / "pins.yaml", "claims", flipped, machine=KIND)
    assert check.same and check.failures() == [
        "verdict DCSR beats DPR [trivia] (top20): holds, pinned inconclusive at this scale"]
    r = _script(repo, tmp_path / "pins.yaml", flipped, run="claims")
    assert r.returncode == 1 and "verdict DCSR beats DPR [trivia] (top20)" in r.stderr, r.stdout + r.stderr
    # on another kind a near-tie may move a p-value across 0.05: the values are compared, not the verdicts
    assert check_variants(tmp_path / "pins.yaml", "claims", flipped, machine="Z/AVX fp32 torch").failures() == []


def test_the_project_pins_record_kinds_and_measured_tolerances(repo):
    from dcsr.evaluation.pins import cross_kind_questions, kind_precision

    path = repo / "config" / "pins.yaml"
    pins = yaml.safe_load(path.read_text())
    assert cross_kind_questions(path, kind="A/AVX2 fp32 torch") == 2
    assert cross_kind_questions(path, kind="A/AVX512+amx_bf16 bf16 torch") == 6
    assert cross_kind_questions(path, kind="cuda:NVIDIA H100 80GB HBM3 bf16 torch") is None  # unpinned, and said so
    for name, entry in pins.items():
        if name == "cross_kind" or "machine" not in entry:
            continue
        assert len(entry["machine"].split(" ")) >= 3, name  # "<host> <precision> <runtime>"
        if "-bf16" in name or "-fp32" in name:
            assert kind_precision(entry["machine"]) == ("bf16" if "-bf16" in name else "fp32"), name
