import csv
import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.formats import write_biencoder
from dcsr.stats import questions_per_gold_passage, write_table1

PAPER_YAML = """
dcsr_table1:
  source: "DCSR paper, Table 1"
  rows:
    NQ: {"1": 32158, "2": 4971, "3": 1670, ">=4": 1871, avg: 1.45}
"""


def ctx(title, text, pid=None):
    c = {"title": title, "text": text}
    if pid is not None:
        c["passage_id"] = pid
    return c


def rec(q, *positives, key="positive_ctxs"):
    return {"question": q, "answers": ["a"], key: list(positives)}


def write(tmp_path, name, records):
    path = tmp_path / name
    write_biencoder(path, records)
    return path


def test_five_questions_over_three_passages_3_1_1(tmp_path):
    a, b, c = ctx("A", "alpha", "1"), ctx("B", "beta", "2"), ctx("C", "gamma", "3")
    path = write(tmp_path, "t.json", [rec("q1", a), rec("q2", b), rec("q3", a), rec("q4", c), rec("q5", a)])
    s = questions_per_gold_passage(path)
    assert {k: s[k] for k in ("1", "2", "3", ">=4", "questions", "passages")} == \
        {"1": 2, "2": 0, "3": 1, ">=4": 0, "questions": 5, "passages": 3}
    assert s["avg"] == 5 / 3  # unrounded


def test_four_or_more_bucket_and_only_first_positive_counts(tmp_path):
    a, b = ctx("A", "alpha", "1"), ctx("B", "beta", "2")
    records = [rec(f"a{i}", a, ctx("O", f"other {i}", str(100 + i))) for i in range(6)] + \
        [rec(f"b{i}", b) for i in range(4)]
    s = questions_per_gold_passage(write(tmp_path, "t.json", records))
    # passages 100..105 are only second positives, so they are no gold passages
    assert (s["1"], s["2"], s["3"], s[">=4"], s["passages"], s["questions"]) == (0, 0, 0, 2, 2, 10)
    assert s["avg"] == 5.0


def test_passage_id_identifies_a_passage_over_its_text(tmp_path):
    records = [rec("q1", ctx("A", "alpha", "7")), rec("q2", ctx("A changed", "alpha edited", "7")),
               rec("q3", ctx("A", "alpha", "8"))]  # same text, other id: another passage
    s = questions_per_gold_passage(write(tmp_path, "t.json", records))
    assert (s["1"], s["2"], s["passages"]) == (1, 1, 2)


def test_without_ids_title_and_text_identify_a_passage(tmp_path):
    records = [rec("q1", ctx("A", "alpha")), rec("q2", ctx("A", "alpha")),
               rec("q3", ctx("B", "alpha")), rec("q4", ctx("A", "alpha beta"))]
    s = questions_per_gold_passage(write(tmp_path, "t.json", records))
    assert (s["1"], s["2"], s["passages"], s["avg"]) == (2, 1, 3, 4 / 3)


def test_psg_id_as_in_dpr_trivia_files_and_records_without_positive_skipped(tmp_path):
    records = [rec("q1", {"title": "A", "text": "x", "psg_id": 5}), rec("q2", {"title": "A2", "text": "y", "psg_id": 5}),
               rec("q3")]
    s = questions_per_gold_passage(write(tmp_path, "t.json", records))
    assert (s["2"], s["questions"], s["passages"], s["without_positive"]) == (1, 2, 1, 1)


def test_bad_record_names_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[{"question": "q", "answers": ["a"], "positive_ctxs": [{"title": "A"}]}]')
    with pytest.raises(InputError, match="bad.json"):
        questions_per_gold_passage(path)


def stats(n1, n2, n3, n4, q, p):
    return {"1": n1, "2": n2, "3": n3, ">=4": n4, "avg": q / p, "questions": q, "passages": p, "without_positive": 0}


def test_table1_shows_ours_and_the_papers_rows_labelled(tmp_path):
    (tmp_path / "paper.yaml").write_text(PAPER_YAML)
    rows = [("nq", "NQ", stats(2000, 10, 3, 1, 2035, 2014)), ("demo", None, stats(2, 0, 1, 0, 5, 3))]
    write_table1(rows, tmp_path / "paper.yaml", tmp_path / "t.csv", tmp_path / "t.md")
    md = (tmp_path / "t.md").read_text().splitlines()
    assert "| nq (ours) | 2,035 | 2,014 | 2,000 | 10 | 3 | 1 | 1.01 |" in md
    assert "| NQ (paper) | – | – | 32,158 | 4,971 | 1,670 | 1,871 | 1.45 |" in md
    assert "| demo (ours) | 5 | 3 | 2 | 0 | 1 | 0 | 1.67 |" in md
    assert not any(line.startswith("| demo (paper)") or line.startswith("| None") for line in md)
    assert md.index("| NQ (paper) | – | – | 32,158 | 4,971 | 1,670 | 1,871 | 1.45 |") == \
        md.index("| nq (ours) | 2,035 | 2,014 | 2,000 | 10 | 3 | 1 | 1.01 |") + 1

    rows_csv = list(csv.DictReader((tmp_path / "t.csv").open()))
    by = {(r["row"], r["statistic"]): r for r in rows_csv}
    assert by[("nq", "1")]["ours"] == "2000" and by[("nq", "1")]["paper"] == "32158"
    assert by[("nq", "1")]["paper_dataset"] == "NQ" and by[("nq", "1")]["paper_source"] == "DCSR paper, Table 1"
    assert float(by[("nq", "avg")]["ours"]) == 2035 / 2014 and by[("nq", "avg")]["paper"] == "1.45"
    assert by[("nq", "questions")]["paper"] == ""
    assert by[("demo", "avg")]["paper"] == "" and float(by[("demo", "avg")]["ours"]) == 5 / 3


def test_make_table1_script(repo, tmp_path):
    (tmp_path / "paper.yaml").write_text(PAPER_YAML)
    a = ctx("A", "alpha", "1")
    nq = write(tmp_path, "nq.json", [rec("q1", a), rec("q2", a), rec("q3", ctx("B", "b", "2"))])
    demo = write(tmp_path, "demo.json", [rec("q1", a)])
    cmd = [sys.executable, str(repo / "workflow/scripts/make_table1.py"), "--train", str(nq), "--label", "nq",
           "--paper-name", "NQ", "--train", str(demo), "--label", "demo", "--paper-name", "",
           "--paper", str(tmp_path / "paper.yaml"), "--csv", str(tmp_path / "t.csv"), "--md", str(tmp_path / "t.md")]
    subprocess.run(cmd, check=True, capture_output=True)
    md = (tmp_path / "t.md").read_text()
    assert "| nq (ours) | 3 | 2 | 1 | 1 | 0 | 0 | 1.50 |" in md and "| NQ (paper) |" in md
    assert "| demo (ours) | 1 | 1 | 1 | 0 | 0 | 0 | 1.00 |" in md

    bad = subprocess.run(cmd[:2] + ["--train", str(nq), "--paper", str(tmp_path / "paper.yaml"), "--csv",
                                    str(tmp_path / "u.csv"), "--md", str(tmp_path / "u.md")], capture_output=True, text=True)
    assert bad.returncode == 2 and "one --label" in bad.stderr and not (tmp_path / "u.md").exists()
