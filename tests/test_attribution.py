import json
import math

import numpy as np
import pytest

from dcsr.attribution.analysis import (PairMatrix, count_records, iter_sample, load_pair_matrix,
                              marginalize_passage, marginalize_question, missing_pairs, nested_samples,
                              relative_to_tandem, sample_size, write_sample)
from dcsr.errors import InputError
from dcsr.data.formats import read_biencoder, write_biencoder
from dcsr.evaluation.stats import coverage_statistics_of

ENCODERS = ("a", "b", "c")
# top20 of question encoder (row) x passage encoder (column) on two test sets; the in-domain
# DPRs are (a, a) for test set A and (b, b) for test set B; c is a third dataset's encoders.
TOP20 = {
    "A": {"a": {"a": 80, "b": 60, "c": 40},
          "b": {"a": 50, "b": 40, "c": 45},
          "c": {"a": 35, "b": 55, "c": 30}},
    "B": {"a": {"a": 30, "b": 50, "c": 40},
          "b": {"a": 20, "b": 60, "c": 70},
          "c": {"a": 10, "b": 90, "c": 20}},
}


def write_metrics(tmp_path, skip=()):
    entries = []
    for t, rows in TOP20.items():
        for q, cols in rows.items():
            for p, v in cols.items():
                if (q, p, t) in skip:
                    continue
                path = tmp_path / f"{q}-{p}-{t}.json"
                # as dcsr.evaluation.metrics writes them: a count and a match type beside the scores
                path.write_text(json.dumps({"questions": 100, "match": "string", "top1": v / 4, "top20": v,
                                            "top100": v + 10}))
                entries.append((q, p, t, path))
    return entries


@pytest.fixture
def matrix(tmp_path):
    return load_pair_matrix(write_metrics(tmp_path))


def test_loader_reads_every_cell_and_drops_non_scores(matrix, tmp_path):
    assert matrix.score("b", "c", "B", "top20") == 70.0
    assert matrix.score("c", "a", "A", "top100") == 45.0
    assert matrix.r["a"]["b"]["A"] == {"questions": 100.0, "top1": 15.0, "top20": 60.0, "top100": 70.0}
    assert matrix.sources[("a", "b", "A")] == str(tmp_path / "a-b-A.json")
    assert missing_pairs(matrix, ENCODERS, ENCODERS, ("A", "B")) == []


def test_eq7_marginal_is_the_mean_over_the_prior(matrix):
    prior = list(ENCODERS)
    # question encoder a on A: its row (80 + 60 + 40) / 3; passage encoder a: its column (80 + 50 + 35) / 3
    assert marginalize_question(matrix, "a", "A", "top20", prior) == pytest.approx(60.0)
    assert marginalize_passage(matrix, "a", "A", "top20", prior) == pytest.approx(55.0)
    # test set B: row b (20 + 60 + 70) / 3, column b (50 + 60 + 90) / 3
    assert marginalize_question(matrix, "b", "B", "top20", prior) == pytest.approx(50.0)
    assert marginalize_passage(matrix, "b", "B", "top20", prior) == pytest.approx(200 / 3)
    # another prior, another metric
    assert marginalize_question(matrix, "a", "A", "top20", ["a", "b"]) == pytest.approx(70.0)
    assert marginalize_passage(matrix, "c", "B", "top20", ["b", "c"]) == pytest.approx(45.0)
    assert marginalize_question(matrix, "a", "A", "top100", prior) == pytest.approx(70.0)


def test_relative_to_tandem_puts_the_in_domain_dpr_at_100(matrix):
    assert relative_to_tandem(matrix, 60.0, "a", "a", "A", "top20") == pytest.approx(75.0)  # 60 / 80
    assert relative_to_tandem(matrix, 200 / 3, "b", "b", "B", "top20") == pytest.approx(1000 / 9)  # 66.7 / 60
    assert relative_to_tandem(matrix, 80.0, "a", "a", "A", "top20") == 100.0


def test_a_missing_cell_is_listed_and_stops_the_marginal(tmp_path):
    matrix = load_pair_matrix(write_metrics(tmp_path, skip={("a", "c", "A"), ("c", "b", "B")}))
    assert missing_pairs(matrix, ENCODERS, ENCODERS, ("A", "B")) == [("a", "c", "A"), ("c", "b", "B")]
    with pytest.raises(InputError, match=r"question encoder 'a' on 'A'.*1 of 3 pairs.*passage encoder 'c'"):
        marginalize_question(matrix, "a", "A", "top20", ENCODERS)
    assert marginalize_question(matrix, "a", "A", "top20", ["a", "b"]) == pytest.approx(70.0)
    with pytest.raises(InputError, match="question encoder 'c' x passage encoder 'b' on test set 'B'"):
        marginalize_passage(matrix, "b", "B", "top20", ENCODERS)


def test_missing_metric_names_the_file(matrix):
    with pytest.raises(InputError, match=r"a-a-A\.json: no 'top5' score \(has questions, top1, top100, top20\)"):
        marginalize_question(matrix, "a", "A", "top5", ENCODERS)


def test_bad_priors(matrix):
    with pytest.raises(InputError, match="empty"):
        marginalize_question(matrix, "a", "A", "top20", [])
    with pytest.raises(InputError, match="'b' twice"):
        marginalize_passage(matrix, "a", "A", "top20", ["a", "b", "b"])


def test_bad_metric_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"top20": 50.0,\n "top100": }')
    with pytest.raises(InputError, match=r"bad\.json:2: malformed JSON"):
        load_pair_matrix([("a", "a", "A", bad)])
    bad.write_text('{"top20": "n/a"}')
    with pytest.raises(InputError, match=r"bad\.json: 'top20' is 'n/a'"):
        load_pair_matrix([("a", "a", "A", bad)])
    bad.write_text("[50.0]")
    with pytest.raises(InputError, match="JSON object"):
        load_pair_matrix([("a", "a", "A", bad)])
    with pytest.raises(InputError, match="not found"):
        load_pair_matrix([("a", "a", "A", tmp_path / "nope.json")])
    (tmp_path / "one.json").write_text('{"top20": 50.0}')
    (tmp_path / "two.json").write_text('{"top20": 1.0}')
    with pytest.raises(InputError, match=r"two\.json: .*'a' on test set 'A' is already given by .*one\.json"):
        load_pair_matrix([("a", "a", "A", tmp_path / "one.json"), ("a", "a", "A", tmp_path / "two.json")])


def test_score_of_a_missing_cell_names_it():
    with pytest.raises(InputError, match="question encoder 'a' x passage encoder 'b' on test set 'A': no metrics"):
        PairMatrix().score("a", "b", "A", "top20")


def test_zero_tandem_is_an_error():
    m = PairMatrix()
    m.add("a", "a", "A", {"top20": 0.0}, source="zero.json")
    with pytest.raises(InputError, match="zero.json: tandem top20 is 0"):
        relative_to_tandem(m, 10.0, "a", "a", "A", "top20")


# --------------------------------------------------------------------------- nested samples

FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0)


def test_nested_samples_are_nested_and_sized():
    s = nested_samples(20, FRACTIONS, seed=13)
    assert list(s) == list(FRACTIONS)
    assert [len(s[f]) for f in FRACTIONS] == [2, 5, 8, 11, 14, 17, 20]
    for small, large in zip(FRACTIONS, FRACTIONS[1:]):
        assert set(s[small]) < set(s[large])
    assert s[1.0].tolist() == list(range(20))
    for idx in s.values():
        assert idx.dtype == np.int64 and idx.tolist() == sorted(set(idx.tolist()))


def test_nested_samples_follow_the_seed():
    one, again, other = (nested_samples(1000, FRACTIONS, seed) for seed in (1, 1, 2))
    for f in FRACTIONS:
        assert one[f].tolist() == again[f].tolist()
    assert all(one[f].tolist() != other[f].tolist() for f in FRACTIONS[:-1])
    # a sample does not depend on which other fractions are asked for
    assert nested_samples(1000, [0.4], seed=1)[0.4].tolist() == one[0.4].tolist()


def test_sample_sizes_round_halves_up_and_are_at_least_one():
    assert sample_size(10, 0.25) == 3  # 2.5
    assert sample_size(10, 0.15) == 2  # 1.5, although 0.15 * 10 == 1.4999... in binary
    assert sample_size(10, 0.14) == 1
    assert sample_size(1000, 0.001) == 1 and sample_size(10, 0.01) == 1
    assert [len(v) for v in nested_samples(1, (0.1, 1.0), seed=0).values()] == [1, 1]


@pytest.mark.parametrize("fractions", [(0.0,), (1.5,), (-0.1,), (float("nan"),), ("0.5",)])
def test_fractions_must_be_in_0_1(fractions):
    with pytest.raises(InputError, match=r"fractions.*\(0, 1\]"):
        nested_samples(10, fractions, seed=0)


def test_no_records_no_samples():
    with pytest.raises(InputError, match="n_records"):
        nested_samples(0, (0.5,), seed=0)


# --------------------------------------------------------------------------- writing a sample


def rec(i, positive=True):
    ctxs = [{"title": f"T{i % 3}", "text": f"text {i % 3}", "passage_id": str(i % 3)}] if positive else []
    return {"question": f"q{i}", "answers": [f"a{i}"], "positive_ctxs": ctxs, "negative_ctxs": [],
            "hard_negative_ctxs": []}


@pytest.fixture
def train(tmp_path):
    path = tmp_path / "train.json"
    write_biencoder(path, [rec(i, positive=i != 2) for i in range(6)])
    return path


def test_write_sample_keeps_the_chosen_records_in_file_order(train, tmp_path):
    out = tmp_path / "out" / "sample.json"
    assert write_sample(train, out, np.array([4, 0, 2])) == 3
    got = read_biencoder(out, require_positive=False)
    assert [r["question"] for r in got] == ["q0", "q2", "q4"]
    assert got == [rec(0), rec(2, positive=False), rec(4)]
    assert count_records(train) == 6


def test_write_sample_of_nested_samples(train, tmp_path):
    samples = nested_samples(count_records(train), (0.5, 1.0), seed=3)
    write_sample(train, tmp_path / "half.json", samples[0.5])
    write_sample(train, tmp_path / "all.json", samples[1.0])
    half = [r["question"] for r in read_biencoder(tmp_path / "half.json", require_positive=False)]
    assert half == [f"q{i}" for i in samples[0.5]] and len(half) == 3
    everything = read_biencoder(tmp_path / "all.json", require_positive=False)
    assert everything == read_biencoder(train, require_positive=False)


@pytest.mark.parametrize("indices, message", [([1, 6], "has 6 records, but record 6"), ([-1], "non-negative"),
                                               ([1, 1], "chosen twice"), ([1.5], "integers")])
def test_write_sample_bad_indices_leave_no_file(train, tmp_path, indices, message):
    out = tmp_path / "sample.json"
    with pytest.raises(InputError, match=message):
        write_sample(train, out, indices)
    assert list(tmp_path.iterdir()) == [train]


def test_write_sample_bad_record_leaves_the_old_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([rec(0), rec(1)])[:-1] + ', {"question": "q2", "answers": "a"}]')
    out = tmp_path / "sample.json"
    out.write_text("old")
    with pytest.raises(InputError, match=r"bad\.json:1 \(record 2\): 'answers' must be a list"):
        write_sample(bad, out, [0])
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "sample.json"]


def test_coverage_of_a_sample_without_writing_it(train):
    # records 0, 3 share passage 0; record 1 has passage 1; record 2 has no positive
    s = coverage_statistics_of(iter_sample(train, [0, 1, 2, 3]))
    assert (s["coverage"], s["overlapping"], s["questions"], s["without_positive"]) == (2, 1, 3, 1)
    assert s["overlap"] == 0.5 and math.isclose(s["unique"], 2 * 0.5 ** 1.3)
