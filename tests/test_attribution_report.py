"""The attribution tables and figures, computed from a hand-made pair matrix."""
import csv
import json
import math

import pytest

from dcsr.attribution.analysis import fraction_of, percent_label, sweep_model_name
from dcsr.attribution.inputs import AttributionSpec, read_pair_matrix, write_pair_matrix
from dcsr.attribution.report import (best_fraction, comparison_rows, marginal_rows, sweep_rows, tandem_rows,
                                     write_best_fraction_table, write_coverage, write_family_comparison,
                                     write_marginalization, write_sweep, write_tandem_table)
from dcsr.pipeline.config import check_config, sweep_models
from dcsr.errors import InputError

# Two datasets A and B. DPR family: a (on A), b (on B); DCSR family: x (on A), y (on B).
# The sweep retrains a on 50% of A: a50. top20 per (question, passage, test set); top100 = top20 + 10.
TOP20 = {
    ("a", "a", "A"): 80, ("a", "b", "A"): 60, ("b", "a", "A"): 50, ("b", "b", "A"): 40,
    ("a", "a", "B"): 30, ("a", "b", "B"): 50, ("b", "a", "B"): 20, ("b", "b", "B"): 60,
    ("x", "x", "A"): 90, ("x", "y", "A"): 70, ("y", "x", "A"): 60, ("y", "y", "A"): 50,
    ("x", "x", "B"): 40, ("x", "y", "B"): 55, ("y", "x", "B"): 30, ("y", "y", "B"): 70,
    ("bm25", "bm25", "A"): 45, ("bm25", "bm25", "B"): 35,
    # the sweep encoder a50: its question side on A, its passage side on A and with B's question encoder on B
    ("a50", "a", "A"): 70, ("a50", "b", "A"): 50, ("a", "a50", "A"): 84, ("b", "a50", "A"): 56,
    ("b", "a50", "B"): 62,
}
SPEC = {
    "test_sets": ["A", "B"], "metrics": ["top20", "top100"],
    "families": {"DPR": {"A": "a", "B": "b"}, "DCSR": {"A": "x", "B": "y"}},
    "paper_names": {"A": "SQuAD", "B": None}, "bm25": True,
    "sweep_family": "DPR", "sweeps": [{"dataset": "A", "models": [[0.5, "a50"], [1.0, "a"]]}],
    "compare": ["DPR", "DCSR"],
}


@pytest.fixture
def matrix_csv(tmp_path):
    cells = []
    for (q, p, t), v in TOP20.items():
        path = tmp_path / f"{q}-{p}-{t}.json"
        path.write_text(json.dumps({"questions": 10, "match": "string", "top1": v / 2, "top20": v, "top100": v + 10}))
        cells.append((q, p, t, path))
    out = tmp_path / "pair_matrix.csv"
    assert write_pair_matrix(cells, out) == len(TOP20)
    return out


@pytest.fixture
def spec():
    return AttributionSpec.from_dict(SPEC)


def test_pair_matrix_csv_round_trip(matrix_csv):
    rows = list(csv.DictReader(open(matrix_csv)))
    assert len(rows) == 3 * len(TOP20)  # top1, top20, top100 of every cell
    m = read_pair_matrix(matrix_csv)
    assert m.score("b", "a50", "B", "top20") == 62.0 and m.score("x", "y", "B", "top100") == 65.0
    assert "a-b-A.json" in m.sources[("a", "b", "A")]


@pytest.mark.parametrize("line, message", [("a,b,A,top20,nan,s", "not finite"), ("a,b,A,top20,x,s", "not a number"),
                                           ("a,b,A,top20", "expected 6 fields"),
                                           ("a,a,A,top20,1,s", "given twice")])
def test_bad_pair_matrix_lines_name_file_and_line(matrix_csv, line, message):
    with open(matrix_csv, "a") as fh:
        fh.write(line + "\n")
    n = sum(1 for _ in open(matrix_csv))
    with pytest.raises(InputError, match=rf"pair_matrix\.csv:{n}: .*{message}"):
        read_pair_matrix(matrix_csv)


def test_tandem_rows_are_the_diagonal_with_averages(matrix_csv, spec):
    rows = {label: cells for label, _fam, _paper, cells in tandem_rows(read_pair_matrix(matrix_csv), spec)}
    assert list(rows) == ["BM25", "DPR-A", "DPR-B", "DCSR-A", "DCSR-B"]
    assert rows["DPR-A"]["A"]["top20"] == 80 and rows["DPR-A"]["B"]["top20"] == 30  # a with a on both test sets
    assert rows["DPR-B"]["Average"]["top20"] == pytest.approx((40 + 60) / 2)
    assert rows["BM25"]["Average"]["top100"] == pytest.approx((55 + 45) / 2)


def test_tandem_table_shows_the_papers_rows_for_named_test_sets(matrix_csv, spec, repo, tmp_path):
    write_tandem_table(read_pair_matrix(matrix_csv), spec, repo / "config" / "paper_numbers.yaml",
                       tmp_path / "t2.csv", tmp_path / "t2.md")
    rows = list(csv.DictReader(open(tmp_path / "t2.csv")))
    squad = {(r["row"], r["metric"]): r for r in rows if r["test_set"] == "A"}
    # dataset A is SQuAD for the paper: DPR-A is compared with DPR-SQuAD on SQuAD (61.1 / 76.0), BM25 with 71.1
    assert squad[("DPR-A", "top20")]["paper"] == "61.1" and squad[("DPR-A", "top100")]["paper"] == "76.0"
    assert squad[("BM25", "top20")]["paper"] == "71.1" and squad[("DPR-A", "top20")]["ours"] == "80.0"
    assert squad[("DCSR-A", "top20")]["paper"] == ""  # the paper has no DCSR
    md = (tmp_path / "t2.md").read_text()
    assert "| DPR-A (ours) | 80.0/90.0 | 30.0/40.0 | 55.0/65.0 |" in md
    assert "| DPR-SQuAD | 61.1/76.0 | 67.3/80.0 |" in md
    assert "do not compile" not in md  # no test set's metrics count a pattern never found


def test_figure2_rows_follow_eq7(matrix_csv, spec):
    rows = {(r["dataset"], r["metric"]): r for r in marginal_rows(read_pair_matrix(matrix_csv), spec, "DPR")}
    a = rows[("A", "top20")]
    # Q_A = a: row (80 + 60) / 2; D_A = a: column (80 + 50) / 2; tandem 80
    assert (a["question_marginal"], a["passage_marginal"], a["tandem"]) == (70.0, 65.0, 80.0)
    assert a["question_relative"] == pytest.approx(87.5) and a["passage_relative"] == pytest.approx(81.25)
    b = rows[("B", "top100")]
    # Q_B = b on B: (30 + 70) / 2; D_B = b: (60 + 70) / 2
    assert (b["question_marginal"], b["passage_marginal"]) == (50.0, 65.0)


def test_a_zero_tandem_leaves_its_bars_out_and_says_so(spec, tmp_path):
    """A tandem of 0 (top-1 of a tiny random model) has nothing relative to it: the relative
    values are NaN ("–"), and the table's notes and the figure's title name it, where a bar was
    left out without a word before."""
    from dcsr.attribution.analysis import PairMatrix
    m = PairMatrix()
    for (q, p, t), v in TOP20.items():
        top20 = 0.0 if (q, p, t) == ("b", "b", "B") else float(v)
        m.add(q, p, t, {"top20": top20, "top100": top20 + 10}, source=f"{q}-{p}-{t}.json")
    rows = {(r["dataset"], r["metric"]): r for r in marginal_rows(m, spec, "DPR")}
    assert math.isnan(rows[("B", "top20")]["question_relative"]) and math.isnan(rows[("B", "top20")]["passage_relative"])
    assert rows[("B", "top100")]["question_relative"] > 0 and rows[("A", "top20")]["question_relative"] > 0
    out = {k: tmp_path / f"m.{k}" for k in ("csv", "md", "png")}
    write_marginalization(m, spec, "DPR", out["csv"], out["md"], out["png"], tmp_path / "h.png", tmp_path / "h.csv")
    md = out["md"].read_text()
    assert "Tandem 0 on B (top20): nothing is relative to it" in md
    assert "| B | top20 | 0.0 |" in md and md.count("| – | – |") == 1


def test_marginalization_outputs(matrix_csv, spec, tmp_path):
    out = {k: tmp_path / f"m.{k}" for k in ("csv", "md", "png")}
    write_marginalization(read_pair_matrix(matrix_csv), spec, "DCSR", out["csv"], out["md"], out["png"],
                          tmp_path / "h.png", tmp_path / "h.csv")
    rows = list(csv.DictReader(open(out["csv"])))
    assert {(r["dataset"], r["metric"]) for r in rows} == {("A", "top20"), ("A", "top100"), ("B", "top20"),
                                                            ("B", "top100")}
    first = next(r for r in rows if (r["dataset"], r["metric"]) == ("A", "top20"))
    assert float(first["question_marginal"]) == 80.0 and float(first["passage_marginal"]) == 75.0
    for png in (out["png"], tmp_path / "h.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    heat = list(csv.DictReader(open(tmp_path / "h.csv")))
    assert len(heat) == 2 * 2 * 2 and {r["metric"] for r in heat} == {"top20"}
    # the DCSR family's K x K cells, each the top20 it was given (TOP20 holds DPR's cells too)
    assert {(r["question_encoder"], r["passage_encoder"], r["test_set"]): float(r["value"]) for r in heat} == \
        {(q, p, t): TOP20[(q, p, t)] for q in "xy" for p in "xy" for t in "AB"}


def test_sweep_normalizes_to_the_100_percent_encoder(matrix_csv, spec, tmp_path):
    rows = {(r["fraction"], r["metric"]): r for r in sweep_rows(read_pair_matrix(matrix_csv), spec)}
    half = rows[(0.5, "top20")]
    # a50's question side on A: (70 + 50) / 2 = 60 against a's 70; passage side: (84 + 56) / 2 = 70 against 65
    assert (half["question_marginal"], half["passage_marginal"]) == (60.0, 70.0)
    assert half["question_normalized"] == pytest.approx(100 * 60 / 70)
    assert half["passage_normalized"] == pytest.approx(100 * 70 / 65)
    assert rows[(1.0, "top20")]["question_normalized"] == 100.0
    write_sweep(read_pair_matrix(matrix_csv), spec, tmp_path / "s.csv", tmp_path / "s.png")
    written = {(float(r["fraction"]), r["metric"]): r for r in csv.DictReader(open(tmp_path / "s.csv"))}
    assert len(written) == 4 and written[(0.5, "top20")]["model"] == "a50"
    # the same hand-computed numbers in the file: top100 = top20 + 10, so a50's passage side is 80 against 75
    assert float(written[(0.5, "top20")]["passage_normalized"]) == pytest.approx(100 * 70 / 65)
    assert float(written[(0.5, "top100")]["passage_normalized"]) == pytest.approx(100 * 80 / 75)
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_best_fraction_and_table4(matrix_csv, spec, repo, tmp_path):
    m = read_pair_matrix(matrix_csv)
    assert best_fraction(m, spec, spec.sweeps[0]) == (0.5, "a50")  # passage marginal 70 > 65
    write_best_fraction_table(m, spec, repo / "config" / "paper_numbers.yaml", tmp_path / "t4.csv", tmp_path / "t4.md")
    rows = {(r["row"], r["test_set"], r["metric"]): r for r in csv.DictReader(open(tmp_path / "t4.csv"))}
    # each test set's own question encoder with the passage encoder: (a, a50, A) = 84, (b, a50, B) = 62
    assert float(rows[("A-50%", "A", "top20")]["ours"]) == 84.0 and float(rows[("A-50%", "B", "top20")]["ours"]) == 62.0
    assert float(rows[("A-50%", "Average", "top20")]["ours"]) == 73.0
    assert float(rows[("A-100%", "B", "top20")]["ours"]) == 20.0  # (b, a, B)
    assert rows[("A-100%", "A", "top20")]["paper"] == "61.1"  # A is SQuAD: SQuAD-100% on SQuAD
    # the best fraction here is 50%: not the paper's 40% row, and with no 40% in the sweep, no 40% row
    assert {r["paper"] for k, r in rows.items() if k[0] == "A-50%"} == {""}
    assert not any(k[0] == "A-40%" for k in rows)
    md = (tmp_path / "t4.md").read_text()
    assert "best fraction 50%" in md and "| A-50% (ours, best) |" in md and "| A-100% (ours) |" in md


def test_table4_puts_the_papers_40_percent_row_beside_our_40_percent_encoder(matrix_csv, repo, tmp_path):
    cells = [(q, p, t, tmp_path / f"{q}-{p}-{t}.json") for q, p, t in TOP20]
    extra = {("a40", "a", "A"): 60, ("a40", "b", "A"): 40, ("a", "a40", "A"): 75, ("b", "a40", "A"): 45,
             ("b", "a40", "B"): 50}
    for (q, p, t), v in extra.items():
        path = tmp_path / f"{q}-{p}-{t}.json"
        path.write_text(json.dumps({"questions": 10, "match": "string", "top1": v / 2, "top20": v, "top100": v + 10}))
        cells.append((q, p, t, path))
    write_pair_matrix(cells, tmp_path / "m.csv")
    m = read_pair_matrix(tmp_path / "m.csv")
    spec = AttributionSpec.from_dict({**SPEC, "sweeps": [{"dataset": "A",
                                                          "models": [[0.4, "a40"], [0.5, "a50"], [1.0, "a"]]}]})
    assert best_fraction(m, spec, spec.sweeps[0]) == (0.5, "a50")
    write_best_fraction_table(m, spec, repo / "config" / "paper_numbers.yaml", tmp_path / "t4.csv", tmp_path / "t4.md")
    rows = {(r["row"], r["test_set"], r["metric"]): r for r in csv.DictReader(open(tmp_path / "t4.csv"))}
    assert sorted({k[0] for k in rows}) == ["A-100%", "A-40%", "A-50%"]
    assert rows[("A-40%", "A", "top20")]["ours"] == "75.0" and rows[("A-40%", "A", "top20")]["paper"] == "62.3"
    assert rows[("A-50%", "A", "top20")]["paper"] == ""
    md = (tmp_path / "t4.md").read_text()
    assert md.index("| A-50% (ours, best) |") < md.index("| A-40% (ours) |")
    # when 40% is the best, one row, beside the paper's
    spec = AttributionSpec.from_dict({**SPEC, "sweeps": [{"dataset": "A", "models": [[0.4, "a50"], [1.0, "a"]]}]})
    write_best_fraction_table(m, spec, repo / "config" / "paper_numbers.yaml", tmp_path / "t4.csv", tmp_path / "t4.md")
    rows = {(r["row"], r["test_set"], r["metric"]): r for r in csv.DictReader(open(tmp_path / "t4.csv"))}
    assert sorted({k[0] for k in rows}) == ["A-100%", "A-40%"] and rows[("A-40%", "A", "top20")]["ours"] == "84.0"
    assert rows[("A-40%", "A", "top20")]["paper"] == "62.3"


def test_family_comparison_says_which_side_gains(matrix_csv, spec, tmp_path):
    rows = {(r["dataset"], r["metric"], r["side"]): r for r in comparison_rows(read_pair_matrix(matrix_csv), spec)}
    q, p = rows[("A", "top20", "question")], rows[("A", "top20", "passage")]
    # DCSR x on A: row (90 + 70) / 2 = 80 vs DPR 70; column (90 + 60) / 2 = 75 vs DPR 65
    assert (q["baseline_marginal"], q["method_marginal"], q["gain"]) == (70.0, 80.0, 10.0)
    assert (p["baseline_marginal"], p["method_marginal"], p["gain"]) == (65.0, 75.0, 10.0)
    qb, pb = rows[("B", "top20", "question")], rows[("B", "top20", "passage")]
    # B: DCSR y row (30 + 70) / 2 = 50 vs DPR (20 + 60) / 2 = 40; column (55 + 70) / 2 = 62.5 vs (50 + 60) / 2 = 55
    assert (qb["gain"], pb["gain"]) == (10.0, 7.5)
    write_family_comparison(read_pair_matrix(matrix_csv), spec, tmp_path / "c.csv", tmp_path / "c.md")
    md = (tmp_path / "c.md").read_text()
    assert "| B | top20 | 40.0 | 50.0 | +10.0 | 55.0 | 62.5 | +7.5 | +10.0 | question side |" in md


def test_a_missing_pair_stops_the_report(tmp_path, spec):
    path = tmp_path / "one.json"
    path.write_text(json.dumps({"top20": 1.0, "top100": 2.0}))
    write_pair_matrix([("a", "a", "A", path)], tmp_path / "pm.csv")
    with pytest.raises(InputError, match="no metrics"):
        marginal_rows(read_pair_matrix(tmp_path / "pm.csv"), spec, "DPR")


def test_coverage_table_and_figure(repo, tmp_path):
    s = lambda cov, ov, q: {"coverage": cov, "overlapping": int(ov * cov), "overlap": ov,  # noqa: E731
                            "unique": cov * (1 - ov) ** 1.3, "questions": q, "min_questions": 2, "alpha": 1.3}
    stats = [("A", 1.0, s(100, 0.5, 300)), ("A", 0.5, s(60, 0.25, 150)), ("B", 1.0, s(40, 0.1, 50))]
    write_coverage(stats, {"A": "SQuAD", "B": None}, repo / "config" / "paper_numbers.yaml", tmp_path / "t3.csv",
                   tmp_path / "t3.md", tmp_path / "f4.png", tmp_path / "f4.csv")
    rows = {(r["dataset"], float(r["fraction"])): r for r in csv.DictReader(open(tmp_path / "t3.csv"))}
    assert float(rows[("A", 0.5)]["coverage_normalized"]) == 60.0
    assert float(rows[("A", 0.5)]["unique_normalized"]) == pytest.approx(100 * (60 * 0.75 ** 1.3) / (100 * 0.5 ** 1.3),
                                                                          abs=1e-3)
    md = (tmp_path / "t3.md").read_text()
    assert "| SQuAD (paper) | – | 3,247 | 0.68 | 738 |" in md and "| A (ours) | 300 | 100 | 0.50 | 41 |" in md
    # the paper's coverage is not DCSR Table 1's count of the same files (8,482 + 6,065 + 5,013 + 6,754),
    # while its overlap is that count's share with 2 or more questions
    assert "(the sum of its buckets: SQuAD 26,314 against 3,247 here)" in md
    assert "with 2 or more questions (0.68 against 0.68)" in md
    fig = list(csv.DictReader(open(tmp_path / "f4.csv")))
    assert {r["dataset"] for r in fig} == {"A"}  # B has no sweep
    assert (tmp_path / "f4.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(InputError, match="no 100% entry for C"):
        write_coverage(stats + [("C", 0.5, s(1, 0, 1))], {}, repo / "config" / "paper_numbers.yaml",
                       tmp_path / "x.csv", tmp_path / "x.md", tmp_path / "x.png", tmp_path / "xf.csv")
    assert not (tmp_path / "x.csv").exists()


# --------------------------------------------------------------------------- sweep names and config


def test_percent_labels():
    assert [percent_label(f) for f in (0.1, 0.25, 0.55, 0.125, 1.0)] == ["10", "25", "55", "12.5", "100"]
    assert [fraction_of(p) for p in ("10", "55", "12.5", "100")] == [0.1, 0.55, 0.125, 1.0]
    # every digit is kept: no two fractions share a name, and the name gives the fraction back
    assert percent_label(0.1000001) == "10.00001" != percent_label(0.1)
    for f in (0.1000001, 1 / 3, 1e-7, 0.4, 0.85):
        assert fraction_of(percent_label(f)) == f
    assert sweep_model_name("dpr-nq", 0.4) == "dpr-nq-40pct"
    for bad in (0, 1.5, True):
        with pytest.raises(InputError, match=rf"^fraction: must be in \(0, 1\], got {bad}$"):
            percent_label(bad)
    with pytest.raises(InputError, match=r"^percent: '0' is not in \(0, 100\]$"):
        fraction_of("0")
    with pytest.raises(InputError, match=r"^percent: 'x' is not a number$"):
        fraction_of("x")


def base_config():
    return {
        "corpora": {"c": {"generate": {"n_entities": 5}}},
        "datasets": {d: {"corpus": "c", "generated": d} for d in ("A", "B")},
        "encoders": {"e": "tiny"},
        "models": {"a": {"method": "dpr", "init": "e", "train_on": "A"},
                   "b": {"method": "dpr", "init": "e", "train_on": "B", "train": {"epochs": 3}}},
        "tables": {},
        "attribution": {"test_sets": ["A", "B"], "families": {"DPR": {"A": "a", "B": "b"}},
                        "sweep": {"family": "DPR", "datasets": ["B"], "fractions": [0.1, 0.5, 1.0]}},
    }


def test_sweep_models_copy_the_base_model_with_a_fraction():
    cfg = base_config()
    check_config(cfg)
    assert sweep_models(cfg) == {
        "b-10pct": {"method": "dpr", "init": "e", "train_on": "B", "train": {"epochs": 3}, "train_fraction": 0.1},
        "b-50pct": {"method": "dpr", "init": "e", "train_on": "B", "train": {"epochs": 3}, "train_fraction": 0.5},
    }


@pytest.mark.parametrize("mutate, key", [
    (lambda c: c["attribution"]["families"]["DPR"].update(A="b"), "attribution.families.DPR.A"),
    (lambda c: c["attribution"]["families"]["DPR"].update(A="nope"), "attribution.families.DPR.A"),
    (lambda c: c["models"]["b"].update(method="dcsr"), "attribution.families.DPR.B"),
    (lambda c: c["attribution"]["test_sets"].append("Z"), "attribution.test_sets.2"),
    (lambda c: c["attribution"]["sweep"].update(family="X"), "attribution.sweep.family"),
    (lambda c: c["attribution"]["sweep"].update(datasets=["C"]), "attribution.sweep.datasets.0"),
    (lambda c: c["attribution"].update(compare={"baseline": "DPR", "method": "DCSR"}), "attribution.compare.method"),
])
def test_attribution_config_errors_name_the_key(mutate, key):
    cfg = base_config()
    mutate(cfg)
    with pytest.raises(InputError, match=f"config: {key}"):
        check_config(cfg)


def test_a_sweep_name_taken_by_another_model_is_an_error():
    cfg = base_config()
    cfg["models"]["b-50pct"] = {"method": "dpr", "init": "e", "train_on": "A"}
    with pytest.raises(InputError, match="models.b-50pct"):
        sweep_models(cfg)


def test_table1_counts_each_split_and_puts_the_papers_numbers_beside(tmp_path, repo):
    import csv
    import json

    from dcsr.attribution.report import dataset_sizes, write_dataset_sizes

    record = {"question": "q", "answers": ["a"], "positive_ctxs": [{"title": "t", "text": "a"}]}
    (tmp_path / "train.json").write_text(json.dumps([record] * 3 + [{**record, "positive_ctxs": []}]))
    (tmp_path / "dev.json").write_text(json.dumps([record] * 2 + [{**record, "positive_ctxs": []}]))
    (tmp_path / "test.qa.csv").write_text('who?\t["a"]\nwhat?\t["b"]\n')
    sizes = dataset_sizes(tmp_path / "train.json", tmp_path / "dev.json", tmp_path / "test.qa.csv")
    # the paper's (DPR's) Train is "after filtering": a training record without a positive does not
    # count (training leaves it out); dev and test as published, every question
    assert sizes == {"train": 3, "dev": 3, "test": 2}
    write_dataset_sizes([("mine", "SQuAD", sizes), ("other", None, sizes)], repo / "config" / "paper_numbers.yaml",
                        tmp_path / "t1.csv", tmp_path / "t1.md")
    rows = {(r["row"], r["statistic"]): (r["ours"], r["paper"]) for r in csv.DictReader(open(tmp_path / "t1.csv"))}
    assert rows[("mine", "train")] == ("3", "70096") and rows[("other", "test")] == ("2", "")
    md = (tmp_path / "t1.md").read_text()
    assert "| mine (ours) | 3 | 3 | 2 |" in md and "| SQuAD (paper) | 70,096 | 8,886 | 10,570 |" in md


def test_a_regex_test_sets_never_found_patterns_are_noted_under_each_table(tmp_path, spec, repo):
    """Test set B's metrics count a pattern that does not compile (bad_patterns: never_found): the
    pair matrix carries the counts, and every Markdown table over B says so, as a retrieval table does."""
    cells = []
    for (q, p, t), v in TOP20.items():
        path = tmp_path / f"{q}-{p}-{t}.json"
        metrics = {"questions": 10, "match": "regex" if t == "B" else "string", "top20": v, "top100": v + 10}
        if t == "B":
            metrics["regex"] = {"bad_patterns": "never_found", "answers_never_found": 2, "questions_never_found": 1}
        path.write_text(json.dumps(metrics))
        cells.append((q, p, t, path))
    write_pair_matrix(cells, tmp_path / "pm.csv")
    rows = list(csv.DictReader(open(tmp_path / "pm.csv")))
    extra = {(r["test_set"], r["metric"], r["value"]) for r in rows if not r["metric"].startswith("top")}
    assert extra == {("B", "regex_answers_never_found", "2.0"), ("B", "regex_questions_never_found", "1.0"),
                     ("B", "questions", "10.0")}  # A, matched as strings, carries none
    m = read_pair_matrix(tmp_path / "pm.csv")
    note = ("- B: 2 answer pattern(s) do not compile after DPR's NFD normalization and are never found, as DPR's "
            "code scores them (`bad_patterns: never_found`; the scoring jobs' logs name them); 1 of its 10 questions "
            "have no other answer, so every run misses them.")
    paper = repo / "config" / "paper_numbers.yaml"
    write_tandem_table(m, spec, paper, tmp_path / "t2.csv", tmp_path / "t2.md")
    write_marginalization(m, spec, "DPR", tmp_path / "m.csv", tmp_path / "m.md", tmp_path / "m.png",
                          tmp_path / "h.png", tmp_path / "h.csv")
    write_best_fraction_table(m, spec, paper, tmp_path / "t4.csv", tmp_path / "t4.md")
    write_family_comparison(m, spec, tmp_path / "c.csv", tmp_path / "c.md")
    for md in ("t2.md", "m.md", "t4.md", "c.md"):
        text = (tmp_path / md).read_text()
        assert text.count(note) == 1 and text.count("do not compile") == 1, md


def test_the_papers_bm25_cells_that_look_swapped_are_noted_where_shown(matrix_csv, repo, tmp_path):
    """config/paper_numbers.yaml keeps the paper's print and notes the BM25 Trivia/WQ cells that
    look swapped: the note comes with a table that shows one of them, and not with one that shows none."""
    m = read_pair_matrix(matrix_csv)
    for names, noted in (({"A": "Trivia", "B": None}, True), ({"A": "SQuAD", "B": "NQ"}, False)):
        spec = AttributionSpec.from_dict({**SPEC, "paper_names": names})
        write_tandem_table(m, spec, repo / "config" / "paper_numbers.yaml", tmp_path / "t2.csv", tmp_path / "t2.md")
        md = (tmp_path / "t2.md").read_text()
        assert ("look swapped" in md and "TriviaQA 76.4/83.2 and WQ 62.4/75.5" in md) is noted, names
        trivia = {(r["row"], r["metric"]): r["paper"] for r in csv.DictReader(open(tmp_path / "t2.csv"))
                  if r["test_set"] == "A"}
        if noted:
            assert trivia[("BM25", "top20")] == "62.4"  # as printed
