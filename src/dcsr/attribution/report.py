"""The encoder attribution paper's tables and figures, regenerated from the pair matrix.

Every output here is a function of two things (:mod:`dcsr.attribution.inputs`): the pair matrix
(``pair_matrix.csv``, one line per question encoder x passage encoder x test set x metric,
collected from the metrics JSON of every pair's run by
:func:`~dcsr.attribution.inputs.write_pair_matrix`) and an
:class:`~dcsr.attribution.inputs.AttributionSpec` (from the pipeline config: the test sets, the
families of in-domain bi-encoders, the sweep).

- Table 2 (tandem zero-shot): :func:`write_tandem_table`;
- Figure 2 (Eq. 7 in-domain marginals relative to the tandem) and the K x K pair matrix per
  test set as a heatmap: :func:`write_marginalization`;
- Figure 3 (data-efficiency sweep, marginals against the 100% encoders): :func:`write_sweep`;
- Table 4 (best-fraction passage encoder against the 100% one): :func:`write_best_fraction_table`;
- beyond the paper, which side DCSR improves over DPR when each encoder is marginalized:
  :func:`write_family_comparison`;
- Table 3 and Figure 4 (training-set statistics of the datasets and the sweep samples):
  :func:`write_coverage`.

Each table is written as CSV (long format, ``ours`` and ``paper`` side by side) and Markdown
in which the paper's numbers are separate, labelled rows; each figure as PNG plus a CSV of
exactly the plotted numbers.
"""

from __future__ import annotations

import csv
import math
import os
from typing import Mapping, Sequence

from dcsr.attribution.analysis import PairMatrix, marginalize_passage, marginalize_question, relative_to_tandem
from dcsr.attribution.inputs import AttributionSpec, Sweep
from dcsr.errors import InputError
from dcsr.fsutil import atomic_open, atomic_path
from dcsr.evaluation.tables import load_paper_numbers, never_found_note, paper_notes

BM25 = "bm25"


# --------------------------------------------------------------------------- helpers


def _paper(paper: Mapping, table: str, row: str, dataset: str | None, metric: str) -> float | None:
    if dataset is None:
        return None
    try:
        value = paper[table]["rows"][row][dataset][metric]
    except (KeyError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _f(v: float | None, digits: int = 1) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _pair(values: Sequence[float | None]) -> str:
    """``79.8/86.9``: the paper's way of showing top-20/top-100 in one cell."""
    return "/".join(_f(v) for v in values)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _metric_title(metrics: Sequence[str]) -> str:
    return "/".join(m.replace("top", "Top-") for m in metrics)


def _write_long_csv(out_csv, header: Sequence[str], rows: Sequence[Sequence]) -> None:
    with atomic_open(out_csv, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow(["" if v is None else (repr(round(v, 4)) if isinstance(v, float) else v) for v in r])


def _write_md(out_md, lines: Sequence[str]) -> None:
    with atomic_open(out_md, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def _never_found_notes(matrix: PairMatrix, test_sets: Sequence[str]) -> list[str]:
    """Under a table: each of ``test_sets`` whose regex answers DPR's code never finds (the counts
    its cells carry, :data:`dcsr.attribution.analysis.NEVER_FOUND`), as under a retrieval table."""
    lines = []
    for t in test_sets:
        cells = [ps[t] for qs in matrix.r.values() for ps in qs.values() if t in ps]
        answers = max((c.get("regex_answers_never_found", 0) for c in cells), default=0)
        if answers:
            hopeless = max(c.get("regex_questions_never_found", 0) for c in cells)
            n = next((int(c["questions"]) for c in cells if "questions" in c), None)
            lines.append(never_found_note(t, int(answers), int(hopeless), n))
    return [""] + lines if lines else []


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=130)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, out_png) -> None:
    fig.tight_layout()
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png")


# --------------------------------------------------------------------------- Table 2


def tandem_rows(matrix: PairMatrix, spec: AttributionSpec) -> list[tuple[str, str, str | None, dict]]:
    """Table 2's rows: ``(label, family, paper row, {test set: {metric: score}})``; BM25 first,
    then every family's in-domain bi-encoder in tandem, ``Average`` over the test sets included."""
    rows = []
    encoders = ([("BM25", None, BM25, BM25, "BM25")] if spec.bm25 else []) + [
        (f"{family}-{ds}", family, m, m, f"DPR-{spec.paper_name(ds)}" if family == "DPR" and spec.paper_name(ds) else None)
        for family, models in spec.families.items() for ds, m in models.items()]
    for label, family, q, p, paper_row in encoders:
        cells = {t: {m: matrix.score(q, p, t, m) for m in spec.metrics_of(t)} for t in spec.test_sets}
        # over the answer-judged test sets: a BEIR test set's cells are other measures
        cells["Average"] = {m: _mean([cells[t][m] for t in spec.answer_test_sets]) for m in spec.metrics}
        rows.append((label, family or "BM25", paper_row, cells))
    return rows


def _column_metrics(spec: AttributionSpec, column: str) -> tuple[str, ...]:
    return spec.metrics if column == "Average" else spec.metrics_of(column)


def write_tandem_table(matrix: PairMatrix, spec: AttributionSpec, paper_numbers: str | os.PathLike,
                       out_csv, out_md) -> None:
    """The attribution paper's Table 2: every in-domain bi-encoder (and BM25) in tandem, zero-shot
    on every test set, with the average; the paper's rows (DPR-NQ, ... BM25) where a dataset
    has a paper name."""
    paper = load_paper_numbers(paper_numbers)
    table = "attribution_table2"
    source = paper.get(table, {}).get("source", table)
    rows = tandem_rows(matrix, spec)
    columns = list(spec.test_sets) + ["Average"]
    named = [t for t in spec.test_sets if spec.paper_name(t)]
    csv_rows = []
    for label, _family, paper_row, cells in rows:
        for t in columns:
            for m in _column_metrics(spec, t):
                pv = None
                if paper_row and t != "Average":
                    pv = _paper(paper, table, paper_row, spec.paper_name(t), m)
                csv_rows.append([label, t, m, cells[t][m], pv, f"{source}: {paper_row}" if pv is not None else ""])
    _write_long_csv(out_csv, ["row", "test_set", "metric", "ours", "paper", "paper_source"], csv_rows)

    head = ["Encoder \\ Test set"] + columns
    md_rows = [[f"{label} (ours)"] + [_pair([cells[t][m] for m in _column_metrics(spec, t)]) for t in columns]
               for label, _f_, _p, cells in rows]
    lines = [f"# Tandem zero-shot retrieval ({_metric_title(spec.metrics)}, %; encoder attribution Table 2)", ""]
    lines += _md_table(head, md_rows)
    paper_rows = sorted({r[2] for r in rows if r[2]}, key=lambda r: (r != "BM25", r))
    if named and paper_rows:
        lines += ["", f"The paper's numbers ({source}) on the test sets that are its datasets; "
                      f"the paper's average is over all five of its test sets:", ""]
        head = ["Paper row"] + [f"{t} ({spec.paper_name(t)})" for t in named] + ["paper Average"]
        prow = []
        for r in paper_rows:
            prow.append([r] + [_pair([_paper(paper, table, r, spec.paper_name(t), m) for m in spec.metrics])
                               for t in named] + [_pair([_paper(paper, table, r, "Average", m) for m in spec.metrics])])
        lines += _md_table(head, prow)
        shown = {(table, r, spec.paper_name(t)) for r in paper_rows for t in named}
        lines += [line for n in paper_notes(paper, shown) for line in ("", f"Note: {n}")]
    else:
        lines += ["", "Paper rows: none of these test sets is one of the paper's datasets."]
    if spec.qrels_test_sets:
        lines += ["", "Each cell of " + ", ".join(spec.answer_test_sets) + " and Average: " + " / ".join(spec.metrics)
                  + " (top-k answer recall). Each cell of " + ", ".join(spec.qrels_test_sets) + " (judged by its own "
                  "qrels, a BEIR collection, zero-shot for every encoder): "
                  + " / ".join(spec.metrics_of(spec.qrels_test_sets[0])) + ". Average: the mean over the answer-judged "
                  "test sets only."]
    else:
        lines += ["", "Each cell: " + " / ".join(spec.metrics) + ". Average: the mean over the test sets of this table."]
    lines += _never_found_notes(matrix, spec.test_sets)
    _write_md(out_md, lines)


# --------------------------------------------------------------------------- Figure 2 and heatmaps


def marginal_rows(matrix: PairMatrix, spec: AttributionSpec, family: str) -> list[dict]:
    """Figure 2 of one family, every metric: per in-domain test set T, the Eq. 7 marginals of
    ``Q_T`` (over the family's passage encoders) and ``D_T`` (over its question encoders), the
    tandem score ``r(Q_T, D_T, T)`` and both marginals relative to it (tandem = 100)."""
    prior = spec.prior(family)
    out = []
    for t, (q, p) in spec.in_domain(family).items():
        for m in spec.metrics:
            qm = marginalize_question(matrix, q, t, m, prior)
            pm = marginalize_passage(matrix, p, t, m, prior)
            tandem = matrix.score(q, p, t, m)
            # a tandem of 0 (top-1 of a weak model) has nothing relative to it: "–", its bars left
            # out, and said so under the table and the figure (write_marginalization)
            rel = (lambda v: relative_to_tandem(matrix, v, q, p, t, m)) if tandem else (lambda v: float("nan"))
            out.append({"family": family, "dataset": t, "metric": m, "question_encoder": q, "passage_encoder": p,
                        "question_marginal": qm, "passage_marginal": pm, "tandem": tandem,
                        "question_relative": rel(qm), "passage_relative": rel(pm)})
    return out


MARGINAL_HEADER = ["family", "dataset", "metric", "question_encoder", "passage_encoder", "question_marginal",
                   "passage_marginal", "tandem", "question_relative", "passage_relative"]


def write_marginalization(matrix: PairMatrix, spec: AttributionSpec, family: str, out_csv, out_md, out_png,
                          heatmap_png, heatmap_csv) -> None:
    """Figure 2 (bars: both encoders' marginal top-k relative to the in-domain tandem, per
    dataset) with its numbers as CSV and Markdown, and the family's full K x K pair matrix on
    every test set as a heatmap (with the matrix as CSV)."""
    rows = marginal_rows(matrix, spec, family)
    _write_long_csv(out_csv, MARGINAL_HEADER, [[r[k] for k in MARGINAL_HEADER] for r in rows])
    prior = spec.prior(family)
    lines = [f"# In-domain encoder marginalization (Eq. 7), {family} (encoder attribution Figure 2)", "",
             f"Prior: the {len(prior)} in-domain {family} encoders ({', '.join(prior)}). A question encoder's "
             "marginal is the mean of its row of the pair matrix over the prior's passage encoders, a passage "
             "encoder's the mean of its column; relative = marginal / tandem x 100.", ""]
    head = ["Dataset", "Metric", "Tandem", "Question enc. marginal", "Passage enc. marginal", "Question rel. %",
            "Passage rel. %", "Larger"]
    lines += _md_table(head, [[r["dataset"], r["metric"], _f(r["tandem"]), _f(r["question_marginal"]),
                               _f(r["passage_marginal"]), _f(r["question_relative"]), _f(r["passage_relative"]),
                               "passage" if r["passage_marginal"] > r["question_marginal"] else
                               ("question" if r["question_marginal"] > r["passage_marginal"] else "equal")]
                              for r in rows])
    lines += ["", "The paper reports Figure 2 as a plot only (no numbers): on all five of its datasets the "
                  "passage encoder's top-20 marginal is the larger."]
    zero = [f"{r['dataset']} ({r['metric']})" for r in rows if not r["tandem"]]
    if zero:
        lines += ["", f"Tandem 0 on {', '.join(zero)}: nothing is relative to it, so those relative values are – "
                      "and their bars are left out of the figure."]
    lines += _never_found_notes(matrix, spec.test_sets)
    _write_md(out_md, lines)

    # Figure 2: grouped bars, the first metric (top-20 in the paper)
    metric = spec.metrics[0]
    first = [r for r in rows if r["metric"] == metric]
    fig = _figure(max(4.0, 1.2 * len(first) + 2), 3.4)
    ax = fig.add_subplot()
    xs = range(len(first))
    ax.bar([x - 0.2 for x in xs], [r["question_relative"] for r in first], width=0.4, label="question encoder")
    ax.bar([x + 0.2 for x in xs], [r["passage_relative"] for r in first], width=0.4, label="passage encoder")
    ax.axhline(100.0, color="black", linewidth=0.8)
    ax.set_xticks(list(xs), [r["dataset"] for r in first])
    ax.set_ylabel(f"marginal {metric.replace('top', 'top-')} / tandem (%)")
    missing = [r["dataset"] for r in first if not r["tandem"]]
    ax.set_title(f"{family}: in-domain encoder marginalization"
                 + (f"\n(tandem {metric} 0, no bars: {', '.join(missing)})" if missing else ""))
    ax.legend(fontsize=8)
    _save(fig, out_png)

    # heatmap: r(q, p, t) for the family's K x K pairs, one panel per test set (a BEIR test set's:
    # its first qrels measure, nDCG@10 (qrels))
    shown = {t: metric if t not in spec.qrels_test_sets else spec.metrics_of(t)[0] for t in spec.test_sets}
    _write_long_csv(heatmap_csv, ["test_set", "metric", "question_encoder", "passage_encoder", "value"],
                    [[t, shown[t], q, p, matrix.score(q, p, t, shown[t])] for t in spec.test_sets for q in prior
                     for p in prior])
    fig = _figure(3.2 * len(spec.test_sets) + 0.6, 0.45 * len(prior) + 3.2)
    for i, t in enumerate(spec.test_sets):
        ax = fig.add_subplot(1, len(spec.test_sets), i + 1)
        grid = [[matrix.score(q, p, t, shown[t]) for p in prior] for q in prior]
        ax.imshow(grid, cmap="viridis", vmin=0, vmax=100)
        for a, row in enumerate(grid):
            for b, v in enumerate(row):
                ax.text(b, a, f"{v:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if v < 60 else "black")
        names = [next(ds for ds, m in spec.families[family].items() if m == e) for e in prior]
        ax.set_xticks(range(len(prior)), names, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(prior)), names if i == 0 else [""] * len(prior), fontsize=7)
        ax.set_title(f"test: {t}" + (f"\n{shown[t]}" if shown[t] != metric else ""), fontsize=9)
        if i == 0:
            ax.set_ylabel("question encoder of")
        ax.set_xlabel("passage encoder of")
    fig.suptitle(f"{family} pair matrix, {metric.replace('top', 'top-')} (%)", fontsize=10)
    _save(fig, heatmap_png)


# --------------------------------------------------------------------------- Figure 3 and Table 4


SWEEP_HEADER = ["dataset", "fraction", "model", "metric", "question_marginal", "passage_marginal",
                "question_normalized", "passage_normalized"]


def sweep_rows(matrix: PairMatrix, spec: AttributionSpec) -> list[dict]:
    """Figure 3: for every sweep dataset d and fraction f, the in-domain (test set d) marginals of
    the encoders trained on f of d, each against the sweep family's 100% encoders of all the
    datasets (so every fraction is marginalized the same way), and normalized so that the
    100% encoder is 100."""
    prior = spec.prior(spec.sweep_family)
    out = []
    for sweep in spec.sweeps:
        d = sweep.dataset
        full = dict(sweep.models)[1.0]
        for m in spec.metrics:
            q_full = marginalize_question(matrix, full, d, m, prior)
            p_full = marginalize_passage(matrix, full, d, m, prior)
            for f, model in sweep.models:
                qm = marginalize_question(matrix, model, d, m, prior)
                pm = marginalize_passage(matrix, model, d, m, prior)
                out.append({"dataset": d, "fraction": f, "model": model, "metric": m, "question_marginal": qm,
                            "passage_marginal": pm,
                            "question_normalized": 100.0 * qm / q_full if q_full else float("nan"),
                            "passage_normalized": 100.0 * pm / p_full if p_full else float("nan")})
    return out


def write_sweep(matrix: PairMatrix, spec: AttributionSpec, out_csv, out_png) -> None:
    """Figure 3: both encoders' normalized in-domain marginals against the training fraction."""
    rows = sweep_rows(matrix, spec)
    _write_long_csv(out_csv, SWEEP_HEADER, [[r[k] for k in SWEEP_HEADER] for r in rows])
    fig = _figure(7.0, 2.8 * len(spec.metrics))
    for i, m in enumerate(spec.metrics):
        for j, side in enumerate(("question", "passage")):
            ax = fig.add_subplot(len(spec.metrics), 2, 2 * i + j + 1)
            for sweep in spec.sweeps:
                pts = [r for r in rows if r["dataset"] == sweep.dataset and r["metric"] == m]
                ax.plot([100 * r["fraction"] for r in pts], [r[f"{side}_normalized"] for r in pts], marker="o",
                        markersize=3, label=sweep.dataset)
            ax.axhline(100.0, color="black", linewidth=0.8)
            ax.set_title(f"{side} encoder, {m.replace('top', 'top-')}", fontsize=9)
            ax.set_xlabel("training data (%)")
            if j == 0:
                ax.set_ylabel("marginal / 100% encoder's (%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    _save(fig, out_png)


#: the fraction the paper's Table 4 found best (SQuAD-40%)
PAPER_BEST_FRACTION = 0.4


def best_fraction(matrix: PairMatrix, spec: AttributionSpec, sweep: Sweep) -> tuple[float, str]:
    """``(fraction, model)`` whose passage encoder has the highest in-domain marginal of the first
    metric on the sweep's dataset (ties: the larger fraction), as the paper picks SQuAD-40%."""
    prior = spec.prior(spec.sweep_family)
    scored = [(marginalize_passage(matrix, model, sweep.dataset, spec.metrics[0], prior), f, model)
              for f, model in sweep.models]
    _, f, model = max(scored, key=lambda x: (x[0], x[1]))
    return f, model


def _percent(f: float) -> str:
    return f"{100 * f:g}%"


def write_best_fraction_table(matrix: PairMatrix, spec: AttributionSpec, paper_numbers, out_csv, out_md) -> None:
    """Table 4: for each sweep dataset, its best-fraction passage encoder against the 100% one,
    each paired with every dataset's (100%) in-domain question encoder on that dataset's test set."""
    paper = load_paper_numbers(paper_numbers)
    table = "attribution_table4"
    source = paper.get(table, {}).get("source", table)
    family = spec.families[spec.sweep_family]
    tests = [t for t in spec.test_sets if t in family]
    columns = tests + ["Average"]
    csv_rows, md_rows = [], []
    notes = []
    for sweep in spec.sweeps:
        f_best, best = best_fraction(matrix, spec, sweep)
        pname = spec.paper_name(sweep.dataset)
        models = dict(sweep.models)
        compared = [(1.0, models[1.0], f"{pname}-100%" if pname else None)]
        # the best fraction, and the paper's own (40%) when the sweep has it: each beside the
        # paper's 40% row only when it is 40% of the data
        for f in sorted(({f_best} | {f for f in models if math.isclose(f, PAPER_BEST_FRACTION)}) - {1.0},
                        key=lambda f: f != f_best):
            paper_row = f"{pname}-40%" if pname and math.isclose(f, PAPER_BEST_FRACTION) else None
            compared.append((f, models[f], paper_row))
        for f, model, paper_row in compared:
            label = f"{sweep.dataset}-{_percent(f)}"
            cells = {t: {m: matrix.score(family[t], model, t, m) for m in spec.metrics} for t in tests}
            cells["Average"] = {m: _mean([cells[t][m] for t in tests]) for m in spec.metrics}
            for t in columns:
                for m in spec.metrics:
                    pv = _paper(paper, table, paper_row, spec.paper_name(t) if t != "Average" else None, m) \
                        if paper_row else None
                    csv_rows.append([label, model, t, m, cells[t][m], pv,
                                     f"{source}: {paper_row}" if pv is not None else ""])
            md_rows.append([f"{label} (ours{', best' if f == f_best and f != 1.0 else ''})"] + [_pair([cells[t][m] for m in spec.metrics]) for t in columns])
        notes.append(f"{sweep.dataset}: best fraction {_percent(f_best)} (highest in-domain marginal "
                     f"{spec.metrics[0]} of the passage encoder, Figure 3)"
                     + (", the same as the 100% encoder" if f_best == 1.0 else ""))
    _write_long_csv(out_csv, ["row", "passage_encoder", "test_set", "metric", "ours", "paper", "paper_source"], csv_rows)
    lines = [f"# Best-fraction passage encoder against the 100% one ({_metric_title(spec.metrics)}, %; "
             "encoder attribution Table 4)", "",
             "Each column pairs the passage encoder with that test set's own in-domain (100%) question encoder.", ""]
    lines += _md_table(["P-encoder"] + columns, md_rows)
    lines += [""] + [f"- {n}" for n in notes]
    if any(spec.paper_name(s.dataset) == "SQuAD" for s in spec.sweeps) and any(spec.paper_name(t) for t in tests):
        named = [t for t in tests if spec.paper_name(t)]
        lines += ["", f"The paper ({source}), its best fraction being 40%:", ""]
        lines += _md_table(["Paper row"] + [f"{t} ({spec.paper_name(t)})" for t in named] + ["paper Average"],
                           [[r] + [_pair([_paper(paper, table, r, spec.paper_name(t), m) for m in spec.metrics])
                                   for t in named] + [_pair([_paper(paper, table, r, "Average", m)
                                                             for m in spec.metrics])]
                            for r in ("SQuAD-100%", "SQuAD-40%")])
    else:
        lines += ["", "Paper rows: the paper's Table 4 is SQuAD's sweep; no sweep dataset here is SQuAD."]
    lines += _never_found_notes(matrix, tests)
    _write_md(out_md, lines)


# --------------------------------------------------------------------------- DPR vs DCSR


COMPARE_HEADER = ["dataset", "metric", "side", "baseline", "method", "baseline_marginal", "method_marginal", "gain"]


def comparison_rows(matrix: PairMatrix, spec: AttributionSpec) -> list[dict]:
    """Per dataset both families share, per metric and side (question, passage, tandem): the
    baseline family's marginal, the method's, and the gain (method - baseline), each family
    marginalized over its own in-domain encoders."""
    base, method = spec.compare
    out = []
    shared = [t for t in spec.test_sets if t in spec.families[base] and t in spec.families[method]]
    for t in shared:
        for m in spec.metrics:
            values = {}
            for fam in (base, method):
                model, prior = spec.families[fam][t], spec.prior(fam)
                values[fam] = {"question": marginalize_question(matrix, model, t, m, prior),
                               "passage": marginalize_passage(matrix, model, t, m, prior),
                               "tandem": matrix.score(model, model, t, m)}
            for side in ("question", "passage", "tandem"):
                out.append({"dataset": t, "metric": m, "side": side, "baseline": base, "method": method,
                            "baseline_marginal": values[base][side], "method_marginal": values[method][side],
                            "gain": values[method][side] - values[base][side]})
    return out


def write_family_comparison(matrix: PairMatrix, spec: AttributionSpec, out_csv, out_md) -> None:
    """Which encoder a method (DCSR) improves over its baseline (DPR) when each is marginalized."""
    base, method = spec.compare
    rows = comparison_rows(matrix, spec)
    _write_long_csv(out_csv, COMPARE_HEADER, [[r[k] for k in COMPARE_HEADER] for r in rows])
    lines = [f"# Which encoder does {method} improve over {base}? In-domain marginals (Eq. 7), "
             f"{_metric_title(spec.metrics)} (%)", "",
             f"Each family is marginalized over its own in-domain encoders ({base}: "
             f"{', '.join(spec.prior(base))}; {method}: {', '.join(spec.prior(method))}). A gain is {method} minus "
             f"{base}; the last column names the encoder whose gain is larger (or whose loss is smaller). "
             "Not in either paper.", ""]
    head = ["Dataset", "Metric", f"Q: {base}", f"Q: {method}", "Q gain", f"P: {base}", f"P: {method}", "P gain",
            "tandem gain", "larger gain on"]
    md_rows = []
    by = {(r["dataset"], r["metric"], r["side"]): r for r in rows}
    for t, m in dict.fromkeys((r["dataset"], r["metric"]) for r in rows):
        q, p, tan = by[(t, m, "question")], by[(t, m, "passage")], by[(t, m, "tandem")]
        side = "passage side" if p["gain"] > q["gain"] else ("question side" if q["gain"] > p["gain"] else "equal")
        md_rows.append([t, m, _f(q["baseline_marginal"]), _f(q["method_marginal"]), f"{q['gain']:+.1f}",
                        _f(p["baseline_marginal"]), _f(p["method_marginal"]), f"{p['gain']:+.1f}",
                        f"{tan['gain']:+.1f}", side])
    lines += _md_table(head, md_rows)
    lines += _never_found_notes(matrix, list(dict.fromkeys(r["dataset"] for r in rows)))
    _write_md(out_md, lines)


# --------------------------------------------------------------------------- Table 3 and Figure 4


COVERAGE_HEADER = ["dataset", "fraction", "questions", "coverage", "overlapping", "overlap", "unique",
                   "coverage_normalized", "unique_normalized", "min_questions", "alpha"]


def _coverage_paper_note(paper: Mapping, names: Sequence[str | None]) -> list[str]:
    """Why our coverage may differ from the paper's: its Table 3 coverage is not the number of
    distinct gold passages that DCSR's Table 1 counts in the same DPR files (the sum of its
    buckets), though its overlap is that count's share with 2 or more questions."""
    t1, t3 = paper.get("dcsr_table1", {}).get("rows", {}), paper.get("attribution_table3", {}).get("rows", {})
    both = [n for n in names if n in t1 and n in t3]
    if not both:
        return []
    sums = {n: sum(t1[n][b] for b in ("1", "2", "3", ">=4")) for n in both}
    shares = {n: (sums[n] - t1[n]["1"]) / sums[n] for n in both}
    return ["", "The paper's coverage is not the number of distinct gold passages that DCSR's Table 1 counts in the "
            "same DPR files (the sum of its buckets: " + ", ".join(f"{n} {sums[n]:,}" for n in both) + " against "
            + ", ".join(f"{t3[n]['coverage']:,}" for n in both) + " here), though its overlap is that count's share "
            "of passages with 2 or more questions (" + ", ".join(f"{shares[n]:.2f}" for n in both) + " against "
            + ", ".join(f"{t3[n]['overlap']:.2f}" for n in both) + "). What the paper counted as coverage is not "
            "known (its words: distinct positive passages, with different texts and titles), so our coverage and "
            "unique columns can differ from its by as much; its overlap is comparable."]


def write_coverage(stats: Sequence[tuple[str, float, dict]], paper_names: Mapping[str, str | None],
                   paper_numbers, out_csv, out_md, out_png, fig_csv) -> None:
    """Table 3 (corpus coverage, positive passage overlap, unique coverage of each training set)
    and Figure 4 (coverage and unique coverage of the sweep samples, normalized to 100%).

    ``stats``: ``(dataset, fraction, coverage_statistics)``; fraction 1.0 is the whole training
    set. Datasets with a single entry appear only in Table 3.
    """
    paper = load_paper_numbers(paper_numbers)
    table = "attribution_table3"
    source = paper.get(table, {}).get("source", table)
    full = {d: s for d, f, s in stats if f == 1.0}
    missing = sorted({entry[0] for entry in stats} - set(full))
    if missing:
        raise InputError("coverage statistics", f"no 100% entry for {', '.join(missing)}")
    rows = []
    for d, f, s in sorted(stats, key=lambda x: (x[0], x[1])):
        norm = lambda k: 100.0 * s[k] / full[d][k] if full[d][k] else float("nan")  # noqa: E731
        rows.append([d, f, s["questions"], s["coverage"], s["overlapping"], s["overlap"], s["unique"],
                     norm("coverage"), norm("unique"), s["min_questions"], s["alpha"]])
    _write_long_csv(out_csv, COVERAGE_HEADER, rows)
    alpha, min_q = next(iter(full.values()))["alpha"], next(iter(full.values()))["min_questions"]
    lines = ["# Training-set statistics (encoder attribution Table 3)", "",
             f"Coverage: distinct gold passages (a question's first positive). Overlap: share of them that are "
             f"the gold passage of at least {min_q} training questions. Unique: coverage x (1 - overlap)^{alpha:g}.",
             ""]
    md = [[f"{d} (ours)", f"{s['questions']:,}", f"{s['coverage']:,}", _f(s["overlap"], 2), f"{s['unique']:,.0f}"]
          for d, s in sorted(full.items())]
    for d in sorted(full):
        name = paper_names.get(d)
        row = paper.get(table, {}).get("rows", {}).get(name) if name else None
        if row:
            md.append([f"{name} (paper)", "–", f"{row['coverage']:,}", f"{row['overlap']:.2f}", f"{row['unique']:,}"])
    lines += _md_table(["Dataset", "Questions", "Coverage", "Overlap", "Unique"], md)
    if not any(paper_names.get(d) in paper.get(table, {}).get("rows", {}) for d in full):
        lines += ["", f"Paper rows ({source}): NQ, Trivia, SQuAD; none of these datasets is one of them."]
    else:
        lines += ["", f"Paper rows: {source}."] + _coverage_paper_note(paper, [paper_names.get(d) for d in sorted(full)])
    sweeps = sorted({d for d, fraction, _stats in stats if fraction != 1.0})
    if sweeps:
        lines += ["", "Sweep samples (Figure 4; normalized = % of the 100% value):", ""]
        lines += _md_table(["Dataset", "Fraction", "Questions", "Coverage", "Overlap", "Unique", "Coverage norm. %",
                            "Unique norm. %"],
                           [[r[0], _percent(r[1]), str(r[2]), str(r[3]), _f(r[5], 2), f"{r[6]:.1f}", _f(r[7]),
                             _f(r[8])] for r in rows if r[0] in sweeps])
    _write_md(out_md, lines)

    fig_rows = [r for r in rows if r[0] in sweeps]
    _write_long_csv(fig_csv, ["dataset", "fraction", "coverage_normalized", "unique_normalized"],
                    [[r[0], r[1], r[7], r[8]] for r in fig_rows])
    fig = _figure(7.0, 2.9)
    for j, (k, title) in enumerate(((7, "corpus coverage"), (8, "unique passage coverage"))):
        ax = fig.add_subplot(1, 2, j + 1)
        for d in sweeps:
            pts = [r for r in fig_rows if r[0] == d]
            ax.plot([100 * r[1] for r in pts], [r[k] for r in pts], marker="o", markersize=3, label=d)
        ax.set_title(f"{title} (normalized)", fontsize=9)
        ax.set_xlabel("training data (%)")
        ax.set_ylabel("% of the 100% sample")
        ax.grid(alpha=0.3)
        if sweeps:
            ax.legend(fontsize=7)
    _save(fig, out_png)


# --------------------------------------------------------------------------- Table 1: dataset sizes

SPLITS = ("train", "dev", "test")


def dataset_sizes(train_json: str | os.PathLike, dev_json: str | os.PathLike, test_qas: str | os.PathLike) -> dict:
    """``{"train", "dev", "test"}``: the questions of a dataset's three files, as the paper's
    Table 1 (DPR's) counts them: "Train" after filtering (the records with a positive passage, the
    ones training reads), dev and test as published (every record of the dev JSON; DPR's NQ dev
    JSON holds only its 6,515 questions with a positive, where the table's 8,757 is the whole dev
    set)."""
    from dcsr.attribution.analysis import count_records
    from dcsr.data.formats import iter_biencoder, iter_qas

    return {"train": sum(1 for r in iter_biencoder(train_json, require_positive=False) if r["positive_ctxs"]),
            "dev": count_records(dev_json), "test": sum(1 for _ in iter_qas(test_qas))}


def write_dataset_sizes(rows: Sequence[tuple[str, str | None, dict]], paper_numbers: str | os.PathLike, out_csv,
                        out_md) -> None:
    """The attribution paper's Table 1 (questions per dataset and split), the paper's numbers
    beside ours. ``rows`` are ``(dataset, paper name or None, dataset_sizes(...))``."""
    from dcsr.evaluation.stats import write_statistics_csv

    source, paper_rows = write_statistics_csv(rows, paper_numbers, "attribution_table1", SPLITS, out_csv)
    table = []
    for label, name, sizes in rows:
        table.append([f"{label} (ours)"] + [f"{sizes[s]:,}" for s in SPLITS])
        if name and name in paper_rows:
            paper_row = paper_rows[name]
            table.append([f"{name} (paper)"] + ["–" if paper_row.get(s) is None else f"{int(paper_row[s]):,}"
                                                for s in SPLITS])
    lines = ["# Questions per dataset (encoder attribution paper, Table 1)", ""]
    lines += _md_table(["Dataset", "Train", "Dev", "Test"], table)
    lines += ["", f"Rows marked (paper): {source}. Ours: the records of each dataset's train and dev files and the "
                  "questions of its test file, as the pipeline reads them."]
    _write_md(out_md, lines)
