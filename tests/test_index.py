import numpy as np
import pytest

from dcsr.errors import InputError
from dcsr.retrieval.index import build_index, index_shard, merge_topk, search_shard, search_shard_many, topk_to_run


def _exact_topk(x, q, ids, k):
    s = q @ x.T
    out_s, out_i = [], []
    for row in s:
        order = sorted(range(len(row)), key=lambda j: (-row[j], ids[j]))[:k]
        out_s.append(row[order])
        out_i.append(ids[order])
    return np.array(out_s), np.array(out_i)


def test_sharded_search_merges_to_exact_topk(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(103, 16)).astype(np.float32)
    ids = np.arange(1000, 1103, dtype=np.int64)
    q = rng.normal(size=(7, 16)).astype(np.float32)
    np.save(tmp_path / "q.npy", q)
    shard_npz = []
    for s in range(3):
        rows = np.arange(len(x)) % 3 == s
        np.save(tmp_path / f"v{s}.npy", x[rows])
        np.save(tmp_path / f"i{s}.npy", ids[rows])
        index_shard(tmp_path / f"v{s}.npy", tmp_path / f"s{s}.faiss")
        search_shard(tmp_path / f"s{s}.faiss", tmp_path / f"i{s}.npy", tmp_path / "q.npy", tmp_path / f"h{s}.npz", k=10, use_gpu=False)
        shard_npz.append(np.load(tmp_path / f"h{s}.npz"))
    scores, got = merge_topk([z["scores"] for z in shard_npz], [z["ids"] for z in shard_npz], 10)
    ref_s, ref_i = _exact_topk(x, q, ids, 10)
    np.testing.assert_array_equal(got, ref_i)
    np.testing.assert_allclose(scores, ref_s, rtol=1e-5)


def test_shard_smaller_than_k_pads_and_merge_drops_padding(tmp_path):
    x = np.eye(3, dtype=np.float32)
    np.save(tmp_path / "v.npy", x)
    np.save(tmp_path / "i.npy", np.array([5, 6, 7]))
    np.save(tmp_path / "q.npy", np.array([[0, 1, 0]], dtype=np.float32))
    index_shard(tmp_path / "v.npy", tmp_path / "s.faiss")
    search_shard(tmp_path / "s.faiss", tmp_path / "i.npy", tmp_path / "q.npy", tmp_path / "h.npz", k=5, use_gpu=False)
    z = np.load(tmp_path / "h.npz")
    assert z["ids"][0, 0] == 6 and sorted(z["ids"][0, 1:3].tolist()) == [5, 7]  # 5 and 7 tie at 0
    assert z["ids"][0, 3:].tolist() == [-1, -1] and np.isneginf(z["scores"][0, 3:]).all()
    run = topk_to_run(*merge_topk([z["scores"]], [z["ids"]], 5))
    assert run == {0: [(6, 1.0), (5, 0.0), (7, 0.0)]}  # padding dropped, the tie broken by passage id


def test_one_index_load_answers_several_question_sets(tmp_path, monkeypatch):
    """Every question encoder searched against a passage shard: one read of the index, each
    question set's hits exactly those of its own search, written under nested folders."""
    import dcsr.retrieval.index as index_mod

    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 8)).astype(np.float32)
    np.save(tmp_path / "v.npy", x)
    np.save(tmp_path / "i.npy", np.arange(40, dtype=np.int64) + 100)
    index_shard(tmp_path / "v.npy", tmp_path / "s.faiss")
    searches = []
    for name, n in (("a", 3), ("b", 5)):
        np.save(tmp_path / f"q{name}.npy", rng.normal(size=(n, 8)).astype(np.float32))
        searches.append((tmp_path / f"q{name}.npy", tmp_path / "hits" / name / "test.npz"))
    reads = []
    real_read = index_mod.read_index
    monkeypatch.setattr(index_mod, "read_index", lambda *a, **kw: reads.append(a) or real_read(*a, **kw))
    stats = search_shard_many(tmp_path / "s.faiss", tmp_path / "i.npy", searches, k=4, use_gpu=False)
    assert len(reads) == 1 and [st["queries"] for st in stats] == [3, 5]
    for queries, out in searches:
        ref_s, ref_i = _exact_topk(x, np.load(queries), np.arange(40) + 100, 4)
        np.testing.assert_array_equal(np.load(out)["ids"], ref_i)
    np.save(tmp_path / "bad.npy", np.zeros((2, 5), dtype=np.float32))
    with pytest.raises(InputError, match="bad.npy"):
        search_shard_many(tmp_path / "s.faiss", tmp_path / "i.npy", [(tmp_path / "bad.npy", tmp_path / "x.npz")], 4, False)
    assert not (tmp_path / "x.npz").exists()


def test_merge_ties_break_by_passage_id():
    scores = [np.array([[1.0, 0.5]]), np.array([[1.0, 0.9]])]
    ids = [np.array([[9, 3]]), np.array([[4, 8]])]
    s, i = merge_topk(scores, ids, 3)
    assert i.tolist() == [[4, 9, 8]]


@pytest.mark.parametrize("k", [1, 3, 7])
def test_ties_at_a_shards_cut_keep_the_smallest_ids_for_every_sharding(k):
    """Equal vectors whose ids fall with their rows (a corpus not sorted by id): FAISS keeps the
    first rows of a tie at its cut, so each shard's top k, and the merge, would depend on the
    sharding. search_index searches a tied cut deeper (here past k + 1: the tie is 40 long) and
    keeps the smallest ids, so 1, 2, 3 and 5 shards give the exact top k by (score, id)."""
    from dcsr.retrieval.index import search_index

    rng = np.random.default_rng(3)
    x = rng.normal(size=(60, 8)).astype(np.float32)
    x[10:50] = x[0]  # one vector 41 times
    ids = np.arange(1000, 940, -1)  # ids fall as rows rise
    q = np.concatenate([x[:1], rng.normal(size=(5, 8)).astype(np.float32)])
    want = _exact_topk(x, q, ids, k)
    for n in (1, 2, 3, 5):
        parts = [search_index(build_index(x[s::n]), ids[s::n], q, k) for s in range(n)]
        got_s, got_i = merge_topk([p[0] for p in parts], [p[1] for p in parts], k)
        assert got_i.tolist() == want[1].tolist(), n
        np.testing.assert_allclose(got_s, want[0], rtol=1e-5)


def test_ties_in_an_approximate_index_are_ordered_by_id_without_a_deeper_search():
    """A compressed index's hits are what it finds: no deeper search (for HNSW a larger k is a
    wider search), but equal scores among them still come back smallest id first."""
    from dcsr.retrieval.index import exact_flat, search_index

    x = np.repeat(np.random.default_rng(4).normal(size=(1, 8)).astype(np.float32), 300, axis=0)
    index = build_index(x, "SQ8")
    assert not exact_flat(index) and exact_flat(build_index(x))

    class Counting:
        def __init__(self, inner):
            self.inner, self.ntotal, self.d, self.ks = inner, inner.ntotal, inner.d, []

        def search(self, q, k):
            self.ks.append(k)
            return self.inner.search(q, k)

    counted = Counting(index)
    s, i = search_index(counted, np.arange(300)[::-1].copy(), x[:2], 4)
    assert counted.ks == [4]
    assert (np.diff(i, axis=1) > 0).all() and (s == s[:, :1]).all()


def test_factory_string_and_bad_factory():
    from dcsr.errors import InputError

    x = np.random.default_rng(1).normal(size=(300, 8)).astype(np.float32)
    index = build_index(x, "IVF4,Flat", train_size=200)
    assert index.ntotal == 300
    with pytest.raises(InputError, match="index.factory"):
        build_index(x, "NotAnIndex42")


def test_search_shows_a_bar_on_stderr_and_the_same_hits_without_it(tmp_path, capsys):
    """search_shard_many: a tqdm bar over the query batches on stderr (as embedding has), and
    hits identical with the bar and without it; nothing on stdout."""
    rng = np.random.default_rng(2)
    np.save(tmp_path / "v.npy", rng.normal(size=(50, 8)).astype(np.float32))
    np.save(tmp_path / "i.npy", np.arange(50, dtype=np.int64))
    q = tmp_path / "enc" / "test.npy"
    q.parent.mkdir()
    np.save(q, rng.normal(size=(10, 8)).astype(np.float32))
    index_shard(tmp_path / "v.npy", tmp_path / "s.faiss")
    search_shard_many(tmp_path / "s.faiss", tmp_path / "i.npy", [(q, tmp_path / "a.npz")], 5, False, batch_size=4)
    out, err = capsys.readouterr()
    assert out == "" and "search enc/test.npy" in err and "10/10" in err
    search_shard_many(tmp_path / "s.faiss", tmp_path / "i.npy", [(q, tmp_path / "b.npz")], 5, False, batch_size=4,
                      progress=False)
    assert capsys.readouterr() == ("", "")
    a, b = np.load(tmp_path / "a.npz"), np.load(tmp_path / "b.npz")
    np.testing.assert_array_equal(a["ids"], b["ids"])
    np.testing.assert_array_equal(a["scores"], b["scores"])


def test_an_index_carries_its_checksum_and_a_changed_one_is_refused(tmp_path, caplog):
    """index_shard seals the index with a SHA-256 trailer (dcsr.integrity) that faiss ignores;
    read_index verifies it. A vector changed in place (header intact, which FAISS reads without
    complaint) and a damaged trailer are refused; an index written before checksums (no trailer)
    is read with a warning."""
    import faiss

    from dcsr.integrity import MAGIC, TRAILER_SIZE
    from dcsr.retrieval.index import read_index

    x = np.eye(4, 8, dtype=np.float32)
    np.save(tmp_path / "v.npy", x)
    index_shard(tmp_path / "v.npy", tmp_path / "s.faiss")
    data = (tmp_path / "s.faiss").read_bytes()
    assert data[-TRAILER_SIZE:].startswith(MAGIC) and data[-1:] == b"\n"
    with caplog.at_level("WARNING"):
        assert read_index(tmp_path / "s.faiss", use_gpu=False).ntotal == 4
    assert not [r for r in caplog.records if "s.faiss" in r.getMessage()]
    assert faiss.read_index(str(tmp_path / "s.faiss")).ntotal == 4  # plain faiss reads it too

    changed = bytearray(data)
    changed[-TRAILER_SIZE - 4:-TRAILER_SIZE] = np.float32(2.0).tobytes()  # the last vector's last value
    (tmp_path / "changed.faiss").write_bytes(bytes(changed))
    assert faiss.read_index(str(tmp_path / "changed.faiss")).ntotal == 4  # what went unnoticed before
    with pytest.raises(InputError, match=r"changed.faiss: does not match the checksum written when it was made; "
                                         r"it is corrupt or was changed: delete it and build it again"):
        read_index(tmp_path / "changed.faiss", use_gpu=False)

    (tmp_path / "trailer.faiss").write_bytes(data[:-10] + b"0" * 9 + b"\n")  # the digest damaged
    with pytest.raises(InputError, match="does not match the checksum"):
        read_index(tmp_path / "trailer.faiss", use_gpu=False)

    (tmp_path / "old.faiss").write_bytes(data[:-TRAILER_SIZE])
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert read_index(tmp_path / "old.faiss", use_gpu=False).ntotal == 4
    assert any("old.faiss has no checksum" in r.getMessage() for r in caplog.records)


def test_a_run_merged_from_shards_searched_on_a_gpu_and_on_the_cpu_is_refused(tmp_path, caplog):
    """Each hits file records where it was searched; a merge of a faiss-gpu (fp16 vectors) shard
    and a CPU (fp32) one is refused naming both, while files older than the record still merge."""
    from dcsr.errors import InputError
    from dcsr.integrity import seal
    from dcsr.retrieval.index import load_hits, merge_shard_hits

    rng = np.random.default_rng(5)
    x = rng.normal(size=(20, 8)).astype(np.float32)
    np.save(tmp_path / "q.npy", x[:3])
    paths = []
    for s in range(2):
        index_shard_file = tmp_path / f"s{s}.faiss"
        np.save(tmp_path / f"v{s}.npy", x[s::2])
        np.save(tmp_path / f"i{s}.npy", np.arange(20)[s::2])
        index_shard(tmp_path / f"v{s}.npy", index_shard_file)
        out = tmp_path / f"h{s}.npz"
        assert search_shard(index_shard_file, tmp_path / f"i{s}.npy", tmp_path / "q.npy", out, 4,
                            use_gpu=False, progress=False)["placement"] == "faiss-cpu"
        paths.append(out)
    assert load_hits(paths[0], with_placement=True)[2] == "faiss-cpu"
    merged = merge_shard_hits(paths, 4)
    # the second shard as a GPU search job would have written it
    s1, i1 = load_hits(paths[1])
    for where, expect in (("faiss-gpu", "raise"), (None, "merge")):
        with open(paths[1], "wb") as fh:
            np.savez(fh, scores=s1, ids=i1, **({"placement": np.array(where)} if where else {}))
        seal(paths[1])
        if expect == "raise":
            with pytest.raises(InputError) as e:
                merge_shard_hits(paths, 4)
            assert str(e.value) == (f"{paths[1]}: was searched on faiss-gpu, but {paths[0]} on faiss-cpu; the shards "
                                    "of one run are searched in one place, so that their scores rank alike: search "
                                    "them again with index.gpu set to true, torch or false (not auto)")
        else:
            np.testing.assert_array_equal(merge_shard_hits(paths, 4)[1], merged[1])
