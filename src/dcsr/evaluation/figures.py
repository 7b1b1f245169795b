"""Figures: the DCSR paper's Figure 4 (in-batch dev accuracy after each training epoch).

A trained model directory holds ``validation.json``, one entry per validation (see
:func:`dcsr.training.validation.evaluate`): ``epoch`` (0-based), ``epochs_trained`` (the epochs
done when it ran: ``epoch + 1`` at an epoch's end, less where ``max_steps`` stopped training inside
an epoch), ``step``, ``nll_loss``, ``accuracy`` (in-batch dev accuracy, 0..1), ``average_rank``, ...
The paper draws one panel per dataset comparing DPR and DCSR, so one figure here holds the
curves of one dataset.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Sequence

from dcsr.errors import InputError
from dcsr.fsutil import atomic_open, atomic_path

VALIDATION_FILE = "validation.json"  # as dcsr.training.loop writes it
CSV_HEADER = ["label", "epoch", "epochs_trained", "step", "accuracy", "nll_loss", "average_rank",
              "candidates_per_question"]

Curve = tuple[str, Sequence[dict]]  # (label, validation list)


def read_validation(model_dir: str | os.PathLike) -> list[dict]:
    """The validation list of a trained model directory; an error names the directory when it
    is missing or empty (a model never validated has no curve to draw)."""
    path = Path(model_dir) / VALIDATION_FILE
    if not path.is_file():
        raise InputError(str(model_dir), f"no {VALIDATION_FILE} (is this a trained model directory?)")
    try:
        history = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(str(path), f"malformed JSON: {e.msg}")
    if not isinstance(history, list):
        raise InputError(str(path), "expected a list of validation entries")
    if not history:
        raise InputError(str(model_dir), f"{VALIDATION_FILE} is empty: the model was never validated")
    return history


def _checked(curves: Sequence[Curve]) -> list[Curve]:
    if not curves:
        raise InputError("figure", "no curves to draw")
    for label, history in curves:
        if not history:
            raise InputError(label, "empty validation list: the model was never validated")
        for i, v in enumerate(history):
            if not isinstance(v, dict) or not all(k in v for k in ("epoch", "accuracy")):
                raise InputError(label, f"validation entry {i} lacks 'epoch' or 'accuracy'")
    return list(curves)


def epochs_trained(v: dict) -> float:
    """The epochs trained when validation ``v`` ran: its ``epochs_trained``, or ``epoch + 1`` in
    an entry written before the loop recorded it (where a run stopped by ``max_steps`` inside an
    epoch is drawn at that epoch's end)."""
    done = v.get("epochs_trained")
    number = isinstance(done, (int, float)) and not isinstance(done, bool) and done == done
    return float(done) if number else float(v["epoch"] + 1)


def curve_label(label: str, history: Sequence[dict]) -> str:
    """A curve's legend: its label and, where its validations say it, how many passages (DCSR:
    sentences) a dev question's positive is told apart from in its batch, on average: the
    accuracies of two curves compare only at equal numbers (DCSR's Appendix A sets DPR against
    "+1 BM25 random", 2 each: 256 in a batch of 128)."""
    per = history[-1].get("candidates_per_question") if history else None
    number = isinstance(per, (int, float)) and not isinstance(per, bool) and per == per
    return f"{label} ({per:.3g} a question)" if number else label


def plot_validation(curves: Sequence[Curve], out_png: str | os.PathLike, title: str) -> None:
    """Draw in-batch dev accuracy (%) against the epochs trained when each validation ran (after
    each epoch, and where ``max_steps`` stopped inside one), one line per curve, and write the
    PNG atomically. Uses the Agg canvas directly, so no display is needed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(4.5, 3.4), dpi=150)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = []
    for label, history in _checked(curves):
        x = [epochs_trained(v) for v in history]
        xs += x
        ax.plot(x, [100.0 * v["accuracy"] for v in history], marker="o", markersize=3,
                label=curve_label(label, history))
    if all(x == int(x) for x in xs):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epochs trained")
    ax.set_ylabel("in-batch dev accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png")  # the temporary name ends in .tmp, so say the format


def validation_curves_table(curves: Sequence[Curve], out_csv: str | os.PathLike) -> None:
    """Write the plotted numbers as CSV (one line per curve x validation): ``epoch`` 0-based as
    in validation.json, ``epochs_trained`` the figure's x (:func:`epochs_trained`), ``accuracy``
    as a 0..1 fraction."""
    with atomic_open(out_csv, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CSV_HEADER)
        for label, history in _checked(curves):
            for v in history:
                w.writerow([label, v["epoch"], f"{epochs_trained(v):g}", v.get("step", ""), v["accuracy"],
                            v.get("nll_loss", ""), v.get("average_rank", ""), v.get("candidates_per_question", "")])
