"""Hostile and malformed fields in DPR's JSON and qas files, BEIR's JSONL and SQuAD's JSON: an
InputError naming the file and line, never a RecursionError, MemoryError or ValueError traceback
from Python's parsers; and a malformed training JSON is reported without reading the rest of it."""

import ast
import json

import pytest

from dcsr.data import formats
from dcsr.data.beir import convert_corpus
from dcsr.data.formats import iter_json_array, read_biencoder, read_qas, write_qas
from dcsr.data.squad import squad_to_dpr
from dcsr.errors import InputError

DEEP = 200_000  # far past the recursion limit
LONG = 5000  # past sys.get_int_max_str_digits() (4300)

NESTED = "arrays or objects nested too deeply to read"
LONG_NUMBER = "a number of more than 4300 digits, which Python refuses to read"


def record(pid: str = "1") -> str:
    return ('{"question": "capital of France?", "answers": ["Paris"],\n'
            ' "positive_ctxs": [{"title": "Paris", "text": "Paris is the capital.", "passage_id": ' + pid + "}]}")


# --------------------------------------------------------------------------- training JSON


def test_training_json_nested_too_deeply_is_an_input_error(tmp_path):
    path = tmp_path / "train.json"
    path.write_text("[\n" + record() + ",\n" + record("[" * DEEP + "]" * DEEP) + "\n]\n")
    with pytest.raises(InputError) as e:
        read_biencoder(path)
    assert str(e.value).startswith(f"{path}:4: the record that starts on this line holds {NESTED}")


def test_training_json_number_of_5000_digits_is_an_input_error(tmp_path):
    path = tmp_path / "train.json"
    path.write_text("[\n" + record() + ",\n" + record("7" * LONG) + "\n]\n")
    with pytest.raises(InputError) as e:
        read_biencoder(path)
    assert str(e.value) == (f"{path}:4: the record that starts on this line holds {LONG_NUMBER} "
                            "(no field of this format needs one): fix the number")


# --------------------------------------------------------------------------- BEIR, SQuAD


@pytest.mark.parametrize("value, problem", [("7" * LONG, LONG_NUMBER), ("[" * DEEP + "]" * DEEP, NESTED)])
def test_beir_corpus_with_a_hostile_value_is_an_input_error_and_writes_nothing(tmp_path, value, problem):
    folder = tmp_path / "beir"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "fine"}\n'
                                         '{"_id": "d2", "title": "", "text": "x", "n": ' + value + "}\n")
    out = tmp_path / "out"
    with pytest.raises(InputError) as e:
        convert_corpus(folder, out / "corpus.tsv", out / "ids.tsv")
    assert str(e.value).startswith(f"{folder / 'corpus.jsonl'}:2: the JSON object holds {problem}")
    assert not out.exists()


@pytest.mark.parametrize("value, problem", [("7" * LONG, LONG_NUMBER), ("[" * DEEP + "]" * DEEP, NESTED)])
def test_squad_json_with_a_hostile_value_is_an_input_error(tmp_path, value, problem):
    path = tmp_path / "squad.json"
    path.write_text('{"version": "1.1", "data": [' + value + "]}")
    with pytest.raises(InputError) as e:
        squad_to_dpr(path)
    assert str(e.value).startswith(f"{path}: the SQuAD JSON holds {problem}")


# --------------------------------------------------------------------------- qas answers


NOT_A_LIST = "are not a Python literal list; write them as ['answer', ...]"
NOT_STRINGS = "answers must be a list of strings, as ['answer', ...]"


@pytest.mark.parametrize("answers, message", [
    ("-" * LONG + "1", NOT_A_LIST),  # RecursionError in literal_eval
    ("-" * 10**6 + "1", NOT_A_LIST),  # MemoryError
    ("[" + "-" * LONG + "1]", NOT_STRINGS),
    ("[" + "~" * LONG + "1]", NOT_STRINGS),
    ("[" + "not " * LONG + "1]", NOT_STRINGS),
    ("[" + "1**" * LONG + "1]", NOT_STRINGS),  # MemoryError
    ("['a'" + "+'a'" * 100_000 + "]", NOT_A_LIST),
], ids=["minus", "minus-1e6", "list-minus", "list-invert", "list-not", "list-power", "list-plus"])
def test_question_file_with_hostile_answers_is_an_input_error(tmp_path, answers, message):
    path = tmp_path / "qa.csv"
    path.write_text(f"capital of France?\t['Paris']\ncapital of Germany?\t{answers}\n")
    with pytest.raises(InputError) as e:
        read_qas(path)
    assert str(e.value).startswith(f"{path}:2: ")
    assert str(e.value).endswith(message)


def test_answer_lists_read_exactly_as_python_literals(tmp_path):
    """Every way of writing a flat list of strings reads as ``ast.literal_eval`` reads it."""
    written = [["Paris", "l'Orient", 'say "hi"', "back\\slash", "tab\there", "é €😀", "#no comment", "[x], 'y'"],
               ["a"], ["a\x7f", "r'", '"""', "'''"]]
    by_hand = ["['Paris', \"l'Orient\"]", " [ 'a' , 'b' , ] ", "['a' 'b', \"c\" 'd']", "[u'a', r'\\d', U\"x\", R'\\'']",
               "['''tri'ple''', \"\"\"tri\"ple\"\"\"]", "['\\x41\\101\\u00e9\\N{BULLET}\\U0001F600']",
               "['a']  # a comment"]
    path = tmp_path / "qa.csv"
    with path.open("w", encoding="utf-8") as fh:
        for answers in by_hand:
            fh.write(f"q?\t{answers}\n")
    text = path.read_text(encoding="utf-8")
    write_qas(path, [formats.QA("q?", a) for a in written])
    path.write_text(text + path.read_text(encoding="utf-8"), encoding="utf-8")
    expected = [ast.literal_eval(a) for a in by_hand] + written
    assert [qa.answers for qa in read_qas(path)] == expected


# --------------------------------------------------------------------------- streaming


class CountingFile:
    """A text file that counts the characters and calls of ``read``."""

    def __init__(self, fh):
        self.fh, self.chars, self.reads = fh, 0, 0

    def read(self, n=-1):
        text = self.fh.read(n)
        self.chars += len(text)
        self.reads += 1
        return text

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.fh.close()


@pytest.fixture()
def opened(monkeypatch):
    """The files the JSON readers open, counting what is read from them."""
    files = []
    real = formats.open_text

    def counting(path, mode="r"):
        files.append(CountingFile(real(path, mode)))
        return files[-1]

    monkeypatch.setattr(formats, "open_text", counting)
    return files


def test_a_typo_in_the_first_record_is_reported_without_reading_on(tmp_path, opened):
    path = tmp_path / "train.json"
    rest = ",\n".join([record()] * 20_000)  # 2.5 MB: more than 2 chunks of 1 MiB
    path.write_text('[\n{"question": "q" "answers": ["a"]},\n' + rest + "\n]\n")
    with pytest.raises(InputError) as e:
        read_biencoder(path)
    assert str(e.value) == f"{path}:2: malformed JSON: Expecting ',' delimiter (column 18)"
    assert opened[0].chars <= 1 << 20  # the first chunk only, not the whole file


@pytest.mark.parametrize("chunk_size", [64, 1000])
def test_a_typo_is_reported_from_the_chunk_it_is_in(tmp_path, opened, chunk_size):
    path = tmp_path / "train.json"
    records = [record()] * 200
    records[150] = records[150].replace('"Paris"]', '"Paris"')
    text = "[\n" + ",\n".join(records) + "\n]\n"
    path.write_text(text)
    with pytest.raises(InputError):
        list(iter_json_array(path, chunk_size=chunk_size))
    typo = text.index('"Paris",\n "positive', text.index(records[150]))
    assert opened[0].chars <= typo + 3 * chunk_size


def test_a_record_larger_than_the_buffer_doubles_it(tmp_path, opened):
    path = tmp_path / "train.json"
    big = record().replace("Paris is the capital.", "x" * 200_000)
    path.write_text("[\n" + big + "\n]\n")
    assert [line for line, _ in iter_json_array(path, chunk_size=1000)] == [2]
    assert opened[0].reads <= 12  # about log2(200); one read a chunk would be 200


@pytest.mark.parametrize("buf, cut", [
    ('{"text": "a \\" b \\\\\\" c' + " " * 40, True),  # every '"' after the opening one is escaped
    ('{"text": "a \\\\" "b": 1' + " " * 40, False),  # '\\\\' is a backslash: the '"' after it ends the string
    ('{"text": "a" "b": 1' + " " * 40, False),
])
def test_a_string_cut_off_by_the_buffer_is_told_by_the_text_not_only_the_message(buf, cut):
    """Should json word "Unterminated string" otherwise, a cut string still reads on."""
    error = json.JSONDecodeError("Some other message", buf, buf.index('"', 8))  # the value's opening '"'
    assert formats._cut_off(buf, error) is cut


#: A record that a chunk boundary can cut anywhere: in a string, an escape, a surrogate pair, a
#: literal, a number's exponent, a run of white space.
TRICKY = ('{"question": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ x\\/y", "answers": ["a", "b\'c"],\n'
          '  "n": [-Infinity, Infinity, NaN, true, false, null, -0.0e-5, 1.5E+10, 123456789, [], {}, [[]]],'
          '          "positive_ctxs"   :   [ {"title": "t", "text": "x", "passage_id": 42}  ]       ,\n\n\n   '
          '"s": "\\u0041\\uD83D\\uDE00" , "z" : -1.0 }')


def test_every_chunk_boundary_reads_the_same_records(tmp_path):
    path = tmp_path / "a.json"
    text = "[\n" + TRICKY + ",\n  " + TRICKY + "]"
    path.write_text(text)
    records = json.loads(text)
    want = [(2, records[0]), (3 + TRICKY.count("\n"), records[1])]
    for chunk_size in range(1, len(text) + 2):
        got = list(iter_json_array(path, chunk_size=chunk_size))
        assert json.dumps(got) == json.dumps(want), chunk_size  # NaN != NaN: compare the text


@pytest.mark.parametrize("good, typo", [
    ('"answers": ["a", "b\'c"]', '"answers": ["a" "b\'c"]'),  # on the record's first line
    ('"question": "caf\\u00e9', '"question": "caf\\x00e9'),
    ('"text": "x"', '"text": "x\ty"'),  # a control character in a string
    ('"z" : -1.0 }', '"z" : -1.0, }'),  # on its last line
])
def test_every_chunk_boundary_reports_a_typo_at_its_line_and_column(tmp_path, good, typo):
    """The line and column are json's for the whole text, wherever the chunks end."""
    path = tmp_path / "a.json"
    bad = TRICKY.replace(good, typo)
    assert bad != TRICKY
    text = "[\n" + TRICKY + ",  " + bad + "\n]\n"
    path.write_text(text)
    with pytest.raises(json.JSONDecodeError) as e:
        json.loads(text)
    want = f"{path}:{e.value.lineno}: malformed JSON: {e.value.msg} (column {e.value.colno})"
    for chunk_size in range(1, len(text) + 2, 7):
        with pytest.raises(InputError) as got:
            list(iter_json_array(path, chunk_size=chunk_size))
        assert str(got.value) == want, chunk_size


def test_a_passage_id_of_thousands_of_digits_or_not_ascii_is_one_short_line():
    """A corpus id of 5,000 digits: int() refuses it (CPython's digit limit) and the message
    echoed all of it; a training record's positive id '²' (a digit to str.isdigit) was a
    traceback in mining. Both are one short line now, and leading zeros still read."""
    from dcsr.data.formats import passage_id
    from dcsr.errors import InputError

    with pytest.raises(InputError) as e:
        passage_id("9" * 5000, "c.tsv", 2)
    assert str(e.value) == "c.tsv:2: passage id 99999999999999999999... (5000 characters) does not fit in 64 bits; renumber the passages"
    with pytest.raises(InputError, match=r"^c.tsv:3: passage id '²' is not an integer$"):
        passage_id("²", "c.tsv", 3)
    assert passage_id("0" * 30 + "7", "c.tsv", 4) == 7


def test_mining_skips_a_positive_id_that_is_no_ascii_integer(tmp_path):
    from dcsr.retrieval.mining import training_questions

    rec = {"question": "q", "answers": ["a"], "positive_ctxs": [
        {"title": "", "text": "t1", "passage_id": "²"}, {"title": "", "text": "t2", "passage_id": "9" * 5000},
        {"title": "", "text": "t3", "passage_id": "12"}, {"title": "", "text": "t4", "passage_id": 13}],
        "negative_ctxs": [], "hard_negative_ctxs": []}
    (tmp_path / "t.json").write_text(json.dumps([rec]))
    _, _, ids, texts = training_questions(tmp_path / "t.json")
    assert ids == [{12, 13}] and texts == [{"t1", "t2", "t3", "t4"}]
