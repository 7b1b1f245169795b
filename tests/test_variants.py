import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.data.formats import QA, read_biencoder, read_qas, write_biencoder
from dcsr.data.variants import concat_biencoder, write_dev_questions


def rec(q, answers, pid=None):
    pos = [{"title": "T", "text": f"text of {q}", "passage_id": pid}] if pid else []
    return {"question": q, "answers": answers, "positive_ctxs": pos, "negative_ctxs": [], "hard_negative_ctxs": []}


def test_dev_questions_keep_order_answers_and_questions_without_positives(tmp_path):
    dev = tmp_path / "dev.json"
    write_biencoder(dev, [rec("who? a", ["Ann", "Anne"], "1"), rec("when\tb", ["1999"]), rec("it's c", ["it's"], "3")])
    out = tmp_path / "dev.qa.csv"
    assert write_dev_questions(dev, out) == 3
    assert read_qas(out) == [QA("who? a", ["Ann", "Anne"]), QA("when\tb", ["1999"]), QA("it's c", ["it's"])]


def test_dev_questions_of_a_bad_file_name_the_line_and_leave_no_output(tmp_path):
    dev = tmp_path / "dev.json"
    dev.write_text('[\n{"question": "q", "answers": ["a"]},\n{"question": "", "answers": ["a"]}\n]\n')
    out = tmp_path / "dev.qa.csv"
    with pytest.raises(InputError, match=r"dev.json:3"):
        write_dev_questions(dev, out)
    assert not out.exists()


def test_merged_training_set_is_the_files_in_order(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_biencoder(a, [rec("a1", ["x"], "1"), rec("a2", ["y"], "2")])
    write_biencoder(b, [rec("b1", ["z"], "1")])
    out = tmp_path / "train.json"
    assert concat_biencoder([a, b], out) == 3
    got = read_biencoder(out)
    assert [r["question"] for r in got] == ["a1", "a2", "b1"]
    assert got[2]["positive_ctxs"][0] == {"title": "T", "text": "text of b1", "passage_id": "1"}
    # each record names the file it came from, for the trainer's one-set batches (DPR's MultiSetDataIterator)
    assert [r["training_set"] for r in got] == ["0:a.json", "0:a.json", "1:b.json"]


def test_merge_script_writes_train_and_dev(tmp_path, repo):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_biencoder(a, [rec("a1", ["x"], "1")])
    write_biencoder(b, [rec("b1", ["z"], "2")])
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "merge_training_sets.py"),
                        "--train", str(a), str(b), "--dev", str(b), "--train-out", str(tmp_path / "t.json"),
                        "--dev-out", str(tmp_path / "d.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert [x["question"] for x in read_biencoder(tmp_path / "t.json")] == ["a1", "b1"]
    assert [x["question"] for x in read_biencoder(tmp_path / "d.json")] == ["b1"]


def test_a_bad_record_in_the_second_file_leaves_no_merged_set(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    write_biencoder(a, [rec("a1", ["x"], "1")])
    b.write_text('[\n{"question": "b1", "answers": "not a list"}\n]\n')
    out = tmp_path / "train.json"
    with pytest.raises(InputError, match=r"b.json:2"):
        concat_biencoder([a, b], out)
    assert not out.exists()
