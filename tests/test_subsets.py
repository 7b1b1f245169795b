import gzip
import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.data.formats import Passage, iter_passages, write_corpus
from dcsr.data.subsets import iter_subset, sample_rows, write_corpus_subset


@pytest.fixture()
def corpus(tmp_path):
    """40 passages with ids 100, 103, 106, ... (not row numbers), gzipped as DPR ships them."""
    plain = tmp_path / "psgs.tsv"
    write_corpus(plain, [Passage(100 + 3 * i, f"text {i}", f"T{i}") for i in range(40)])
    gz = tmp_path / "psgs.tsv.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    return gz


def ids(path):
    return [p.id for p in iter_passages(path)]


def test_first_n_keeps_the_first_rows_in_order(corpus, tmp_path):
    out = tmp_path / "first.tsv"
    assert write_corpus_subset(corpus, out, first=7) == 7
    assert ids(out) == [100, 103, 106, 109, 112, 115, 118]
    assert [p.text for p in iter_passages(out)][-1] == "text 6"


def test_first_n_beyond_the_corpus_is_an_error_and_leaves_no_file(corpus, tmp_path):
    out = tmp_path / "first.tsv"
    with pytest.raises(InputError, match="fewer than the first 41"):
        write_corpus_subset(corpus, out, first=41)
    assert not out.exists()


def test_fraction_is_exact_size_deterministic_and_in_corpus_order(corpus, tmp_path):
    a, b, c = tmp_path / "a.tsv", tmp_path / "b.tsv", tmp_path / "c.tsv"
    assert write_corpus_subset(corpus, a, fraction=0.25, seed=13) == 10
    write_corpus_subset(corpus, b, fraction=0.25, seed=13)
    write_corpus_subset(corpus, c, fraction=0.25, seed=14)
    got = ids(a)
    assert got == ids(b) and got != ids(c)
    assert got == sorted(got) and len(set(got)) == 10
    assert set(got) <= {100 + 3 * i for i in range(40)}
    # not simply a prefix: the sample reaches past the first quarter
    assert max(got) > 100 + 3 * 10


def test_sample_size_rounds_half_up_and_is_at_least_one():
    assert sample_rows(21_015_324 // 1000, 0.05, 1).sum() == round(21_015 * 0.05)
    assert sample_rows(10, 0.15, 1).sum() == 2  # 1.5 rounds up
    assert sample_rows(10, 0.01, 1).sum() == 1
    assert sample_rows(10, 1.0, 1).all()


def test_a_subset_of_a_subset(corpus, tmp_path):
    half, quarter = tmp_path / "half.tsv", tmp_path / "quarter.tsv"
    write_corpus_subset(corpus, half, fraction=0.5, seed=1)
    write_corpus_subset(half, quarter, first=5)
    assert ids(quarter) == ids(half)[:5]


def test_exactly_one_of_first_and_fraction(corpus):
    with pytest.raises(InputError, match="exactly one"):
        list(iter_subset(corpus, first=3, fraction=0.5, seed=1))
    with pytest.raises(InputError, match="seed"):
        list(iter_subset(corpus, fraction=0.5))


def test_script_writes_the_subset(corpus, tmp_path, repo):
    out = tmp_path / "s.tsv"
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "subset_corpus.py"), "--corpus", str(corpus),
                        "--output", str(out), "--fraction", "0.1", "--seed", "13", "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(ids(out)) == 4
