import csv
import json
import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.evaluation.figures import plot_validation, read_validation, validation_curves_table

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def entry(epoch, step, acc, nll, rank):
    return {"epoch": epoch, "step": step, "nll_loss": nll, "accuracy": acc, "average_rank": rank, "questions": 8}


DPR = [entry(0, 10, 0.25, 2.0, 3.5), entry(1, 20, 0.5, 1.5, 2.0)]
DCSR = [entry(0, 12, 0.375, 1.8, 3.0), entry(1, 24, 0.625, 1.2, 1.5), entry(2, 36, 0.75, 1.0, 1.0)]


def model_dir(tmp_path, name, history):
    d = tmp_path / name
    d.mkdir()
    (d / "validation.json").write_text(json.dumps(history))
    return d


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "fig" / "squad.png"
    plot_validation([("DPR", DPR), ("DCSR", DCSR)], out, "SQuAD")
    data = out.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 1000
    assert [p.name for p in out.parent.iterdir()] == ["squad.png"]  # no temporary left behind


def test_csv_holds_the_plotted_numbers(tmp_path):
    validation_curves_table([("DPR", DPR), ("DCSR", DCSR)], tmp_path / "squad.csv")
    rows = list(csv.DictReader((tmp_path / "squad.csv").open()))
    assert [(r["label"], r["epoch"], r["epochs_trained"], r["step"]) for r in rows] == [
        ("DPR", "0", "1", "10"), ("DPR", "1", "2", "20"),
        ("DCSR", "0", "1", "12"), ("DCSR", "1", "2", "24"), ("DCSR", "2", "3", "36")]
    assert [float(r["accuracy"]) for r in rows] == [0.25, 0.5, 0.375, 0.625, 0.75]
    assert [float(r["nll_loss"]) for r in rows] == [2.0, 1.5, 1.8, 1.2, 1.0]
    assert [float(r["average_rank"]) for r in rows] == [3.5, 2.0, 3.0, 1.5, 1.0]


def test_a_validation_inside_an_epoch_is_drawn_where_it_ran(tmp_path):
    """A run that max_steps stops inside an epoch validates there: its point is at the epochs it
    trained (0.22 of the first), not at the epoch's end, so two runs of different lengths in one
    epoch are two points; an entry without the record (older runs) stays at epoch + 1."""
    short = [{**entry(0, 32, 0.5, 1.0, 2.0), "epochs_trained": 0.2222}]
    longer = [{**entry(0, 64, 0.6, 0.9, 1.8), "epochs_trained": 0.4444}]
    validation_curves_table([("32 steps", short), ("64 steps", longer), ("old", DPR)], tmp_path / "v.csv")
    rows = list(csv.DictReader((tmp_path / "v.csv").open()))
    assert [(r["label"], r["epochs_trained"]) for r in rows] == [
        ("32 steps", "0.2222"), ("64 steps", "0.4444"), ("old", "1"), ("old", "2")]
    plot_validation([("32 steps", short), ("64 steps", longer)], tmp_path / "v.png", "SQuAD")
    assert (tmp_path / "v.png").read_bytes()[:8] == PNG_MAGIC


def test_each_curve_says_how_many_candidates_its_accuracy_is_out_of(tmp_path):
    """Appendix A compares accuracies at equal candidates a question (DPR against DCSR's "+1 BM25
    random", 2 each): the legend and the CSV give each curve's; older or odd entries give none."""
    from dcsr.evaluation.figures import curve_label

    dcsr = [{**e, "candidates_per_question": 3.0} for e in DCSR]
    assert curve_label("dcsr-squad", dcsr) == "dcsr-squad (3 a question)"
    assert curve_label("dpr", [{**DPR[0], "candidates_per_question": 1.96875}]) == "dpr (1.97 a question)"
    for odd in (None, "3", True, float("nan")):
        assert curve_label("dpr", [{**DPR[0], "candidates_per_question": odd}]) == "dpr"
    assert curve_label("dpr", DPR) == "dpr"
    validation_curves_table([("DPR", DPR), ("DCSR", dcsr)], tmp_path / "squad.csv")
    rows = list(csv.DictReader((tmp_path / "squad.csv").open()))
    assert [r["candidates_per_question"] for r in rows] == ["", "", "3.0", "3.0", "3.0"]


def test_empty_validation_is_an_error_naming_the_model_directory(tmp_path):
    d = model_dir(tmp_path, "dpr-nq", [])
    with pytest.raises(InputError, match="dpr-nq.*never validated"):
        read_validation(d)
    with pytest.raises(InputError, match="no validation.json"):
        read_validation(tmp_path / "nowhere")
    with pytest.raises(InputError, match="DCSR.*empty validation list"):
        plot_validation([("DPR", DPR), ("DCSR", [])], tmp_path / "x.png", "x")
    assert not (tmp_path / "x.png").exists()


def test_read_validation_returns_the_list(tmp_path):
    assert read_validation(model_dir(tmp_path, "m", DCSR)) == DCSR


def test_plot_validation_script(repo, tmp_path):
    dpr, dcsr = model_dir(tmp_path, "dpr", DPR), model_dir(tmp_path, "dcsr", DCSR)
    script = str(repo / "workflow/scripts/plot_validation.py")
    spec = json.dumps({"curves": [{"label": "DPR", "model": str(dpr)}, {"label": "DCSR", "model": str(dcsr)}]})
    subprocess.run([sys.executable, script, "--spec", spec, "--title", "NQ", "--png", str(tmp_path / "a.png"),
                    "--csv", str(tmp_path / "a.csv")], check=True, capture_output=True)
    assert (tmp_path / "a.png").read_bytes()[:8] == PNG_MAGIC
    assert len(list(csv.DictReader((tmp_path / "a.csv").open()))) == 5

    empty = model_dir(tmp_path, "never-trained", [])
    bad = subprocess.run([sys.executable, script, "--model", str(dpr), "--label", "DPR", "--model", str(empty),
                          "--label", "DCSR", "--title", "NQ", "--png", str(tmp_path / "b.png"),
                          "--csv", str(tmp_path / "b.csv")], capture_output=True, text=True)
    assert bad.returncode == 2 and "never-trained" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "b.png").exists()
