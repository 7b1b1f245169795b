import csv
import math
import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.data.formats import write_biencoder
from dcsr.evaluation.stats import coverage_statistics, coverage_statistics_of, questions_per_gold_passage, write_table1

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


def test_an_empty_passage_id_is_no_id(tmp_path):
    # three passages with an empty id are three passages (by text), not one
    records = [rec(f"q{i}", ctx("T", f"text {i}", "")) for i in range(3)] + [rec("q3", ctx("T", "text 0", ""))]
    s = questions_per_gold_passage(write(tmp_path, "t.json", records))
    assert (s["1"], s["2"], s["passages"]) == (2, 1, 3)
    assert coverage_statistics(write(tmp_path, "c.json", records))["coverage"] == 3


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
    with pytest.raises(InputError, match=r"bad\.json:1 \(record 0\): positive_ctxs\[0\] has no string 'text'"):
        questions_per_gold_passage(path)
    path.write_text('[{"question": "q", "answers": ["a"], "positive_ctxs": [{"title": 7, "text": "a"}]}]')
    with pytest.raises(InputError, match=r"bad\.json:1 \(record 0\): positive_ctxs\[0\] has a 'title' that is not a "
                                         r"string: int"):
        questions_per_gold_passage(path)


def test_a_context_without_a_title_is_read_as_dpr_reads_it(tmp_path):
    """DPR's JsonQADataset gives a context without "title" the title None, and encodes its text
    alone: read here as the empty title, which tokenize_passages encodes the same way."""
    from dcsr.data.formats import read_biencoder

    path = tmp_path / "t.json"
    path.write_text('[{"question": "q", "answers": ["a"], "positive_ctxs": [{"text": "a b", "passage_id": "3"}], '
                    '"hard_negative_ctxs": [{"title": null, "text": "c"}]}]')
    (record,) = read_biencoder(path)
    assert record["positive_ctxs"] == [{"title": "", "text": "a b", "passage_id": "3"}]
    assert record["hard_negative_ctxs"] == [{"title": "", "text": "c"}]


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


# --------------------------------------------------------------------------- attribution paper, Table 3


def coverage_records():
    """Nine questions: gold passage A serves 3, B 2, C, D and E (no id: title and text) one each;
    q7 has A only as its second positive, q9 has no positive."""
    a, b, c, d = ctx("A", "alpha", "1"), ctx("B", "beta", "2"), ctx("C", "gamma", "3"), ctx("D", "delta", "4")
    e = ctx("E", "epsilon")
    return [rec("q1", a), rec("q2", a), rec("q3", a), rec("q4", b), rec("q5", b), rec("q6", c), rec("q7", d, a),
            rec("q8", e), rec("q9")]


def test_coverage_overlap_and_unique_by_hand(tmp_path):
    s = coverage_statistics(write(tmp_path, "t.json", coverage_records()))
    # default: passages shared by two or more questions overlap: A and B, 2 of 5 passages
    assert (s["coverage"], s["overlapping"], s["questions"], s["without_positive"]) == (5, 2, 8, 1)
    assert s["overlap"] == 0.4
    assert s["unique"] == pytest.approx(5 * 0.6 ** 1.3) and s["unique"] == pytest.approx(2.5738, abs=1e-4)
    assert (s["min_questions"], s["alpha"]) == (2, 1.3)


def test_overlap_min_questions_and_alpha(tmp_path):
    path = write(tmp_path, "t.json", coverage_records())
    more_than_two = coverage_statistics(path, min_questions=3)  # the paper's wording: A only
    assert (more_than_two["overlapping"], more_than_two["overlap"]) == (1, 0.2)
    assert more_than_two["unique"] == pytest.approx(5 * 0.8 ** 1.3)
    assert more_than_two["unique"] == pytest.approx(3.7410, abs=1e-4)
    everyone = coverage_statistics(path, min_questions=1)
    assert (everyone["overlapping"], everyone["overlap"], everyone["unique"]) == (5, 1.0, 0.0)
    assert coverage_statistics(path, min_questions=4)["overlapping"] == 0
    assert coverage_statistics(path, alpha=1)["unique"] == pytest.approx(3.0)
    assert coverage_statistics(path, alpha=2)["unique"] == pytest.approx(1.8)


def test_coverage_of_records_equals_the_streamed_file(tmp_path):
    path = write(tmp_path, "t.json", coverage_records())
    # the in-memory records (not read back through iter_biencoder, which coverage_statistics uses)
    in_memory = coverage_statistics_of(coverage_records(), 1.7, 3)
    assert in_memory == coverage_statistics(path, alpha=1.7, min_questions=3)
    # by hand, alpha 1.7 and min_questions 3: only A (q1-q3) overlaps, 1 of 5 passages
    assert in_memory == {"coverage": 5, "overlapping": 1, "overlap": 0.2, "unique": pytest.approx(5 * 0.8 ** 1.7),
                         "questions": 8, "without_positive": 1, "min_questions": 3, "alpha": 1.7}


def test_no_positives_no_coverage(tmp_path):
    s = coverage_statistics(write(tmp_path, "t.json", [rec("q1"), rec("q2")]))
    assert (s["coverage"], s["overlapping"], s["questions"], s["without_positive"]) == (0, 0, 0, 2)
    assert math.isnan(s["overlap"]) and math.isnan(s["unique"])


def test_papers_squad_row_follows_the_formula():
    # SQuAD in Table 3: coverage 3,247, overlap 0.68, unique 738 (alpha 1.3): 2,208 of 3,247
    # passages shared by 2 questions each, the rest by one
    records = [{"positive_ctxs": [ctx("P", f"p{i}", str(i))]} for i in range(3247)
               for _ in range(2 if i < 2208 else 1)]
    s = coverage_statistics_of(records)
    assert (s["coverage"], round(s["overlap"], 2), int(s["unique"])) == (3247, 0.68, 738)
    assert coverage_statistics_of(records, min_questions=3)["overlapping"] == 0


def test_dcsr_table1_shares_give_table3_overlaps():
    # the DCSR paper's Table 1 (questions per gold passage: 1, 2, 3, >=4) of the same training
    # sets: the share of passages with >= 2 questions is Table 3's printed overlap
    for counts, printed in (((8482, 6065, 5013, 6754), 0.68), ((43401, 5308, 1206, 587), 0.14),
                            ((32158, 4971, 1670, 1871), 0.21)):
        records = [{"positive_ctxs": [ctx("P", f"{n}-{i}", f"{n}-{i}")]} for n, c in enumerate(counts, 1)
                   for i in range(c) for _ in range(n)]
        assert round(coverage_statistics_of(records)["overlap"], 2) == printed


@pytest.mark.parametrize("kwargs, message", [({"min_questions": 0}, "min_questions"), ({"min_questions": 1.5}, "min_questions"),
                                             ({"alpha": 0}, "alpha"), ({"alpha": float("nan")}, "alpha")])
def test_bad_parameters(kwargs, message):
    with pytest.raises(InputError, match=message):
        coverage_statistics_of(coverage_records(), **kwargs)


# --------------------------------------------------------------------------- DCSR Appendix B


def qa(q, answers, *positives):
    return {"question": q, "answers": answers, "positive_ctxs": list(positives)}


def appendix_b_example(tmp_path):
    """Train positives: Paris (1), Rome (2), Oslo (3). Dev, by hand:
    q1: its positive (Paris, id 9) has the answer; title in train, passage not.
    q2: first positive (Rome, 2) has no answer; the first answer-bearing one (Bern, 4) is
        neither in train, but the next (Oslo, 3) is both.
    q3: no positive contains its answer: not counted.
    -> questions 2; first: title 1, passage 0; any: title 2, passage 1."""
    train = write(tmp_path, "train.json", [
        qa("t1", ["a"], ctx("Paris", "a", "1")),
        qa("t2", ["b"], ctx("Rome", "b", "2"), ctx("Oslo", "b c", "3")),
    ])
    dev = write(tmp_path, "dev.json", [
        qa("q1", ["x"], ctx("Paris", "text with x", "9")),
        qa("q2", ["y"], ctx("Rome", "nothing", "2"), ctx("Bern", "y here", "4"), ctx("Oslo", "y too", "3")),
        qa("q3", ["z"], ctx("Rome", "no answer", "2")),
    ])
    return train, dev


def test_appendix_b_counts_by_hand(tmp_path):
    from dcsr.evaluation.stats import dev_positives_in_train

    s = dev_positives_in_train(*appendix_b_example(tmp_path))
    assert s["dev_questions"] == 3 and s["questions"] == 2
    assert (s["title_shared"], s["passage_shared"]) == (1, 0)
    assert (s["title_shared_any"], s["passage_shared_any"]) == (2, 1)
    assert s["title_shared_pct"] == 50.0 and s["passage_shared_pct"] == 0.0
    assert s["title_shared_any_pct"] == 100.0 and s["passage_shared_any_pct"] == 50.0


def test_appendix_b_regex_match_type(tmp_path):
    from dcsr.evaluation.stats import dev_positives_in_train

    train = write(tmp_path, "train.json", [qa("t", ["a"], ctx("Paris", "a", "1"))])
    dev = write(tmp_path, "dev.json", [qa("q", ["x+y"], ctx("Paris", "xxxy", "1"))])
    assert dev_positives_in_train(train, dev, "string")["questions"] == 0
    assert dev_positives_in_train(train, dev, "regex")["passage_shared"] == 1


def test_appendix_b_table_has_the_paper_numbers_beside_ours(tmp_path, repo):
    from dcsr.evaluation.stats import dev_positives_in_train, write_appendix_b

    s = dev_positives_in_train(*appendix_b_example(tmp_path))
    csv_path, md_path = tmp_path / "b.csv", tmp_path / "b.md"
    write_appendix_b([("squad", "SQuAD", s), ("demo", None, s)], repo / "config" / "paper_numbers.yaml", csv_path, md_path)
    rows = {(r["row"], r["statistic"]): r for r in csv.DictReader(open(csv_path))}
    assert rows[("squad", "questions")]["ours"] == "2" and rows[("squad", "questions")]["paper"] == "7921"
    assert rows[("squad", "passage_shared_pct")]["paper"] == "88.03"
    assert rows[("demo", "questions")]["paper"] == "" and rows[("squad", "title_shared_any")]["paper"] == ""
    md = md_path.read_text()
    assert "| squad (ours) | 2 | 1 (50.00%) | 0 (0.00%) | 2 (100.00%) | 1 (50.00%) |" in md
    assert "| SQuAD (paper) | 7,921 | 7,624 (96.25%) | 6,973 (88.03%) | – | – |" in md
