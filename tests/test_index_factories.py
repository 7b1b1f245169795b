"""Compressed FAISS factories through the pipeline's own code path (issue 26): shards written as
the embedding step writes them (sealed .npy), one index per shard built by ``index_shard``,
every shard searched by ``search_shard_many`` and the hits merged by ``merge_shard_hits``, as the
rules do. Clustered vectors whose norms vary, so that inner product and L2 rank them differently
(an index that fell back to L2 would lose most of the exact top 10).

``index.search_params`` must reach the index (IVF searches one list by default: nprobe=1), and
a bad one, or a factory that cannot be trained on a shard, is an InputError naming its key.
PQ factories here are the ``np`` ones: plain ``PQ8`` adds FAISS's polysemous training, about 20 s
per shard on this machine's CPUs, whatever the shard's size."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import seal
from dcsr.pipeline.checks import check_search_params
from dcsr.retrieval.index import index_shard, merge_shard_hits, read_index, search_shard_many

REPO = Path(__file__).resolve().parents[1]
DIM, SHARDS, PER_SHARD, QUERIES, K = 32, 3, 1000, 60, 10


def _save_npy(path: Path, array: np.ndarray) -> None:
    """As dcsr.retrieval.embed._save_npy (not imported: that module imports torch): atomic, sealed."""
    with atomic_path(path, suffix=".npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, array)
        seal(tmp)


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread():
    """FAISS's OpenMP threads contend for the shared CPUs: these indexes are small."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """``(folder, vectors [N, d], ids [N], queries [Q, d], exact top-K ids [Q, K])``: shard s holds
    the rows ``i % SHARDS == s`` (vectors ``v<s>.npy``, passage ids ``i<s>.npy``)."""
    folder = tmp_path_factory.mktemp("factories")
    rng = np.random.default_rng(26)
    centers = rng.normal(size=(64, DIM))
    centers /= np.linalg.norm(centers, axis=1, keepdims=True)
    n = SHARDS * PER_SHARD
    x = centers[rng.integers(0, len(centers), size=n)] + 0.3 * rng.normal(size=(n, DIM))
    x = (x * rng.uniform(0.5, 1.5, size=(n, 1))).astype(np.float32)
    ids = rng.permutation(n).astype(np.int64) + 5000
    q = (centers[rng.integers(0, len(centers), size=QUERIES)] + 0.3 * rng.normal(size=(QUERIES, DIM))).astype(np.float32)
    for s in range(SHARDS):
        rows = np.arange(n) % SHARDS == s
        _save_npy(folder / f"v{s}.npy", x[rows])
        _save_npy(folder / f"i{s}.npy", ids[rows])
    _save_npy(folder / "q.npy", q)
    exact = ids[np.argsort(-(q @ x.T), axis=1, kind="stable")[:, :K]]
    l2 = ids[np.argsort(((q[:, None, :] - x[None]) ** 2).sum(-1), axis=1)[:, :K]]
    assert _recall(l2, exact) < 0.5  # the data tells the metrics apart
    return folder, x, ids, q, exact


def _recall(got: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each query's exact top K found in its top K."""
    return float(np.mean([len(set(g[g >= 0]) & set(e)) / len(e) for g, e in zip(got, exact)]))


_BUILT: dict[str, list[Path]] = {}


def _indexes(folder: Path, factory: str) -> list[Path]:
    """Every shard's index of ``factory``, built once per module."""
    key = f"{folder}:{factory}"
    if key not in _BUILT:
        name = re.sub(r"[^A-Za-z0-9]", "_", factory)
        _BUILT[key] = [folder / f"{name}-{s}.faiss" for s in range(SHARDS)]
        for s, path in enumerate(_BUILT[key]):
            stats = index_shard(folder / f"v{s}.npy", path, factory, train_size=100000, seed=0)
            assert stats == {"vectors": PER_SHARD, "dim": DIM, "factory": factory}
    return _BUILT[key]


def _search(folder: Path, factory: str, search_params: str = "", k: int = K):
    """The merged top ``k`` over all shards, as rules search_shard and merge_runs compute it."""
    out = folder / "hits" / f"{re.sub(r'[^A-Za-z0-9]', '_', factory)}-{search_params or 'default'}-{k}"
    npzs = []
    for s, index in enumerate(_indexes(folder, factory)):
        npz = out / f"{s}.npz"
        stats = search_shard_many(index, folder / f"i{s}.npy", [(folder / "q.npy", npz)], k, use_gpu=False,
                                  progress=False, search_params=search_params)
        assert stats == [{"queries": QUERIES, "k": k, "vectors": PER_SHARD, "placement": "faiss-cpu"}]
        npzs.append(npz)
    return merge_shard_hits(npzs, k)


@pytest.mark.parametrize("factory, search_params, least", [
    ("SQ8", "", 0.95),
    ("HNSW32", "", 0.95),
    ("HNSW32,SQ8", "", 0.95),
    ("IVF16,PQ16np", "nprobe=16", 0.85),
])
def test_compressed_factories_recover_the_exact_top10(corpus, factory, search_params, least):
    """The merged top 10 of a compressed index holds most of the exact inner-product top 10
    (measured: SQ8 0.98, HNSW32 1.0, HNSW32,SQ8 0.98, IVF16,PQ16np with nprobe=16 0.89), its
    scores are inner products, best first, and every index read back is an inner-product one."""
    import faiss

    folder, x, ids, q, exact = corpus
    scores, got = _search(folder, factory, search_params)
    assert got.shape == (QUERIES, K) and (got >= 0).all()
    assert _recall(got, exact) >= least
    assert (np.diff(scores, axis=1) <= 0).all()
    row_of = {int(i): r for r, i in enumerate(ids)}
    true = np.array([[q[j] @ x[row_of[int(i)]] for i in hits] for j, hits in enumerate(got)])
    # HNSW32 keeps the vectors as they are; SQ8 and PQ only approximate them
    np.testing.assert_allclose(scores, true, rtol=1e-4 if factory == "HNSW32" else 0.15, atol=0.05)
    index = faiss.downcast_index(read_index(_indexes(folder, factory)[0], use_gpu=False))
    assert index.metric_type == faiss.METRIC_INNER_PRODUCT


@pytest.mark.parametrize("factory", ["HNSW32", "HNSW32,SQ8", "SQ8", "IVF64,PQ16np", "OPQ16,IVF64,PQ16",
                                     "IVF64_HNSW32,Flat", "OPQ16_64,IVF256,PQ16x4fs"])
def test_every_level_of_a_factory_is_inner_product(factory):
    """FAISS keeps METRIC_INNER_PRODUCT in every index a factory string nests (the HNSW graph's
    storage, an IVF's coarse quantizer, the index under an OPQ rotation), not only the outer one
    (the recall tests above check the trained indexes rank by inner product)."""
    import faiss

    top = faiss.index_factory(64, factory, faiss.METRIC_INNER_PRODUCT)  # as build_index makes it
    keep, seen, todo = [top], [], [top]  # every wrapper kept alive: a freed owner takes its children along
    while todo:
        index = faiss.downcast_index(todo.pop())
        keep.append(index)
        seen.append((type(index).__name__, index.metric_type))
        todo += [child for part in ("index", "quantizer", "storage")
                 if isinstance(child := getattr(index, part, None), faiss.Index)]
    assert len(seen) >= 2 or factory == "SQ8"
    assert all(metric == faiss.METRIC_INNER_PRODUCT for _, metric in seen), seen


def test_search_params_reach_the_index(corpus):
    """IVF searches one list of 16 by default and misses much of the top 10; nprobe=16 visits
    them all and equals the exact search, scores and ties included. IVF-PQ gains the same way,
    and HNSW's efSearch changes its result (efSearch=4 loses recall, 128 finds everything)."""
    folder, x, ids, q, exact = corpus
    _, default = _search(folder, "IVF16,Flat")
    _, four = _search(folder, "IVF16,Flat", "nprobe=4")
    scores, full = _search(folder, "IVF16,Flat", "nprobe=16")
    assert _recall(default, exact) < 0.5 < 0.6 < _recall(four, exact) < 1.0  # measured: 0.33, 0.72
    np.testing.assert_array_equal(full, exact)
    order = np.argsort(-(q @ x.T), axis=1, kind="stable")[:, :K]
    np.testing.assert_allclose(scores, np.take_along_axis(q @ x.T, order, axis=1), rtol=1e-5, atol=1e-5)

    _, pq1 = _search(folder, "IVF16,PQ16np")
    _, pq16 = _search(folder, "IVF16,PQ16np", "nprobe=16")
    assert _recall(pq1, exact) + 0.3 < _recall(pq16, exact)  # measured: 0.33, 0.89

    _, low = _search(folder, "HNSW32", "efSearch=4")
    _, high = _search(folder, "HNSW32", "efSearch=128")
    assert _recall(low, exact) < 0.95 and _recall(high, exact) == 1.0  # measured: 0.87, 1.0


def test_hits_an_ivf_index_does_not_find_are_padding(corpus):
    """Asked for more hits than the lists it visits hold, an IVF shard pads with id -1 and score
    -inf (FAISS: -3.4e38), which the merge puts last and a run drops."""
    folder, x, ids, q, exact = corpus
    scores, got = _search(folder, "IVF16,Flat", "", k=400)
    missing = got < 0
    assert missing.any() and (missing.sum(axis=1) < 400).all()
    assert np.isneginf(scores[missing]).all() and np.isfinite(scores[~missing]).all()
    assert (missing[:, :-1] <= missing[:, 1:]).all()  # padding only after the hits


@pytest.mark.parametrize("factory, search_params, problem", [
    ("IVF16,Flat", "efSearch=64", r"'efSearch=64': the index \S+ \(IndexIVFFlat\) has no search parameter "
                                  r"'efSearch'; it takes nprobe"),
    ("SQ8", "nprobe=8", r"\(IndexScalarQuantizer\) has no search parameter 'nprobe'; it has no search-time "
                        r"parameters .*leave index.search_params empty"),
    ("HNSW32", "efSearch=64,nprobe=2", r"\(IndexHNSWFlat\) has no search parameter 'nprobe'; it takes efSearch"),
    ("IVF16,Flat", "nprobe=0", "sets nprobe to 0; it must be above 0"),
    ("IVF16,Flat", "nprobe=4.5", "sets nprobe to 4.5; it takes a whole number"),
    ("IVF16,Flat", "nprobe=-1", "'nprobe=-1' is not name=value with a number"),
    ("IVF16,Flat", "nprobe=4; touch pwned", "is not name=value"),
    ("IVF16,Flat", "nprobe = 4", "is not name=value"),
    ("IVF16,Flat", "nprobe=4,", "has '', not name=value"),
])
def test_a_bad_search_params_is_an_input_error_naming_the_key(corpus, factory, search_params, problem):
    folder = corpus[0]
    out = folder / "bad" / "h.npz"
    with pytest.raises(InputError, match=r"^config: index\.search_params: .*" + problem) as e:
        search_shard_many(_indexes(folder, factory)[0], folder / "i0.npy", [(folder / "q.npy", out)], K,
                          use_gpu=False, progress=False, search_params=search_params)
    assert "Error in" not in str(e.value)  # FAISS's C++ message, not ours
    assert not out.exists()


def test_search_params_are_checked_at_dag_build_against_the_factory():
    """What the plan runs at DAG build, before the first job: an empty index of index.factory."""
    for factory, good in [("Flat", ""), ("IVF4096,PQ64", "nprobe=64"), ("HNSW32", "efSearch=128"),
                          ("IVF1024_HNSW32,Flat", "nprobe=32,quantizer_efSearch=64"),
                          ("OPQ16,IVF256,PQ16", "nprobe=8,ht=20"), ("IVF64,Flat,RFlat", "k_factor_rf=1.5")]:
        check_search_params(good, factory)
    with pytest.raises(InputError, match=r"config: index.search_params: 'nprobe=64': index.factory 'Flat' "
                                         r"\(IndexFlat\) has no search parameter 'nprobe'"):
        check_search_params("nprobe=64", "Flat")
    with pytest.raises(InputError, match=r"index.factory 'IVF4096,PQ64' \(IndexIVFPQ\) has no search parameter "
                                         r"'efSearch'; it takes nprobe, ht"):
        check_search_params("efSearch=128", "IVF4096,PQ64")
    with pytest.raises(InputError, match=re.escape("config: index.search_params: 'nprobe=$(reboot)' is not")):
        check_search_params("nprobe=$(reboot)", "IVF4096,PQ64")


@pytest.mark.parametrize("factory, rows, train_size, problem", [
    ("IVF1024,Flat", 300, 100000, r"'IVF1024,Flat' needs at least 1024 training vectors .* and gets 300: "
                                  r"\S+v\.npy holds 300 vectors; choose a factory with fewer centroids"),
    ("PQ8np", 100, 100000, r"'PQ8np' needs at least 256 training vectors .* and gets 100: \S+ holds 100 vectors"),
    ("OPQ8,IVF16,PQ8np", 100, 100000, r"'OPQ8,IVF16,PQ8np' needs at least 256 training vectors .* and gets 100"),
    ("IVF16,PQ8np", 1000, 200, r"'IVF16,PQ8np' needs at least 256 training vectors .* and gets 200: \S+ holds 1000 vectors, "
                               r"200 of them sampled for training \(index.train_size\); .*or raise index.train_size"),
    ("SQ8", 0, 100000, r"'SQ8' needs training vectors and \S+v\.npy holds none"),
    ("PCA48,Flat", 20, 100000, r"'PCA48,Flat' cannot be trained on them: FAISS says 'PCA matrix cannot output 48 "
                               r"dimensions from 32': \S+ holds 20 vectors; choose another factory"),
])
def test_a_factory_the_shard_cannot_train_is_an_input_error(tmp_path, factory, rows, train_size, problem):
    """FAISS throws (a RuntimeError out of C++) when k-means gets fewer points than centroids:
    IVF lists, or PQ's 256 centroids per sub-vector; index_shard names the config key, what the
    factory needs and what the shard holds, and writes no index."""
    _save_npy(tmp_path / "v.npy", np.random.default_rng(1).normal(size=(rows, DIM)).astype(np.float32))
    with pytest.raises(InputError, match=r"^config: index\.factory: " + problem):
        index_shard(tmp_path / "v.npy", tmp_path / "s.faiss", factory, train_size=train_size)
    assert not (tmp_path / "s.faiss").exists()


def test_too_few_vectors_per_list_is_a_warning(tmp_path, caplog):
    """More vectors than IVF lists but under FAISS's 39 per list: FAISS only warns (on stderr);
    the build goes on, and the rule's log says what to change."""
    _save_npy(tmp_path / "v.npy", np.random.default_rng(1).normal(size=(300, DIM)).astype(np.float32))
    with caplog.at_level(logging.WARNING, logger="dcsr.retrieval.index"):
        assert index_shard(tmp_path / "v.npy", tmp_path / "s.faiss", "IVF16,Flat")["vectors"] == 300
    assert any("k-means learns 16 IVF lists" in r.getMessage() and "at least 624" in r.getMessage()
               for r in caplog.records)


def test_the_search_script_passes_search_params(corpus, tmp_path):
    """workflow/scripts/search_shard.py --search-params, as rule search_shard calls it: nprobe=16
    makes one IVF16 shard's hits its exact ones; a bad value fails with one line, no traceback."""
    folder, x, ids, q, exact = corpus
    index = _indexes(folder, "IVF16,Flat")[0]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    script = [sys.executable, str(REPO / "workflow" / "scripts" / "search_shard.py"), "--index", str(index),
              "--ids", str(folder / "i0.npy"), "--search", str(folder / "q.npy"), str(tmp_path / "h.npz"),
              "--k", str(K), "--gpu", "false", "--no-progress", "--search-params"]
    subprocess.run(script + ["nprobe=16"], env=env, check=True, capture_output=True, timeout=120)
    shard = np.load(folder / "v0.npy")
    shard_ids = np.load(folder / "i0.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "h.npz")["ids"],
                                  shard_ids[np.argsort(-(q @ shard.T), axis=1, kind="stable")[:, :K]])
    r = subprocess.run(script + ["efSearch=9"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "config: index.search_params: 'efSearch=9'" in r.stderr


def test_search_params_is_a_search_setting_only():
    """A search-time setting: rule search_shard passes it (quoted), rule index_shard does not
    see it, so changing it reruns the searches and keeps the indexes. Its default is FAISS's own."""
    from dcsr import settings

    spec = settings.SECTIONS["index"]["search_params"]
    assert spec.default == "" and spec.types == (str,)
    with pytest.raises(InputError, match="config: index.search_params: expected str, found 64"):
        settings.check(settings.SECTIONS["index"], {"search_params": 64}, "config: index")
    text = (REPO / "rules" / "search.smk").read_text()
    index_rule = text[text.index("rule index_shard:"):text.index("rule search_shard:")]
    search_rule = text[text.index("rule search_shard:"):text.index("rule merge_runs:")]
    assert "search_params" not in index_rule
    assert "search_params=plan.search_params_args," in search_rule
    assert " {params.search_params:q} " in search_rule
    # the argument list the rule passes: the flag and its value, or nothing (`:q` writes "" as nothing)
    from types import SimpleNamespace

    from dcsr.pipeline.plan import Plan

    args = Plan.search_params_args.fget
    assert args(SimpleNamespace(config={"index": {"search_params": "nprobe=16"}})) == ["--search-params", "nprobe=16"]
    assert args(SimpleNamespace(config={"index": {"search_params": ""}})) == []


def test_dense_mining_searches_with_the_search_params(corpus):
    """DCSR-hard mining (dcsr.retrieval.mining.search_shards) reads the same shard indexes as the
    test-set search, and sets index.search_params on them too: IVF with nprobe=16 mines from the
    exact top 10, with FAISS's default (nprobe=1) from a third of it."""
    from dcsr.retrieval.mining import search_shards

    folder, _, _, q, exact = corpus
    shards = [(str(p), str(folder / f"i{s}.npy"), None) for s, p in enumerate(_indexes(folder, "IVF16,Flat"))]
    _, default = search_shards(q.astype(np.float32), shards, K, use_gpu=False, progress=False)
    _, full = search_shards(q.astype(np.float32), shards, K, use_gpu=False, progress=False, search_params="nprobe=16")
    np.testing.assert_array_equal(full, exact)
    assert _recall(default, exact) < 0.5
