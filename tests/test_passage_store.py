import gzip
import json
import random

import numpy as np
import pytest

from dcsr.errors import InputError
from dcsr.evaluation.metrics import evaluate_run
from dcsr.data.formats import Passage, passage_texts, write_corpus, write_qas, QA
from dcsr.data.passage_store import PassageStore, build_store, store_files


def awkward_corpus(n=300, seed=3):
    """Passages whose text needs csv quoting: tabs, quotes, newlines (written as spaces), non-ASCII;
    ids not in order."""
    rng = random.Random(seed)
    ids = rng.sample(range(1, 10 * n), n)
    bits = ['plain words', 'a "quoted" bit', "tab\there", "line\nbreak", "naïve café", "'single'", "\\back"]
    return [Passage(pid, " ".join(rng.choice(bits) for _ in range(5)), f"Title {pid} \"x\"") for pid in ids]


@pytest.mark.parametrize("gz", [False, True])
def test_store_returns_what_streaming_returns(tmp_path, gz):
    ps = awkward_corpus()
    tsv = tmp_path / "psgs_w100.tsv"
    write_corpus(tsv, ps)
    if gz:
        gzipped = tmp_path / "psgs_w100.tsv.gz"
        gzipped.write_bytes(gzip.compress(tsv.read_bytes()))
        tsv.unlink()
        tsv = gzipped
    assert build_store(tsv, tmp_path / "store") == len(ps)
    store = PassageStore(tmp_path / "store")
    assert len(store) == len(ps)
    wanted = {p.id for p in ps[::7]} | {ps[-1].id, ps[0].id}
    assert store.get(wanted) == passage_texts(tsv, wanted)
    # the writer puts a line break inside a text as a space (one passage per line)
    written = {p.id: Passage(p.id, p.text.replace("\n", " "), p.title) for p in ps}
    assert store.get([p.id for p in ps]) == written
    # absent ids are left out (below, between and above the stored ones), as passage_texts does
    absent = {0, 10 * len(ps) + 5} | ({2, 3, 4, 5} - {p.id for p in ps})
    assert store.get(absent | {ps[5].id}) == {ps[5].id: written[ps[5].id]}
    assert store.get([]) == {}


def test_store_rejects_repeated_ids_and_bad_rows_leaving_nothing(tmp_path):
    tsv = tmp_path / "psgs_w100.tsv"
    write_corpus(tsv, [Passage(1, "a", "A"), Passage(7, "b", "B"), Passage(1, "c", "C")])
    with pytest.raises(InputError, match=r"psgs_w100.tsv:4: passage id 1 occurs a second time"):
        build_store(tsv, tmp_path / "store")
    assert not (tmp_path / "store").exists()
    tsv.write_text("id\ttext\ttitle\n1\tfine\tT\n2\tno title\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"psgs_w100.tsv:3"):
        build_store(tsv, tmp_path / "store")
    assert not any(p.exists() for p in store_files(tmp_path / "store").values())
    with pytest.raises(InputError, match="not a passage store"):
        PassageStore(tmp_path / "store")


def test_evaluate_run_scores_the_same_from_a_store(tmp_path):
    ps = awkward_corpus(60)
    tsv = tmp_path / "psgs_w100.tsv"
    write_corpus(tsv, ps)
    build_store(tsv, tmp_path / "store")
    # every question's answer is a word of one passage's text
    qas = [QA(f"q{i}", [ps[i].text.split()[0]]) for i in range(10)]
    write_qas(tmp_path / "test.qa.csv", qas)
    rng = np.random.default_rng(0)
    with open(tmp_path / "run.trec", "w", encoding="utf-8") as fh:
        for q in range(10):
            for rank, j in enumerate(rng.permutation(len(ps))[:20], start=1):
                fh.write(f"{q} Q0 {ps[j].id} {rank} {100 - rank} t\n")
    a = evaluate_run(tmp_path / "run.trec", tmp_path / "test.qa.csv", tsv, tmp_path / "a.json", tmp_path / "a.jsonl", ks=(1, 5, 20))
    b = evaluate_run(tmp_path / "run.trec", tmp_path / "test.qa.csv", tmp_path / "store", tmp_path / "b.json", tmp_path / "b.jsonl", ks=(1, 5, 20))
    assert a == b and a["top20"] > 0
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    # a run naming a passage the store lacks is an error naming the run, as with the TSV
    with open(tmp_path / "run.trec", "a", encoding="utf-8") as fh:
        fh.write(f"0 Q0 999999 21 1 t\n")
    with pytest.raises(InputError, match="retrieves passage 999999"):
        evaluate_run(tmp_path / "run.trec", tmp_path / "test.qa.csv", tmp_path / "store", tmp_path / "c.json", ks=(1, 5, 20, 100))


@pytest.mark.parametrize("num_shards", [1, 3, 7])
def test_store_shards_are_the_streamed_shards(tmp_path, num_shards):
    from dcsr.retrieval.embed import shard_passages

    ps = awkward_corpus(50, seed=num_shards)
    tsv = tmp_path / "psgs_w100.tsv"
    write_corpus(tsv, ps)
    build_store(tsv, tmp_path / "store")
    seen = []
    for shard in range(num_shards):
        from_store = shard_passages(tmp_path / "store", shard, num_shards)
        assert from_store == shard_passages(tsv, shard, num_shards)
        seen += from_store[0]
    assert sorted(seen) == sorted(p.id for p in ps)
    with pytest.raises(ValueError, match="outside"):
        PassageStore(tmp_path / "store").shard(num_shards, num_shards)


def test_an_edited_passages_file_is_an_input_error_naming_it_not_a_json_error(tmp_path):
    """A line of passages.jsonl edited to another length moves every line after it: the offsets
    land inside lines (JSONDecodeError) or on the wrong passage (a wrong text, silently); an edit
    of the same length that changes an id gives the wrong passage too. Each is an InputError
    naming the file and the byte offset."""
    tsv = tmp_path / "c.tsv"
    write_corpus(tsv, [Passage(i, f"text {i}", f"T{i}") for i in (3, 1, 2, 4)])
    build_store(tsv, tmp_path / "store")
    text = store_files(tmp_path / "store")["passages"]
    original = text.read_bytes()
    text.write_bytes(original.replace(b'"text 3"', b'"text 3, longer"'))
    store = PassageStore(tmp_path / "store")
    assert store.get([3])[3].text == "text 3, longer"  # the edited line itself still starts where it did
    with pytest.raises(InputError, match=rf"^{text}: byte offset \d+: not a passage line \[id, text, title\] where "
                                         r"offsets.npy puts one: the file was changed after the store was built"):
        store.get([1])
    with pytest.raises(InputError, match="byte offset"):
        store.shard(0, 1)
    text.write_bytes(original.replace(b'[1, "text 1"', b'[5, "text 1"'))  # same length, another id
    with pytest.raises(InputError, match=rf"^{text}: byte offset \d+: holds passage 5, which ids.npy and offsets.npy "
                                         "do not place there"):
        PassageStore(tmp_path / "store").get([1, 2])
    text.write_bytes(original.replace(b'"text 1"', b'"text\xff1"'))
    with pytest.raises(InputError, match="not a passage line"):
        PassageStore(tmp_path / "store").get([1])
