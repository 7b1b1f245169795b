import gzip
import json
import re

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


def test_dpr_quoting_reads_as_before(tmp_path):
    """psgs_w100.tsv csv-quotes a text holding '"' and doubles the quotes inside; such fields,
    and quoted tabs, read as DPR reads them (only a field running over a line break is refused)."""
    path = tmp_path / "psgs_w100.tsv"
    path.write_text('id\ttext\ttitle\n1\t"Aaron Aaron ( or ; ""Ahärôn"") is a prophet"\tAaron\n'
                    '2\t"a\ttab"\t"""Quoted"" title"\n3\tsaid "hi" here\tT\n', encoding="utf-8")
    assert list(iter_passages(path)) == [Passage(1, 'Aaron Aaron ( or ; "Ahärôn") is a prophet', "Aaron"),
                                         Passage(2, "a\ttab", '"Quoted" title'), Passage(3, 'said "hi" here', "T")]


def test_writers_put_one_record_on_each_line(tmp_path):
    """A line break inside a text is written as a space (the readers refuse a record over two
    lines), so what the writers write reads back."""
    write_corpus(tmp_path / "c.tsv", [Passage(1, "first line\nsecond\r\nthird", 'a "t"\rx')])
    assert (tmp_path / "c.tsv").read_text().count("\n") == 2
    assert list(iter_passages(tmp_path / "c.tsv")) == [Passage(1, "first line second third", 'a "t" x')]
    write_qas(tmp_path / "q.csv", [QA('who "wrote"\nit?', ["line\nbreak"])])
    assert list(iter_qas(tmp_path / "q.csv")) == [QA('who "wrote" it?', ["line\nbreak"])]  # answers are literals


@pytest.mark.parametrize("pid, message", [
    ("-7", "passage id -7 is negative; passage ids must be 0 or more (FAISS marks a missing hit with -1)"),
    (" 7", "passage id ' 7' is not an integer"),
    ("\u0663", "passage id '\u0663' is not an integer"),  # an Arabic-Indic 3, which int() reads as 3
    ("+7", "passage id '+7' is not an integer"),
    (str(1 << 63), f"passage id {1 << 63} does not fit in 64 bits"),
])
def test_passage_ids_are_plain_digits_from_0_to_int64(tmp_path, pid, message):
    path = tmp_path / "c.tsv"
    path.write_text(f"id\ttext\ttitle\n0\tfine\tT\n{pid}\ttext\tT\n", encoding="utf-8")
    with pytest.raises(InputError, match="^" + re.escape(f"{path}:3: {message}")):
        list(iter_passages(path))
    path.write_text(f"id\ttext\ttitle\n0\tfine\tT\n007\ttext\tT\n{(1 << 63) - 1}\tbig\tT\n", encoding="utf-8")
    assert [p.id for p in iter_passages(path)] == [0, 7, (1 << 63) - 1]


def test_an_unbalanced_quote_names_the_line_it_opens_on(tmp_path):
    path = tmp_path / "c.tsv"
    path.write_text('id\ttext\ttitle\n1\tok\tT\n2\tok\t"T\n3\tok\tT\n4\tok\tT\n', encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"{path}:3: a field that opens with '\"' runs on over a line "
                                                   "break (to line 5)")):
        list(iter_passages(path))
    path = tmp_path / "q.csv"
    path.write_text("q1?\t['a']\n\n\"q3?\t['c']\n", encoding="utf-8")  # a blank line before it still counts
    with pytest.raises(InputError, match=re.escape(f"{path}:3: a field that opens with '\"' runs on over a line "
                                                   "break (to the end of the file), joining lines into one question")):
        list(iter_qas(path))


@pytest.mark.parametrize("answer", ["", "   ", "\u200b", "\t\u00a0"])
def test_an_answer_without_a_word_is_refused_everywhere(tmp_path, answer):
    """An answer that DrQA's tokenizer finds no token in matches every passage (as DPR)."""
    from dcsr.data.answers import has_answer, tokens

    assert tokens(answer) == [] and has_answer([answer], "any passage at all")
    qas = tmp_path / "q.csv"
    write_qas(qas, [QA("ok?", ["x"]), QA("who?", ["Ann", answer])])
    with pytest.raises(InputError, match="^" + re.escape(f"{qas}:2: answer 1 ({answer!r}) is empty, and an empty "
                                                         "answer matches every passage")):
        list(iter_qas(qas))
    train = tmp_path / "t.json"
    write_biencoder(train, [_record("one"), _record("two", answers=[answer])])
    with pytest.raises(InputError, match=r"t.json:\d+ \(record 1\): answer 0 .* is empty"):
        list(iter_biencoder(train))
    for fine in (".", "a", "\u00e9", "-"):  # one token is enough
        assert tokens(fine)


def test_a_byte_order_mark_is_skipped(tmp_path):
    """Editors on Windows start a UTF-8 file with a BOM; it would spoil the corpus header, the
    first question and a JSON file's '['."""
    bom = "\ufeff"
    (tmp_path / "c.tsv").write_text(bom + "id\ttext\ttitle\n1\tsome text\tT\n", encoding="utf-8")
    assert list(iter_passages(tmp_path / "c.tsv")) == [Passage(1, "some text", "T")]
    (tmp_path / "q.csv").write_text(bom + "who?\t['Ann']\n", encoding="utf-8")
    assert list(iter_qas(tmp_path / "q.csv")) == [QA("who?", ["Ann"])]
    (tmp_path / "t.json").write_text(bom + json.dumps([_record("one")]), encoding="utf-8")
    assert [r["question"] for r in iter_biencoder(tmp_path / "t.json")] == ["one"]


@pytest.mark.parametrize("rows, line, fragment", [
    ("7\t0\t0\t4\n7\t2\t5\t9\n", 3, "sentence 2 of passage 7, expected 1"),  # a row lost
    ("7\t0\t0\t4\n8\t0\t0\t3\n7\t1\t5\t9\n", 4, "sentence 1 of passage 7, expected 0"),  # rows apart
    ("7\t0\t0\t4\n7\t1\t3\t9\n", 3, "sentence span 3..9 of passage 7 is empty or overlaps"),
    ("7\t0\t4\t4\n", 2, "sentence span 4..4 of passage 7 is empty"),
    ("7\t0\t-1\t4\n", 2, "sentence span -1..4"),
])
def test_a_damaged_sentence_table_names_the_line(tmp_path, rows, line, fragment):
    from dcsr.data.formats import sentence_spans

    path = tmp_path / "sentences.tsv"
    path.write_text("passage_id\tsentence\tstart\tend\n" + rows, encoding="utf-8")
    with pytest.raises(InputError, match="^" + re.escape(f"{path}:{line}: {fragment}")):
        sentence_spans(path)
    path.write_text("passage_id\tsentence\tstart\tend\n7\t0\t0\t4\n7\t1\t5\t9\n8\t0\t0\t3\n", encoding="utf-8")
    assert sentence_spans(path) == {7: [(0, 4), (5, 9)], 8: [(0, 3)]}
