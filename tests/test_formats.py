import gzip
import json

import pytest

from dcsr.errors import InputError
from dcsr.data.formats import (QA, Passage, iter_biencoder, iter_json_array, iter_passages, iter_qas, write_biencoder,
                          write_corpus, write_qas)


def test_corpus_round_trip_with_quotes_and_gzip(tmp_path):
    ps = [Passage(1, 'He said "hi"\tand left', "A \"T\""), Passage(2, "second", "B")]
    path = tmp_path / "psgs_w100.tsv"
    write_corpus(path, ps)
    assert list(iter_passages(path)) == ps
    gz = tmp_path / "psgs_w100.tsv.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert list(iter_passages(gz)) == ps


@pytest.mark.parametrize(
    "content, line, fragment",
    [
        ("id\ttext\ttitle\n1\tfine\tT\n2\tno title\n", 3, "expected 3 tab-separated fields"),
        ("id\ttext\ttitle\n1\tfine\tT\nx\ttext\tT\n", 3, "not an integer"),
        ("id\ttext\ttitle\n1\tfine\tT\n2\t  \tT\n", 3, "empty text"),
        ("pid\ttext\ttitle\n1\tfine\tT\n", 1, "header"),
    ],
)
def test_corpus_errors_name_file_and_line(tmp_path, content, line, fragment):
    path = tmp_path / "c.tsv"
    path.write_text(content)
    with pytest.raises(InputError) as e:
        list(iter_passages(path))
    assert f"{path}:{line}" in str(e.value)
    assert fragment in str(e.value)


def _record(q="q?", **kw):
    rec = {"question": q, "answers": ["a"], "positive_ctxs": [{"title": "t", "text": "a b", "passage_id": "7"}],
           "negative_ctxs": [], "hard_negative_ctxs": []}
    rec.update(kw)
    return rec


def test_biencoder_round_trip_and_psg_id_alias(tmp_path):
    path = tmp_path / "train.json"
    recs = [_record("one"), _record("two")]
    recs[1]["positive_ctxs"] = [{"title": "t", "text": "x", "psg_id": 9}]
    write_biencoder(path, recs)
    got = list(iter_biencoder(path))
    assert [r["question"] for r in got] == ["one", "two"]
    assert got[1]["positive_ctxs"][0]["passage_id"] == "9"


def test_biencoder_missing_answers_names_line(tmp_path):
    path = tmp_path / "train.json"
    bad = _record("second")
    del bad["answers"]
    path.write_text(json.dumps([_record("first"), bad], indent=2))
    with pytest.raises(InputError) as e:
        list(iter_biencoder(path))
    msg = str(e.value)
    # the second record starts on the line after the first one's closing brace
    first_len = len(json.dumps(_record("first"), indent=2).splitlines())
    assert f"{path}:{first_len + 2}" in msg and "record 1" in msg and "'answers'" in msg


def test_json_stream_small_chunks_and_malformed(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('[\n {"a": 1},\n {"a": "x\\ny"},\n {"a": [1, 2]}\n]\n')
    assert [(l, o) for l, o in iter_json_array(path, chunk_size=3)] == [(2, {"a": 1}), (3, {"a": "x\ny"}), (4, {"a": [1, 2]})]
    path.write_text('[\n {"a": 1},\n {"a": oops}\n]\n')
    with pytest.raises(InputError, match=r"a.json:3"):
        list(iter_json_array(path))


def test_qas_round_trip_and_errors(tmp_path):
    path = tmp_path / "test.qa.csv"
    write_qas(path, [QA("who?", ["Ann", "Ann B."]), QA('say "x"', ["it's"])])
    assert list(iter_qas(path)) == [QA("who?", ["Ann", "Ann B."]), QA('say "x"', ["it's"])]
    path.write_text("ok?\t['a']\nbad?\t[unclosed\n")
    with pytest.raises(InputError, match=r"test.qa.csv:2"):
        list(iter_qas(path))


def test_atomic_writer_leaves_nothing_on_failure(tmp_path):
    path = tmp_path / "out" / "psgs_w100.tsv"

    def boom():
        yield Passage(1, "x", "t")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="^disk on fire$"):  # the generator's own error, passed on unchanged
        write_corpus(path, boom())
    assert list(path.parent.iterdir()) == []
