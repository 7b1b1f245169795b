"""Checksums written with large artefacts and checked on read (dcsr.integrity): the search
hits, the passage store's arrays and a saved model's config and tokenizer files are sealed
when written; a checked file is read once; a model without digests loads with a warning.
(The messages a user reads for a changed file are cases of tests/test_bad_inputs.py.)"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from dcsr.errors import InputError
from dcsr.integrity import TRAILER_SIZE, VerifiedReader, load_array, read_verified, seal, verify

IO = Path("/proc/self/io")


def _bytes_read() -> int:
    """What this process has read through read(2) so far (page-cache hits too, mmap not)."""
    return int(next(line.split()[1] for line in IO.read_text().splitlines() if line.startswith("rchar:")))


def _shard(tmp_path: Path, n: int = 20000, d: int = 128):
    from dcsr.retrieval.embed import _save_npy
    from dcsr.retrieval.index import index_shard

    rng = np.random.default_rng(0)
    _save_npy(tmp_path / "vectors.npy", rng.standard_normal((n, d)).astype(np.float32))
    _save_npy(tmp_path / "ids.npy", np.arange(n, dtype=np.int64) * 3)
    _save_npy(tmp_path / "queries.npy", rng.standard_normal((7, d)).astype(np.float32))
    index_shard(tmp_path / "vectors.npy", tmp_path / "shard.faiss")
    return tmp_path / "shard.faiss", tmp_path / "ids.npy", tmp_path / "queries.npy"


def test_the_reader_hashes_what_it_reads_and_checks_the_rest(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(os.urandom(10_000))
    with VerifiedReader(path, "fix it") as r:  # no trailer: read as it is, unverified
        assert r.read(100) + r.read() == path.read_bytes() and r.check() is False
    seal(path)
    with VerifiedReader(path, "fix it") as r:  # the reader stops before the trailer
        assert len(r.read(4000)) == 4000 and r.check() is True and r.read() == b""
    assert read_verified(path, "fix it") == (bytearray(path.read_bytes()[:-TRAILER_SIZE]), True)
    data = bytearray(path.read_bytes())
    data[9000] ^= 1  # past what a reader reads first: found by check()
    path.write_bytes(bytes(data))
    with VerifiedReader(path, "fix it") as r:
        r.read(4000)
        with pytest.raises(InputError, match=r"f\.bin: does not match the checksum .*: fix it$"):
            r.check()


@pytest.mark.parametrize("mmap_mode", [None, "r"])
def test_an_array_loads_as_np_load_does(tmp_path, mmap_mode):
    for i, arr in enumerate([np.arange(12).reshape(3, 4), np.asfortranarray(np.arange(12.0).reshape(3, 4)),
                             np.array(5), np.zeros((0, 3), np.float32), np.array(["ab", "c"])]):
        path = tmp_path / f"a{i}.npy"
        np.save(path, arr)
        for sealed in (False, True):
            if sealed:
                seal(path)
            got, verified = load_array(path, "fix", mmap_mode)
            assert verified is sealed and got.dtype == arr.dtype and np.array_equal(got, arr)
    np.save(tmp_path / "o.npy", np.array([{1: 2}], dtype=object))
    with pytest.raises(ValueError):
        load_array(tmp_path / "o.npy", "fix", mmap_mode)


@pytest.mark.skipif(not IO.is_file(), reason="needs Linux's /proc/self/io")
def test_a_search_job_reads_each_of_its_files_once(tmp_path):
    """Verifying the shard index, its ids and the question vectors costs no read of its own:
    the bytes a search reads are about the files' sizes (they were read twice: hashed, then
    loaded: 14 GB a job twice at 21M passages)."""
    from dcsr.retrieval.index import search_shard

    files = _shard(tmp_path)
    size = sum(f.stat().st_size for f in files)
    assert all(verify(f, "") for f in files)
    before = _bytes_read()
    search_shard(files[0], files[1], files[2], tmp_path / "hits.npz", k=5, use_gpu=False, progress=False)
    read = _bytes_read() - before
    assert size <= read < 1.25 * size, (read, size)


def test_search_hits_are_sealed_and_checked_when_merged(tmp_path):
    from dcsr.retrieval.hasans import all_sentence_hits
    from dcsr.retrieval.index import merge_shard_hits, search_shard

    index, ids, queries = _shard(tmp_path, n=300, d=16)
    hits = tmp_path / "hits.npz"
    search_shard(index, ids, queries, hits, k=5, use_gpu=False, progress=False)
    assert verify(hits, "fix") is True
    scores, got = merge_shard_hits([hits], 5)
    assert scores.shape == got.shape == (7, 5) and (got % 3 == 0).all()
    assert np.array_equal(all_sentence_hits([hits])[1], got)
    data = bytearray(hits.read_bytes())
    data[len(data) // 2] ^= 1
    hits.write_bytes(bytes(data))
    for merge in (lambda: merge_shard_hits([hits], 5), lambda: all_sentence_hits([hits])):
        with pytest.raises(InputError, match=r"hits\.npz: does not match the checksum .*search the shard again$"):
            merge()


def test_hits_without_a_checksum_are_merged_with_a_warning(tmp_path, caplog):
    from dcsr.retrieval.index import merge_shard_hits

    with open(tmp_path / "old.npz", "wb") as fh:
        np.savez(fh, scores=np.ones((2, 3), dtype=np.float32), ids=np.arange(6, dtype=np.int64).reshape(2, 3))
    with caplog.at_level(logging.WARNING):
        merge_shard_hits([tmp_path / "old.npz"], 3)
    assert f"{tmp_path / 'old.npz'} has no checksum" in caplog.text


def test_a_passage_store_seals_and_checks_its_arrays(tmp_path, caplog):
    from dcsr.data.formats import Passage, write_corpus
    from dcsr.data.passage_store import PassageStore, build_store

    write_corpus(tmp_path / "c.tsv", [Passage(i, f"text {i}", f"t{i}") for i in (5, 1, 9)])
    build_store(tmp_path / "c.tsv", tmp_path / "store")
    for name in ("ids.npy", "offsets.npy"):
        assert verify(tmp_path / "store" / name, "fix") is True
    assert PassageStore(tmp_path / "store").get([9, 1])[9].text == "text 9"
    # a store written before checksums is read with a warning naming the file
    np.save(tmp_path / "store" / "offsets.npy", np.load(tmp_path / "store" / "offsets.npy"))
    with caplog.at_level(logging.WARNING):
        assert PassageStore(tmp_path / "store").get([5])[5].text == "text 5"
    assert f"{tmp_path / 'store' / 'offsets.npy'} has no checksum" in caplog.text


def test_a_saved_model_records_its_config_and_tokenizer_files(tiny_bert, tmp_path):
    from dcsr.models.biencoder import build_biencoder, load_biencoder, save_biencoder

    tokenizer, model = build_biencoder(str(tiny_bert), pooling="cls")
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr"})
    meta = json.loads((tmp_path / "m" / "dcsr.json").read_text())
    files = set(meta["files_sha256"])
    for side in ("question_encoder", "passage_encoder"):
        assert {f"{side}/config.json", f"{side}/tokenizer_config.json"} <= files
        assert any(f.startswith(f"{side}/") and ("vocab" in f or f.endswith("tokenizer.json")) for f in files)
        assert f"{side}/model.safetensors" not in files  # weights_sha256 holds the weights
    load_biencoder(tmp_path / "m")
    config = tmp_path / "m" / "question_encoder" / "tokenizer_config.json"
    config.write_text(config.read_text().replace("{", '{"model_max_length": 7, ', 1))
    with pytest.raises(InputError, match=r"question_encoder/tokenizer_config\.json: does not match the checksum"):
        load_biencoder(tmp_path / "m")


def test_a_model_without_digests_loads_with_a_warning(tiny_bert, tmp_path, caplog):
    """As a file without a checksum trailer: read, with a warning naming it (it loaded silently)."""
    from dcsr.models.biencoder import build_biencoder, load_biencoder, save_biencoder

    tokenizer, model = build_biencoder(str(tiny_bert), pooling="cls")
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr"})
    with caplog.at_level(logging.WARNING):
        load_biencoder(tmp_path / "m")
    assert "no checksum" not in caplog.text
    meta_file = tmp_path / "m" / "dcsr.json"
    meta = json.loads(meta_file.read_text())
    del meta["weights_sha256"]
    meta_file.write_text(json.dumps(meta))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        load_biencoder(tmp_path / "m")
    assert f"{meta_file} has no checksum" in caplog.text and "its weight files are read unverified" in caplog.text


def test_the_digests_of_a_model_folder_name_only_its_own_files(tmp_path):
    """files_sha256 of a dcsr.json someone else wrote may name any path: a file outside the
    folder (absolute, with '..', or through a link leading out of it) is refused, never opened and hashed; a record
    that is not {file: sha256} is an InputError naming the record, not an AttributeError."""
    from dcsr.integrity import check_file_digests, sha256_of

    model = tmp_path / "model"
    (model / "question_encoder").mkdir(parents=True)
    (model / "question_encoder" / "config.json").write_text("{}")
    secret = tmp_path / "secret"
    secret.write_text("not the model's")
    digest = sha256_of(secret)  # the right digest: only the name can refuse it
    where = f"{model}/dcsr.json: files_sha256"
    check_file_digests(model, {"question_encoder/config.json": sha256_of(model / "question_encoder" / "config.json")},
                       "fix", where)
    for name in (str(secret), "../secret", "question_encoder/../../secret"):
        with pytest.raises(InputError, match="not a relative path inside the folder") as e:
            check_file_digests(model, {name: digest}, "fix", where)
        assert e.value.where == where
    (model / "question_encoder" / "vocab.txt").symlink_to(secret)
    (model / "passage_encoder").symlink_to(tmp_path)
    for name in ("question_encoder/vocab.txt", "passage_encoder/secret"):
        with pytest.raises(InputError, match="leads outside the folder .* \\(through a link\\)") as e:
            check_file_digests(model, {name: digest}, "fix", where)
        assert e.value.where == where
    # a link that stays inside the folder (cp -rs, a deduplicating store) is the folder's own file
    (model / "passage_encoder").unlink()
    (model / "passage_encoder").mkdir()
    (model / "passage_encoder" / "config.json").symlink_to(model / "question_encoder" / "config.json")
    check_file_digests(model, {"passage_encoder/config.json": sha256_of(model / "question_encoder" / "config.json")},
                       "fix", where)
    for bad in (["x"], {"question_encoder/config.json": "x"}, {"question_encoder/config.json": 1}):
        with pytest.raises(InputError, match="must be an object|is not a SHA-256 digest") as e:
            check_file_digests(model, bad, "fix", where)
        assert e.value.where == where
