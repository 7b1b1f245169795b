"""Where a shard index is searched (``index.gpu``), tested without a GPU.

faiss-cpu has no GPU, so the faiss-gpu path is exercised with fakes of faiss's GPU functions
(``get_num_gpus``, ``index_cpu_to_all_gpus``, ``GpuMultipleClonerOptions``) that record what
they are asked and refuse, as faiss-gpu's ``ToGpuCloner`` does, the index types it has no GPU
index for. The torch path (exact search of a Flat index) runs here on the CPU in fp32 and must
rank exactly as FAISS does.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dcsr.retrieval.placement as placement
from dcsr.errors import InputError
from dcsr.retrieval.index import index_shard, read_index, search_shard_many

REPO = Path(__file__).resolve().parents[1]
N, DIM = 1200, 16


class FakeClonerOptions:
    """faiss.GpuMultipleClonerOptions' fields and defaults (faiss/gpu/GpuClonerOptions.h)."""

    def __init__(self):
        self.useFloat16 = False
        self.useFloat16CoarseQuantizer = False
        self.usePrecomputed = False
        self.shard = False
        self.shard_type = 1
        self.common_ivf_quantizer = False


class FakeGpuIndex:
    """What the fake cloner returns: the CPU index, searched as it is, marked as on the GPU."""

    def __init__(self, index):
        self.cpu = index
        self.ntotal, self.d = index.ntotal, index.d

    def search(self, x, k):
        return self.cpu.search(x, k)


NOT_ON_GPU = ("Error in virtual faiss::Index* faiss::gpu::ToGpuCloner::clone_Index(const faiss::Index*) at "
              "/project/faiss/faiss/gpu/GpuCloner.cpp:144: This index type is not implemented on GPU.")


@pytest.fixture
def fake_gpus(monkeypatch):
    """faiss with ``n`` fake GPUs; returns the list of ``(index type, options)`` cloned."""
    import faiss

    calls = []

    def install(n=1, fail=None):
        def index_cpu_to_all_gpus(index, co=None, ngpu=-1):
            inner = faiss.downcast_index(index)
            while isinstance(inner, (faiss.IndexPreTransform, faiss.IndexIDMap)):
                inner = faiss.downcast_index(inner.index)
            calls.append((type(inner).__name__, co))
            if fail:
                raise RuntimeError(fail)
            # ToGpuCloner::clone_Index: the types it has a GPU index for, else it throws
            sq_fp16 = (type(inner) is faiss.IndexScalarQuantizer
                       and inner.sq.qtype == faiss.ScalarQuantizer.QT_fp16)
            if not (sq_fp16 or type(inner) in (faiss.IndexFlat, faiss.IndexFlatIP, faiss.IndexFlatL2,
                                               faiss.IndexIVFFlat, faiss.IndexIVFScalarQuantizer,
                                               faiss.IndexIVFPQ)):
                raise RuntimeError(NOT_ON_GPU)
            return FakeGpuIndex(index)

        monkeypatch.setattr(faiss, "get_num_gpus", lambda: n)
        monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", index_cpu_to_all_gpus)
        monkeypatch.setattr(faiss, "GpuMultipleClonerOptions", FakeClonerOptions, raising=False)
        return calls

    return install


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpu")
    rng = np.random.default_rng(0)
    np.save(folder / "v.npy", rng.normal(size=(N, DIM)).astype(np.float32))
    np.save(folder / "i.npy", np.arange(N, dtype=np.int64) + 7000)
    np.save(folder / "q.npy", rng.normal(size=(9, DIM)).astype(np.float32))
    return folder


def _index(folder: Path, factory: str) -> Path:
    path = folder / (factory.replace(",", "_") + ".faiss")
    if not path.exists():
        index_shard(folder / "v.npy", path, factory, train_size=100000, seed=0)
    return path


def _hits(folder: Path, factory: str, out: str, use_gpu, k: int = 10):
    npz = folder / "hits" / f"{out}.npz"
    search_shard_many(_index(folder, factory), folder / "i.npy", [(folder / "q.npy", npz)], k, use_gpu=use_gpu,
                      progress=False)
    z = np.load(npz)
    return z["scores"], z["ids"]


@pytest.mark.parametrize("factory, cloned, why", [
    ("Flat", "IndexFlatIP", None),
    ("SQfp16", "IndexScalarQuantizer", None),
    ("IVF8,Flat", "IndexIVFFlat", None),
    ("IVF8,SQ8", "IndexIVFScalarQuantizer", None),
    ("IVF8,PQ4", "IndexIVFPQ", None),
    ("PCA8,Flat", "IndexFlatIP", None),
    ("SQ8", None, "IndexScalarQuantizer (SQ8, SQ4, ...) has no GPU index in FAISS"),
    ("HNSW32", None, "IndexHNSWFlat has no GPU index in FAISS"),
    ("PQ4", None, "IndexPQ has no GPU index in FAISS"),
    ("IVF8,PQ4x4", None, "faiss-gpu's IVF-PQ takes 8-bit codes only, and this one has 4"),
    ("IVF8_HNSW8,Flat", None, "its coarse quantizer (IndexHNSWFlat) has no GPU index"),
])
def test_faiss_gpus_get_what_they_can_hold_and_the_rest_stays_on_the_cpu(shard, fake_gpus, caplog, factory,
                                                                         cloned, why):
    """index.gpu auto with faiss-gpu seeing one GPU: Flat and the IVF kinds are cloned sharded
    and in fp16, SQ8 and HNSW32 (which faiss's ToGpuCloner refuses: 'not implemented on GPU')
    stay on the CPU with a log line saying why. The hits are the CPU index's either way."""
    want = _hits(shard, factory, f"{factory}-cpu", use_gpu=False)
    calls = fake_gpus(n=1)
    with caplog.at_level(logging.INFO, logger="dcsr.retrieval.placement"):
        index = read_index(_index(shard, factory), use_gpu="auto")
    if cloned:
        assert [name for name, _ in calls] == [cloned]
        co = calls[0][1]
        assert isinstance(co, FakeClonerOptions) and co.shard and co.useFloat16
        assert "FAISS GPU" in caplog.text
    else:
        assert calls == [] and not isinstance(index, FakeGpuIndex)
        assert "stays on the CPU" in caplog.text and why in caplog.text, caplog.text
    got = _hits(shard, factory, f"{factory}-auto", use_gpu="auto")
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


def test_a_cloner_error_keeps_the_index_on_the_cpu(shard, fake_gpus, caplog):
    """A RuntimeError of faiss's cloner (out of GPU memory, a PQ size the GPU lacks) is a log
    line, and the shard is searched on the CPU."""
    calls = fake_gpus(n=2, fail="Error in ... at StandardGpuResources.cpp:564: Error: 'err == cudaSuccess' "
                                "failed: StandardGpuResources: alloc fail type TemporaryMemoryBuffer dev 0 "
                                "space Device stream 0x0 size 1610612736 bytes (cudaMalloc error out of memory [2])")
    with caplog.at_level(logging.WARNING, logger="dcsr.retrieval.placement"):
        index = read_index(_index(shard, "Flat"), use_gpu="auto")
    assert len(calls) == 1 and type(index).__name__ == "IndexFlatIP"
    assert "stays on the CPU" in caplog.text and "cudaMalloc error out of memory" in caplog.text


def test_true_without_faiss_gpus_is_an_input_error(shard):
    with pytest.raises(InputError, match="config: index.gpu: true asks for faiss-gpu"):
        read_index(_index(shard, "Flat"), use_gpu=True)


# --- the torch path (index.gpu: torch, or auto with CUDA in torch and no GPU in faiss) ---


def _flat(x: np.ndarray, metric: str = "ip"):
    import faiss

    index = faiss.IndexFlatIP(x.shape[1]) if metric == "ip" else faiss.IndexFlatL2(x.shape[1])
    index.add(x)
    return index


@pytest.mark.parametrize("metric", ["ip", "l2"])
@pytest.mark.parametrize("k", [1, 5, 13, 40])
def test_torch_ranks_exactly_as_faiss_flat(metric, k):
    """Random floats (no ties): the same rows in the same order as FAISS's Flat, and the same
    scores to fp32 rounding, over several vector blocks (k above a block's 11 rows) and query
    batches."""
    rng = np.random.default_rng(k)
    x = rng.normal(size=(101, DIM)).astype(np.float32)
    q = rng.normal(size=(23, DIM)).astype(np.float32)
    index = _flat(x, metric)
    want_s, want_r = index.search(q, k)
    got_s, got_r = placement.TorchFlatIndex(index, device="cpu", chunk_rows=11, query_batch=7).search(q, k)
    assert got_s.dtype == np.float32 and got_r.dtype == np.int64 and got_r.shape == (23, k)
    np.testing.assert_array_equal(got_r, want_r)
    np.testing.assert_allclose(got_s, want_s, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_torch_past_ntotal_pads_as_faiss_does(metric):
    """k above the vectors held: FAISS's padding, rows -1 and scores -FLT_MAX (L2: FLT_MAX);
    an empty index is all padding, as FAISS's."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, DIM)).astype(np.float32)
    q = rng.normal(size=(4, DIM)).astype(np.float32)
    for index in (_flat(x, metric), _flat(x[:0], metric)):
        want_s, want_r = index.search(q, 9)
        got_s, got_r = placement.TorchFlatIndex(index, device="cpu", chunk_rows=4).search(q, 9)
        np.testing.assert_array_equal(got_r, want_r)
        np.testing.assert_allclose(got_s, want_s, rtol=1e-5)
        assert (got_r[:, len(x[:index.ntotal]):] == -1).all()


@pytest.fixture
def torch_cuda(monkeypatch):
    """torch "sees CUDA", and the torch path runs on the CPU."""
    monkeypatch.setattr(placement, "torch_cuda_available", lambda: True)
    monkeypatch.setattr(placement, "TORCH_DEVICE", "cpu")


def test_index_gpu_torch_searches_a_flat_shard_as_faiss_does(shard, torch_cuda, caplog):
    """search_shard_many with index.gpu torch: the same .npz, score for score, as faiss on the CPU."""
    want = _hits(shard, "Flat", "flat-cpu", use_gpu=False, k=25)
    with caplog.at_level(logging.INFO, logger="dcsr.retrieval.placement"):
        assert isinstance(read_index(_index(shard, "Flat"), use_gpu="torch"), placement.TorchFlatIndex)
    assert "searched exactly in torch on cpu" in caplog.text
    got = _hits(shard, "Flat", "flat-torch", use_gpu="torch", k=25)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


def test_index_gpu_torch_leaves_other_factories_to_faiss_on_the_cpu(shard, torch_cuda, caplog):
    with caplog.at_level(logging.WARNING, logger="dcsr.retrieval.placement"):
        index = read_index(_index(shard, "SQ8"), use_gpu="torch")
    assert type(index).__name__ == "IndexScalarQuantizer"
    assert "stays with faiss on the CPU" in caplog.text and "Flat indexes only" in caplog.text


def test_auto_prefers_faiss_gpus_then_torch_then_the_cpu(shard, fake_gpus, monkeypatch):
    import faiss

    path = _index(shard, "Flat")
    monkeypatch.setattr(placement, "TORCH_DEVICE", "cpu")
    monkeypatch.setattr(placement, "torch_cuda_available", lambda: True)
    fake_gpus(n=1)
    assert isinstance(read_index(path, use_gpu="auto"), FakeGpuIndex)  # faiss-gpu where faiss sees a GPU
    assert isinstance(read_index(path, use_gpu="torch"), placement.TorchFlatIndex)  # torch when asked
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)
    assert isinstance(read_index(path, use_gpu="auto"), placement.TorchFlatIndex)
    monkeypatch.setattr(placement, "TORCH_DEVICE", "cuda")
    monkeypatch.setattr(placement, "torch_cuda_available", lambda: False)
    assert type(read_index(path, use_gpu="auto")).__name__ == "IndexFlatIP"  # neither: faiss on the CPU
    with pytest.raises(InputError, match="config: index.gpu: torch asks for exact search in torch on CUDA"):
        read_index(path, use_gpu="torch")


def test_the_search_script_takes_gpu_torch(shard, tmp_path):
    """workflow/scripts/search_shard.py --gpu torch (rule search_shard passes index.gpu lowered):
    accepted, and here, where torch has no CUDA, one error line naming config: index.gpu."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, str(REPO / "workflow" / "scripts" / "search_shard.py"),
                        "--index", str(_index(shard, "Flat")), "--ids", str(shard / "i.npy"),
                        "--search", str(shard / "q.npy"), str(tmp_path / "h.npz"), "--k", "5", "--gpu", "torch",
                        "--no-progress"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "error: config: index.gpu: torch asks for exact search in torch on CUDA" in r.stderr


def test_dense_mining_searches_with_torch_as_with_faiss(shard, torch_cuda):
    """Mining's search over shards (dcsr.retrieval.mining.search_shards) takes index.gpu too."""
    from dcsr.retrieval.mining import search_shards

    q = np.load(shard / "q.npy")
    shards = [(str(_index(shard, "Flat")), str(shard / "i.npy"), None)]
    want = search_shards(q, shards, 30, use_gpu=False, progress=False)
    got = search_shards(q, shards, 30, use_gpu="torch", progress=False)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


@pytest.mark.parametrize("value", ["yes", 1, 0, None])
def test_an_unknown_index_gpu_is_an_input_error(shard, value):
    with pytest.raises(InputError, match="config: index.gpu: expected one of auto, True, False, torch"):
        read_index(_index(shard, "Flat"), use_gpu=value)


@pytest.mark.parametrize("driver", [False, True])
def test_a_machine_without_a_gpu_driver_searches_without_importing_torch(tmp_path, driver):
    """index.gpu auto on a CPU machine: no driver node, so torch (seconds of CPU a search job) is
    never imported to learn there is no CUDA; with a driver node torch is asked, as before."""
    node = tmp_path / ("nvidiactl" if driver else "absent")
    node.touch() if driver else None
    code = ("import sys, dcsr.drivers as d; "
            f"d.DRIVER_NODES = ({str(node)!r},); "
            "import dcsr.retrieval.placement as ix; print(ix.torch_cuda_available(), 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert r.returncode == 0, r.stderr
    import torch

    assert r.stdout.split() == ([str(torch.cuda.is_available()), "True"] if driver else ["False", "False"])


def test_placement_reads_the_index_under_a_pre_transform(monkeypatch):
    """faiss-gpu's cloner leaves an IndexPreTransform (OPQ, RR) on the CPU around the GPU index,
    or around the IndexShards of one a GPU: where the search runs is read under it (here CPU
    flats stand in for the GPU ones, laid out as the cloner lays them out, and named as
    faiss-gpu's are)."""
    import faiss

    import dcsr.retrieval.index as index_module
    from dcsr.retrieval.index import _faiss_parts, placement_of

    shards = faiss.IndexShards(DIM)
    flats = [faiss.IndexFlatIP(DIM) for _ in range(2)]
    for flat in flats:
        shards.add_shard(flat)
    wrapped = faiss.IndexPreTransform(faiss.RandomRotationMatrix(DIM, DIM), shards)
    assert _faiss_parts(wrapped) == ["IndexPreTransform"]
    assert _faiss_parts(placement._unwrap(wrapped)) == ["IndexFlatIP", "IndexFlatIP"]
    assert placement_of(wrapped) == "faiss-cpu"
    assert placement._unwrap(FakeGpuIndex(flats[0])).cpu is flats[0]  # no FAISS index: as it is

    def gpu_named(index):  # the shards faiss-gpu's cloner makes are GpuIndexFlat
        parts = _faiss_parts(index)
        return ["Gpu" + p for p in parts] if type(faiss.downcast_index(index)).__name__ == "IndexShards" else parts

    monkeypatch.setattr(index_module, "_faiss_parts", gpu_named)
    assert placement_of(wrapped) == "faiss-gpu"


def test_a_cpu_copy_from_the_multi_gpu_cloner_is_said_and_searched_as_the_cpu_index(shard, fake_gpus, monkeypatch,
                                                                                    caplog):
    """FAISS's cloner for several GPUs shards Flat and IVF indexes only; an SQfp16 index comes back
    as a CPU copy, without an error: that is a warning and the CPU index, not "searched with FAISS
    GPU indexes"."""
    import faiss

    fake_gpus(n=2)
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", lambda index, co=None, ngpu=-1: faiss.clone_index(index))
    with caplog.at_level(logging.INFO, logger="dcsr.retrieval.placement"):
        index = read_index(_index(shard, "SQfp16"), use_gpu="auto")
    assert type(faiss.downcast_index(index)).__name__ == "IndexScalarQuantizer"
    assert "returned a CPU index (IndexScalarQuantizer)" in caplog.text and "FAISS GPU indexes" not in caplog.text


class GpuIndexFlatIP:
    """A CPU Flat index named and limited as faiss-gpu's GpuIndexFlatIP: a search past
    ``FAISS_GPU_MAX_K`` hits throws, as faiss-gpu's ``validateKSelect`` does."""

    def __init__(self, index):
        self.cpu, self.ntotal, self.d, self.ks = index, index.ntotal, index.d, []

    def search(self, x, k):
        self.ks.append(k)
        if k > placement.FAISS_GPU_MAX_K:
            raise RuntimeError(f"GPU index only supports min/max-K selection up to {placement.FAISS_GPU_MAX_K} "
                               f"(requested {k})")
        return self.cpu.search(x, k)


def test_a_search_deeper_than_faiss_gpu_selects_goes_to_torch_or_stays_on_the_cpu(shard, fake_gpus, monkeypatch,
                                                                                   caplog):
    """faiss-gpu returns at most 2,048 hits a query and throws past it (DCSR's sentence depth is
    100 x k and can pass it): such a search is placed where it can run. Here the limit is 8:
    top 7 (8 with the tie probe) is cloned to the GPUs, top 8 is not: under ``true`` and
    ``auto`` it goes to torch where torch sees CUDA, else to the CPU, with a warning; the hits
    are the CPU's either way."""
    monkeypatch.setattr(placement, "FAISS_GPU_MAX_K", 8)
    path = _index(shard, "Flat")
    calls = fake_gpus(n=1)
    assert isinstance(read_index(path, use_gpu=True, k=7), FakeGpuIndex) and len(calls) == 1
    with caplog.at_level(logging.WARNING, logger="dcsr.retrieval.placement"):
        assert type(read_index(path, use_gpu=True, k=8)).__name__ == "IndexFlatIP"
    assert len(calls) == 1 and "returns at most 8 hits a query, and this search asks for 9" in caplog.text
    monkeypatch.setattr(placement, "TORCH_DEVICE", "cpu")
    monkeypatch.setattr(placement, "torch_cuda_available", lambda: True)
    assert isinstance(read_index(path, use_gpu="auto", k=8), placement.TorchFlatIndex)
    assert isinstance(read_index(_index(shard, "IVF8,Flat"), use_gpu="auto", k=8), FakeGpuIndex)  # no probe: 8
    want = _hits(shard, "Flat", "deep-cpu", use_gpu=False, k=30)
    got = _hits(shard, "Flat", "deep-true", use_gpu=True, k=30)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    assert len(calls) == 2


@pytest.mark.parametrize("limit", [64, 16])
def test_a_tie_longer_than_faiss_gpu_selects_is_cut_there_with_a_warning(monkeypatch, caplog, limit):
    """A tie at the cut is searched deeper, doubling the depth; on faiss-gpu the doubling stops at
    its limit instead of throwing. A tie of 41 equal vectors (ids falling as rows rise) within a
    limit of 64 keeps the smallest ids, as on the CPU; past a limit of 16 the cut is the GPU's
    order, said in a warning, and every hit kept is one of the tied vectors."""
    import faiss

    from dcsr.retrieval.index import search_index

    monkeypatch.setattr(placement, "FAISS_GPU_MAX_K", limit)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 8)).astype(np.float32)
    x[0] *= 10  # the nearest of every other vector to itself
    x[10:50] = x[0]
    ids = np.arange(5000, 4800, -1)
    cpu = faiss.IndexFlatIP(8)
    cpu.add(x)
    gpu = GpuIndexFlatIP(cpu)
    assert placement.max_search_k(gpu) == limit and placement.max_search_k(cpu) is None
    q = x[[0, 0]]
    want = search_index(cpu, ids, q, 3)
    with caplog.at_level(logging.WARNING, logger="dcsr.retrieval.index"):
        got = search_index(gpu, ids, q, 3)
    assert max(gpu.ks) <= limit
    tied = set(ids[[0, *range(10, 50)]].tolist())
    assert set(got[1].ravel().tolist()) <= tied
    if limit == 64:
        np.testing.assert_array_equal(got[1], want[1])
        assert "tied" not in caplog.text
    else:
        assert got[1].tolist() != want[1].tolist()  # the GPU's order: the first rows, not the smallest ids
        assert "2 queries have hits tied with their top-3's last score past the 16 hits" in caplog.text
    with pytest.raises(ValueError, match=f"top {limit + 1} asked of an index that returns at most {limit} hits"):
        search_index(gpu, ids, q, limit + 1)


def test_every_shard_of_a_run_is_placed_alike_whatever_its_size(shard, fake_gpus, monkeypatch, tmp_path):
    """Where a shard goes follows the depth the run asks (k, one more on an exact index), not that
    depth cut at the shard's size: a shard smaller than faiss-gpu's limit and a larger one of the
    same run are both kept off faiss-gpu, so their hits merge (check_one_placement). Mining, which
    merges shards as it reads them, refuses shards searched in two places (here the cloner fails
    on the second shard, which stays on the CPU) instead of ranking fp16 and fp32 scores together."""
    from dcsr.retrieval.index import merge_shard_hits
    from dcsr.retrieval.mining import search_shards

    monkeypatch.setattr(placement, "FAISS_GPU_MAX_K", 8)
    calls = fake_gpus(n=1)
    small = tmp_path / "small"
    small.mkdir()
    np.save(small / "v.npy", np.load(shard / "v.npy")[:6])
    np.save(small / "i.npy", np.arange(6, dtype=np.int64))
    npzs = []
    for folder in (shard, small):
        out = tmp_path / f"{folder.name}.npz"
        [res] = search_shard_many(_index(folder, "Flat"), folder / "i.npy", [(shard / "q.npy", out)], 8,
                                  use_gpu=True, progress=False)
        assert res["placement"] == "faiss-cpu"
        npzs.append(out)
    assert calls == []
    merge_shard_hits(npzs, 8)  # one place: no error

    import faiss

    q = np.load(shard / "q.npy")
    shards = [(str(_index(shard, "Flat")), str(shard / "i.npy"), None)] * 2
    clones = iter([lambda index: GpuIndexFlatIP(index), lambda index: (_ for _ in ()).throw(RuntimeError("oom"))])
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", lambda index, co=None, ngpu=-1: next(clones)(index))
    with pytest.raises(InputError, match="was searched on faiss-cpu, but .* on faiss-gpu"):
        search_shards(q, shards, 5, use_gpu=True, progress=False)
