"""Regression pins (dcsr.evaluation.pins, config/pins.yaml): a moved cell fails and is named."""

import csv
import subprocess
import sys

import pytest
import yaml

from dcsr.errors import InputError
from dcsr.evaluation.pins import compare, failures, load_pins, machine_key, report, update_pins

ROWS = [("BM25", "trivia", "top1", "40.00", "10"), ("BM25", "trivia", "top5", "70.00", "10"),
        ("DPR", "trivia", "top1", "50.00", "10"), ("DPR", "trivia", "top5", "80.00", "10")]


def _table(path, rows=ROWS):
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
    path.write_text(f"# header kept\nrun:\n  command: x\n  machine: {machine_key()}\n  table: t\n  tolerance: 0.5\n")
    update_pins(path, "run", _table(tmp_path / "t.csv"), why="first pins")
    return path


def test_pins_round_trip_and_pass(pins, tmp_path):
    entry = load_pins(pins, "run")
    assert pins.read_text().startswith("# header kept\n")
    assert entry["why"] == "first pins" and entry["questions"] == {"trivia": 10}
    assert entry["cells"]["DPR"]["trivia"] == {"top1": 50.0, "top5": 80.0}
    cells, problems = compare(entry, tmp_path / "t.csv")
    assert len(cells) == 4 and failures(cells, problems) == []
    text = report(cells, problems)
    assert "4 of 4 pinned cells within tolerance" in text
    assert all(f"{float(v):>9.2f}" in text for *_, v, _ in ROWS)


def test_a_moved_cell_fails_and_is_named(pins, tmp_path):
    moved = [r if r[:3] != ("DPR", "trivia", "top5") else (*r[:3], "70.00", r[4]) for r in ROWS]
    nudged = [r if r[:3] != ("BM25", "trivia", "top1") else (*r[:3], "40.50", r[4]) for r in moved]
    cells, problems = compare(load_pins(pins, "run"), _table(tmp_path / "t2.csv", nudged))
    assert failures(cells, problems) == ["DPR / trivia / top5: expected 80.00 +- 0.5, got 70.00"]
    assert "80.00     70.00  -10.00  <-- outside +-0.5" in report(cells, problems)


def test_a_missing_cell_an_unpinned_cell_and_another_test_set_size_fail(pins, tmp_path):
    rows = [r for r in ROWS if r[:3] != ("DPR", "trivia", "top1")] + [("DCSR", "trivia", "top1", "55.00", "10")]
    rows = [(*r[:4], "11") for r in rows]
    cells, problems = compare(load_pins(pins, "run"), _table(tmp_path / "t3.csv", rows))
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
                        "--run", "run", "--table", str(_table(tmp_path / "t4.csv", moved))],
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


def test_by_precision_checks_the_pins_of_what_auto_means_on_this_cpu(tmp_path, repo):
    from dcsr.models.precision import resolve

    table = _table(tmp_path / "t.csv", ROWS)
    base = {"table": "t", "tolerance": 0.5, "questions": {}, "cells": {}, "machine": machine_key()}
    for row, test_set, metric, ours, _questions in ROWS:
        base["cells"].setdefault(row, {}).setdefault(test_set, {})[metric] = float(ours)
    wrong = {**base, "cells": {row: {ts: {m: v + 10 for m, v in ms.items()} for ts, ms in sets.items()}
                               for row, sets in base["cells"].items()}}
    here = resolve("auto", "cpu")
    other = "fp32" if here == "bf16" else "bf16"
    (tmp_path / "pins.yaml").write_text(yaml.safe_dump({f"demo-{here}": base, f"demo-{other}": wrong}))
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins",
                        str(tmp_path / "pins.yaml"), "--run", "demo", "--by-precision", "--table", str(table)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"regression pins of 'demo-{here}'" in r.stdout


def test_pins_of_this_kind_of_cpu_are_strict_and_otherwise_a_measured_tolerance_applies(tmp_path):
    from dcsr.evaluation.pins import check_variants

    table = _table(tmp_path / "t.csv", ROWS)  # 10 questions: one question is 10 points
    cells = {}
    for row, test_set, metric, ours, _questions in ROWS:
        cells.setdefault(row, {}).setdefault(test_set, {})[metric] = float(ours)
    moved = {row: {ts: {m: v + 10 for m, v in ms.items()} for ts, ms in sets.items()} for row, sets in cells.items()}
    far = {row: {ts: {m: v + 30 for m, v in ms.items()} for ts, ms in sets.items()} for row, sets in cells.items()}
    entry = {"table": "t", "tolerance": 0.01, "questions": {"trivia": 10}}
    cross = {"cross_kind": {"questions": 2, "why": "test"}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        **cross,
        "run": {**entry, "cells": far},                                     # pinned on a machine of old
        "run@b": {**entry, "machine": "B/AVX2", "cells": cells}}))
    # on machine B the B pins decide (and they match)
    assert check_variants(tmp_path / "p.yaml", "run", table, machine="B/AVX2")[0] == "run@b"
    # on an unknown machine a variant must match within 2 questions (20 points here): run@b does
    name, got, problems, same = check_variants(tmp_path / "p.yaml", "run", table, machine="C/AVX512")
    assert (name, same) == ("run@b", False) and all(c.ok for c in got) and got[0].tolerance == 20
    # on machine A, pinned with other numbers (one question off), the run fails against A's pins only
    (tmp_path / "q.yaml").write_text(yaml.safe_dump({
        **cross, "run": {**entry, "machine": "A/AVX512", "cells": moved},
        "run@b": {**entry, "machine": "B/AVX2", "cells": far}}))
    name, got, _, same = check_variants(tmp_path / "q.yaml", "run", table, machine="A/AVX512")
    assert (name, same) == ("run", True) and not any(c.ok for c in got)
    # on an unknown machine: within 2 questions of run (A), so it passes against A at 20 points
    name, got, _, same = check_variants(tmp_path / "q.yaml", "run", table, machine="C/AVX512")
    assert (name, same) == ("run", False) and all(c.ok for c in got)
    # nothing passes everything: 3 questions from every variant fails on every kind
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({**cross, "run": {**entry, "machine": "A/AVX512", "cells": far}}))
    for machine in ("A/AVX512", "C/AVX512", "D/DEFAULT"):
        assert not all(c.ok for c in check_variants(tmp_path / "r.yaml", "run", table, machine=machine)[1])
    # a pins file without the cross-kind tolerance says so
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"run": {**entry, "machine": "A/AVX512", "cells": cells}}))
    with pytest.raises(InputError, match="cross_kind"):
        check_variants(tmp_path / "s.yaml", "run", table, machine="C/AVX512")


def _script(repo, pins, table, run="run"):
    return subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins",
                           str(pins), "--run", run, "--table", str(table)], capture_output=True, text=True)


def test_the_script_fails_on_another_kind_of_cpu_past_the_cross_kind_tolerance(tmp_path, repo):
    cells = {}
    for row, test_set, metric, ours, _questions in ROWS:
        cells.setdefault(row, {}).setdefault(test_set, {})[metric] = float(ours)
    (tmp_path / "p.yaml").write_text(yaml.safe_dump({
        "cross_kind": {"questions": 1, "why": "test"},
        "run": {"table": "t", "tolerance": 0.01, "questions": {"trivia": 10}, "machine": "NoSuchVendor/NONE",
                "cells": cells}}))
    one = [r if r[:3] != ("BM25", "trivia", "top5") else (*r[:3], "60.00", r[4]) for r in ROWS]
    r = _script(repo, tmp_path / "p.yaml", _table(tmp_path / "one.csv", one))
    assert r.returncode == 0, r.stdout + r.stderr  # one question moved: within the cross-kind tolerance
    assert "no pins of this kind of CPU" in r.stdout
    two = [r if r[:3] != ("BM25", "trivia", "top5") else (*r[:3], "50.00", r[4]) for r in ROWS]
    r = _script(repo, tmp_path / "p.yaml", _table(tmp_path / "two.csv", two))
    assert r.returncode == 1, r.stdout + r.stderr  # two questions: a failure, on any kind of CPU
    assert "<-- outside" in r.stdout and "BM25 / trivia / top5: expected 70.00 +- 10" in r.stderr


def test_a_re_pin_records_this_kind_of_cpu_and_may_drop_the_other_kinds(tmp_path, repo):
    table = _table(tmp_path / "t.csv", ROWS)
    old = {"table": "t", "tolerance": 0.01, "questions": {"trivia": 10}, "why": "old", "cells": {}, "command": "c"}
    path = tmp_path / "pins.yaml"
    path.write_text("# kept\n" + yaml.safe_dump({"cross_kind": {"questions": 2, "why": "x"},
                                                 "run": {**old, "machine": "Other/AVX2"},
                                                 "run@Another-AVX512": {**old, "machine": "Another/AVX512"},
                                                 "runner": {**old, "machine": "Other/AVX2"}}))
    # adding a kind's variant keeps the others
    assert update_pins(path, "run@here", table, why="this kind") == []
    pins = yaml.safe_load(path.read_text())
    assert pins["run@here"]["machine"] == machine_key() and set(pins) >= {"run", "run@Another-AVX512"}
    # numbers moved on purpose: the other kinds' variants go, other runs stay, the entry's own keys stay
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "check_pins.py"), "--pins", str(path),
                        "--run", "run", "--table", str(table), "--update", "--why", "moved", "--drop-other-kinds"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removed the other kinds' variants run@Another-AVX512, run@here" in r.stdout
    pins = yaml.safe_load(path.read_text())
    assert set(pins) == {"cross_kind", "run", "runner"} and path.read_text().startswith("# kept\n")
    assert pins["run"]["machine"] == machine_key() and pins["run"]["why"] == "moved"
    assert pins["run"]["command"] == "c" and pins["run"]["cells"]["DPR"]


def test_a_re_pinned_ledger_pins_its_verdicts(tmp_path):
    path = tmp_path / "claims.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["claim", "test_set", "metric", "baseline_value", "method_value", "difference", "questions",
                    "verdict"])
        w.writerow(["DCSR beats DPR", "squad", "top20", "80.0", "85.0", "5.0", "100", "holds"])
        w.writerow(["DCSR beats DPR", "squad", "top1", "40.0", "41.0", "1.0", "100", "inconclusive at this scale"])
    update_pins(tmp_path / "pins.yaml", "claims", path, why="first")
    entry = yaml.safe_load((tmp_path / "pins.yaml").read_text())["claims"]
    assert entry["verdicts"] == {"DCSR beats DPR (top20)": "holds", "DCSR beats DPR (top1)": "inconclusive at this scale"}
    assert entry["cells"]["DCSR beats DPR"]["squad"]["top20 difference"] == 5.0
