"""FAISS indexes over vector shards, shard-by-shard search, and an exact top-k merge.

Every shard gets its own index, built from any FAISS factory string (``Flat`` by default:
exact inner product, as DPR; compressed ones such as ``SQ8``, ``HNSW32``, ``IVF4096,PQ64``
trade recall for memory and speed). Search-time knobs (``nprobe``, ``efSearch``, ...) are a
FAISS ParameterSpace string, ``index.search_params``, set on the loaded index: they are not
stored in it, so changing them searches again without building again.

A search job loads ONE shard index and writes that shard's top-k hits per question, for every
question set searched against that passage encoder; a merge job per (question encoder, passage
encoder, test set) combines the shards' hits. Because each shard returns its own top-k (exact
with Flat), the merged top-k equals a search over all vectors at once (with a compressed
factory: the best of what each shard's index finds), and no job ever holds more than one
shard in memory.

Where a shard is searched is ``index.gpu`` (:func:`place_index`): faiss-gpu for the index types
it has GPU indexes for (Flat, IVF-Flat, IVF-SQ, IVF-PQ; sharded over the GPUs, Flat in fp16),
exact search in torch on CUDA for a Flat index where FAISS has no GPU build
(:class:`TorchFlatIndex`), or FAISS on the CPU, which is also where an index neither can hold
(SQ8, HNSW32) stays, with a log line. Each is searched as the CPU index is, so the hits files
keep one layout.
"""

from __future__ import annotations

import io
import logging
import os
import re
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm import tqdm

from dcsr.drivers import gpu_driver_present
from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import VerifiedReader, load_array, read_verified, seal, warn_unverified
from dcsr.settings import INDEX_GPU

log = logging.getLogger(__name__)


def _faiss():
    import faiss

    return faiss


def gpu_available() -> bool:
    faiss = _faiss()
    return hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0


def build_index(vectors: np.ndarray, factory: str = "Flat", train_size: int | None = None, seed: int = 0,
                where: str = "the shard"):
    """A FAISS inner-product index over ``vectors`` ``[n, d]`` (float32 internally).

    Factories that need training (IVF, PQ, ...) are trained on a seeded sample of at most
    ``train_size`` vectors of the shard itself. One that needs more training vectors than that
    (IVF1024 on 300 vectors, PQ's 256 centroids on 100) is an :class:`InputError` naming
    ``config: index.factory`` and both numbers; too few per cluster for k-means to be good
    (FAISS asks for 39) is a warning. ``where`` names the vectors in messages.
    """
    faiss = _faiss()
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    try:
        index = faiss.index_factory(x.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise InputError("config: index.factory", f"FAISS cannot build {factory!r}: {str(e).splitlines()[-1]}")
    if not index.is_trained:
        sample = x
        if train_size and len(x) > train_size:
            rng = np.random.default_rng(seed)
            sample = x[rng.choice(len(x), size=train_size, replace=False)]
        _train(index, sample, len(x), factory, train_size, where)
    index.add(x)
    return index


# FAISS's k-means wants this many training points per centroid (Clustering::min_points_per_centroid)
# and warns below it; below one point per centroid it throws.
MIN_POINTS_PER_CENTROID = 39


def training_clusters(index) -> list[tuple[str, int]]:
    """``(what, centroids)`` of the k-means a factory's training runs: IVF lists, PQ codebooks."""
    faiss = _faiss()
    out = []
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        out.append(("IVF lists", int(ivf.nlist)))
    inner = faiss.downcast_index(ivf if ivf is not None else index)
    while isinstance(inner, faiss.IndexPreTransform):  # OPQ16,PQ16
        inner = faiss.downcast_index(inner.index)
    pq = getattr(inner, "pq", None)
    if pq is not None:
        out.append(("PQ centroids per sub-vector", int(pq.ksub)))
    return out


def _faiss_message(e: Exception) -> str:
    """The readable end of a FAISS C++ exception (no function signature, no source line)."""
    text = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    m = re.search(r"failed: (.+)$", text) or re.search(r"at \S+:\d+: (?:Error: )?(.+)$", text)
    return m.group(1).strip() if m else text


def _train(index, sample: np.ndarray, n: int, factory: str, train_size: int | None, where: str) -> None:
    more = ("choose a factory with fewer centroids (a smaller IVF list count; PQ with fewer bits, "
            "such as PQ<m>x4) or larger shards (embed.passages_per_shard)")
    if train_size and n > train_size:
        more += ", or raise index.train_size"
    used = (f"{where} holds {n} vectors" + (f", {len(sample)} of them sampled for training (index.train_size)"
                                            if len(sample) < n else ""))
    if not len(sample):
        raise InputError("config: index.factory", f"{factory!r} needs training vectors and {where} holds none; "
                                                  "use a factory without training (Flat, HNSW32) or fewer shards")
    for what, k in training_clusters(index):
        if k <= len(sample) < MIN_POINTS_PER_CENTROID * k:
            log.warning("index.factory %r: %s; k-means learns %d %s from them, and FAISS advises at least %d "
                        "(%d per centroid): recall may suffer; %s", factory, used, k, what,
                        MIN_POINTS_PER_CENTROID * k, MIN_POINTS_PER_CENTROID, more)
    try:
        index.train(sample)
    except RuntimeError as e:
        msg = _faiss_message(e)
        m = re.search(r"Number of training points \((\d+)\) should be at least as large as number of clusters "
                      r"\((\d+)\)", msg)
        if m:
            problem = f"needs at least {m.group(2)} training vectors (the centroids its k-means learns) and gets {m.group(1)}"
        else:
            problem = f"cannot be trained on them: FAISS says {msg!r}"
            more = "choose another factory or larger shards (embed.passages_per_shard)"
        raise InputError("config: index.factory", f"{factory!r} {problem}: {used}; {more}") from None


# A ParameterSpace string: name=value pairs joined by commas, such as nprobe=64 or
# nprobe=32,quantizer_efSearch=64. FAISS itself accepts nprobe=0 (then every search throws),
# nprobe=-1 (wrapped round to 2^64 - 1) and nprobe=4.5 (truncated): refused here.
_PARAM = re.compile(r"([A-Za-z][A-Za-z0-9_]{0,63})=([0-9]{1,9}(?:\.[0-9]{1,6})?)")
_POSITIVE = ("nprobe", "efSearch", "k_factor", "k_factor_rf")


def _parse_search_params(search_params: str) -> list[tuple[str, float]]:
    def bad(msg):
        raise InputError("config: index.search_params", f"{search_params!r} {msg}; write FAISS ParameterSpace "
                                                         "name=value pairs joined by commas, such as nprobe=64, "
                                                         "efSearch=128 or nprobe=32,quantizer_efSearch=64 "
                                                         "(empty: FAISS's defaults)")

    if not isinstance(search_params, str):
        bad("is not a string")
    if not search_params:
        return []
    out = []
    for part in search_params.split(","):
        m = _PARAM.fullmatch(part)
        if not m:
            bad(("is" if part == search_params else f"has {part!r},")
                + " not name=value with a number (digits, no spaces or signs)")
        name, value = m.group(1), float(m.group(2))
        base = name.removeprefix("quantizer_")
        if base in _POSITIVE and value <= 0:
            bad(f"sets {name} to {m.group(2)}; it must be above 0")
        if not base.startswith("k_factor") and value != int(value):
            bad(f"sets {name} to {m.group(2)}; it takes a whole number")
        out.append((name, value))
    return out


def set_search_params(index, search_params: str, what: str = "the index") -> None:
    """Set a ParameterSpace string (``index.search_params``) on ``index``: a malformed one, or a
    parameter this index does not have (``efSearch`` on an IVF index, ``nprobe`` on Flat), is an
    :class:`InputError` naming ``config: index.search_params`` and the parameters it takes."""
    faiss = _faiss()
    space = faiss.ParameterSpace()
    for name, value in _parse_search_params(search_params):
        try:
            space.set_index_parameter(index, name, value)
        except RuntimeError as e:
            log.debug("ParameterSpace.set_index_parameter(%s, %s): %s", name, value, e)
            kind = type(faiss.downcast_index(index)).__name__
            tunable = faiss.ParameterSpace()
            tunable.initialize(index)
            names = [tunable.parameter_ranges.at(i).name for i in range(tunable.parameter_ranges.size())]
            takes = (f"it takes {', '.join(names)}" if names else
                     "it has no search-time parameters (an exhaustive index): leave index.search_params empty")
            raise InputError("config: index.search_params",
                             f"{search_params!r}: {what} ({kind}) has no search parameter {name!r}; {takes}") from None


REBUILD_INDEX = "delete it and build it again with index_shard.py"
RERUN_NPY = "delete it and let the step that writes it run again"


def write_index(index, path: str | os.PathLike) -> None:
    """Write ``index`` atomically, sealed with its checksum (:mod:`dcsr.integrity`)."""
    faiss = _faiss()
    with atomic_path(path, suffix=".faiss") as tmp:
        faiss.write_index(index, str(tmp))
        seal(tmp)


def read_index(path: str | os.PathLike, use_gpu: bool | str = "auto", search_params: str = ""):
    """A FAISS index from ``path``, its checksum verified; a missing, truncated, corrupt or
    changed file is an :class:`InputError`. ``search_params`` (:func:`set_search_params`) are
    set before the index is copied to GPUs, which copy them (``nprobe``). ``use_gpu`` is
    ``index.gpu`` (:func:`place_index`): what comes back may be a faiss-gpu index or a
    :class:`TorchFlatIndex`, both searched as the CPU index is."""
    faiss = _faiss()
    if not os.path.isfile(path):
        raise InputError(str(path), "no such FAISS index file; build it with index_shard.py")
    # one read: FAISS reads through the checksum's reader, which hashes the bytes as they pass
    with VerifiedReader(path, REBUILD_INDEX) as reader:
        try:
            index = faiss.read_index(faiss.PyCallbackIOReader(reader.read, 1 << 22))
        except RuntimeError as e:
            log.debug("faiss.read_index(%s): %s", path, e)
            reader.check()  # a changed file says so rather than that it is unreadable
            raise InputError(str(path), f"not a readable FAISS index (truncated or corrupt); {REBUILD_INDEX}") from None
        verified = reader.check()
    if not verified:
        log.warning("%s has no checksum (written before indexes carried one); read unverified: %s to have "
                    "it checked", path, REBUILD_INDEX)
    set_search_params(index, search_params, f"the index {path}")
    return place_index(index, use_gpu, f"the index {path}")


# index.gpu: where a shard index is searched (config/README.md).
GPU_MODES = INDEX_GPU

# faiss-gpu (faiss/gpu/GpuCloner.cpp, ToGpuCloner::clone_Index) has a GPU index for these CPU
# types and throws "This index type is not implemented on GPU" for any other (plain
# IndexScalarQuantizer such as SQ8, HNSW, IndexPQ, the fast-scan and refine indexes ...).
# IndexPreTransform and IndexIDMap stay on the CPU around a GPU copy of what they wrap.
_GPU_FLAT = ("IndexFlat", "IndexFlatIP", "IndexFlatL2")
_GPU_IVF = ("IndexIVFFlat", "IndexIVFScalarQuantizer", "IndexIVFPQ")
# GpuIndexIVFScalarQuantizer's types (faiss/gpu/impl/GpuScalarQuantizer.cuh, isSQSupported)
_GPU_SQ = ("QT_8bit", "QT_8bit_uniform", "QT_8bit_direct", "QT_4bit", "QT_4bit_uniform", "QT_6bit", "QT_fp16")
# GpuIndexIVFPQ's bytes per code (faiss/gpu/impl/IVFPQ.cu, isSupportedPQCodeLength); above 48
# only with fp16 lookup tables, which the cloner options below ask for.
_GPU_PQ_M = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96)


def _unwrap(index):
    """The index an IndexPreTransform (PCA, OPQ) or IndexIDMap wraps, all the way down."""
    faiss = _faiss()
    index = faiss.downcast_index(index)
    while isinstance(index, (faiss.IndexPreTransform, faiss.IndexIDMap)):
        index = faiss.downcast_index(index.index)
    return index


def faiss_gpu_support(index) -> tuple[bool, str]:
    """Whether faiss-gpu can hold ``index`` (``(True, what it becomes)``) or not (``(False,
    why)``): Flat, SQfp16, and IVF-Flat, IVF-SQ and IVF-PQ over a flat coarse quantizer (the
    GPU indexes FAISS has: GpuIndexFlat, GpuIndexIVFFlat, GpuIndexIVFScalarQuantizer,
    GpuIndexIVFPQ), within the IVF-PQ sizes GpuIndexIVFPQ takes."""
    faiss = _faiss()
    inner = _unwrap(index)
    name = type(inner).__name__
    if name in _GPU_FLAT:
        return True, "GpuIndexFlat, vectors in fp16"
    if name == "IndexScalarQuantizer":
        if inner.sq.qtype == faiss.ScalarQuantizer.QT_fp16:
            return True, "GpuIndexFlat, vectors in fp16"
        return False, ("IndexScalarQuantizer (SQ8, SQ4, ...) has no GPU index in FAISS (faiss-gpu holds SQ codes "
                       "only inside IVF lists, IVF<n>,SQ8)")
    if name not in _GPU_IVF:
        return False, (f"{name} has no GPU index in FAISS (faiss-gpu holds Flat, IVF-Flat, IVF-SQ and IVF-PQ; "
                       "HNSW, PQ and SQ8 without IVF stay on the CPU)")
    quantizer = type(faiss.downcast_index(inner.quantizer)).__name__
    if quantizer not in _GPU_FLAT:
        return False, f"its coarse quantizer ({quantizer}) has no GPU index (IVF<n>,... over a flat one has)"
    if name == "IndexIVFScalarQuantizer":
        qtype = next((q for q in _GPU_SQ if inner.sq.qtype == getattr(faiss.ScalarQuantizer, q, None)), None)
        if qtype is None:
            return False, "faiss-gpu's IVF-SQ has no GPU code for this scalar quantizer type"
        return True, "GpuIndexIVFScalarQuantizer"
    if name == "IndexIVFPQ":
        pq = inner.pq
        if pq.nbits != 8:
            return False, f"faiss-gpu's IVF-PQ takes 8-bit codes only, and this one has {pq.nbits}"
        if pq.M not in _GPU_PQ_M or inner.d % pq.M:
            return False, f"faiss-gpu's IVF-PQ takes {', '.join(map(str, _GPU_PQ_M))} sub-quantizers, and this one has {pq.M}"
        if not inner.by_residual or inner.polysemous_ht:
            return False, "faiss-gpu's IVF-PQ takes residual codes without polysemous filtering only"
        return True, "GpuIndexIVFPQ, fp16 lookup tables"
    return True, "GpuIndexIVFFlat"


def _to_faiss_gpus(index, what: str):
    """``index`` cloned to every GPU faiss-gpu sees (sharded over them; Flat vectors and IVF-PQ
    lookup tables in fp16, as faiss-gpu's useFloat16), or the index itself, on the CPU, with a
    warning saying why, where faiss-gpu has no GPU index for it or its cloner throws."""
    faiss = _faiss()
    ok, why = faiss_gpu_support(index)
    if not ok:
        log.warning("%s stays on the CPU: %s", what, why)
        return index
    co = faiss.GpuMultipleClonerOptions()
    co.shard = True  # each GPU holds 1/n of the vectors (Flat) or of the lists' entries (IVF)
    co.useFloat16 = True  # GpuIndexFlat stores fp16; GpuIndexIVFPQ fp16 lookup tables (IVF-Flat/SQ: no effect)
    try:
        gpu = faiss.index_cpu_to_all_gpus(index, co=co)
    except RuntimeError as e:
        log.warning("%s stays on the CPU: faiss-gpu's cloner refused it: %s", what, _faiss_message(e))
        return index
    log.info("%s: searched with FAISS GPU indexes on %d GPU(s) (%s, sharded)", what, faiss.get_num_gpus(), why)
    return gpu


def torch_cuda_available() -> bool:
    """Whether torch is installed and sees a CUDA GPU (False without torch). Without a GPU driver
    on the machine torch is not imported, which would cost the search job seconds of CPU."""
    if not gpu_driver_present():
        return False
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# The device the torch path searches on; tests set "cpu" (which needs no CUDA) to run it here.
TORCH_DEVICE = "cuda"


def torch_support(index) -> tuple[bool, str]:
    """Whether :class:`TorchFlatIndex` can search ``index``: a plain Flat index (inner product
    or L2), nothing wrapped around it."""
    faiss = _faiss()
    inner = faiss.downcast_index(index)
    name = type(inner).__name__
    if name not in _GPU_FLAT:
        return False, (f"it is a {name}, and torch searches Flat indexes only (exact search; "
                       "index.factory: Flat)")
    if inner.metric_type not in (faiss.METRIC_INNER_PRODUCT, faiss.METRIC_L2):
        return False, "its metric is neither inner product nor L2"
    return True, "Flat"


def place_index(index, use_gpu: bool | str = "auto", what: str = "the index"):
    """Where a loaded CPU index is searched, as ``index.gpu`` (``use_gpu``) says:

    - ``False``: faiss on the CPU, ``index`` itself.
    - ``True``: faiss-gpu, on every GPU it sees (:func:`_to_faiss_gpus`); an index it cannot
      hold stays on the CPU with a warning; no GPU in faiss is an :class:`InputError`.
    - ``"torch"``: a Flat index searched exactly in torch on CUDA (:class:`TorchFlatIndex`,
      fp16 vectors, fp32 scores), for a CUDA torch beside faiss-cpu; any other index stays
      with faiss on the CPU, with a warning; no CUDA in torch is an :class:`InputError`.
    - ``"auto"``: faiss-gpu where faiss sees a GPU; else torch where the index is Flat and
      torch sees CUDA; else faiss on the CPU.
    """
    if use_gpu not in GPU_MODES or (isinstance(use_gpu, int) and not isinstance(use_gpu, bool)):  # 1 == True
        raise InputError("config: index.gpu", f"expected one of {', '.join(map(str, GPU_MODES))}, found {use_gpu!r}")
    if use_gpu is False:
        return index
    if use_gpu is True or (use_gpu == "auto" and gpu_available()):
        if not gpu_available():
            raise InputError("config: index.gpu", "true asks for faiss-gpu's GPUs and faiss sees none (faiss-cpu, "
                                                  "or no GPU visible); set it to auto, torch (exact search of Flat "
                                                  "indexes in torch on CUDA) or false")
        return _to_faiss_gpus(index, what)
    # "torch", or "auto" without faiss-gpu
    cuda = TORCH_DEVICE != "cuda" or torch_cuda_available()
    if not cuda:
        if use_gpu == "torch":
            raise InputError("config: index.gpu", "torch asks for exact search in torch on CUDA and torch sees no "
                                                  "CUDA GPU; set it to auto or false")
        return index
    ok, why = torch_support(index)
    if not ok:
        (log.warning if use_gpu == "torch" else log.info)(
            "%s stays with faiss on the CPU: %s", what, why)
        return index
    try:
        placed = TorchFlatIndex(index, device=TORCH_DEVICE)
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
        log.warning("%s stays with faiss on the CPU: torch could not place it on %s: %s", what, TORCH_DEVICE,
                    str(e).splitlines()[0] if str(e) else type(e).__name__)
        return index
    log.info("%s: searched exactly in torch on %s (%d vectors, %s, fp32 scores)", what, placed.device,
             placed.ntotal, str(placed.dtype).removeprefix("torch."))
    return placed


# FLT_MAX: FAISS's score where a search finds fewer than k hits (-FLT_MAX for inner product)
_FLT_MAX = float(np.finfo(np.float32).max)


class TorchFlatIndex:
    """Exact search of a FAISS Flat index in torch: faiss-gpu's ``Flat`` for a machine whose FAISS
    has no GPU build (a CUDA torch beside faiss-cpu).

    The vectors are read from the index itself (``get_xb``, no copy) and held on ``device`` in
    blocks of ``chunk_rows``: on CUDA in fp16, as faiss-gpu's ``useFloat16`` (half the memory;
    scores in fp32, the product accumulated in fp32 by ``torch.mm(..., out_dtype=float32)``,
    or, with a torch that lacks it, vectors and product in fp32), elsewhere in fp32. Queries are
    searched ``query_batch`` at a time; each block's top k (``torch.topk``) is merged into the
    running top k, so memory beyond the vectors is one ``[query_batch, chunk_rows]`` fp32 block.

    Searched as the FAISS index is: ``ntotal``, ``d``, ``metric_type`` and ``search(x, k) ->
    (scores [n, k] float32, rows [n, k] int64)``, best first (inner product: largest; L2: the
    smallest squared distance), rows -1 and scores -FLT_MAX (L2: FLT_MAX) past ``ntotal``.
    """

    def __init__(self, index, device: str = "cuda", chunk_rows: int = 1 << 18, query_batch: int = 1024):
        import torch

        faiss = _faiss()
        flat = faiss.downcast_index(index)
        ok, why = torch_support(flat)
        if not ok:
            raise ValueError(f"TorchFlatIndex: {why}")
        self.d, self.ntotal, self.metric_type = int(flat.d), int(flat.ntotal), flat.metric_type
        self.ip = self.metric_type == faiss.METRIC_INNER_PRODUCT
        self.device = torch.device(device)
        self.chunk_rows, self.query_batch = int(chunk_rows), int(query_batch)
        self.dtype = torch.float32
        if self.device.type == "cuda":
            self.dtype = torch.float16 if self._mm_out_fp32() else torch.float32
            if self.dtype == torch.float32:
                log.info("torch %s has no torch.mm(..., out_dtype=float32) on CUDA: vectors held in fp32",
                         torch.__version__)
        xb = (faiss.rev_swig_ptr(flat.get_xb(), self.ntotal * self.d).reshape(self.ntotal, self.d)
              if self.ntotal else np.empty((0, self.d), dtype=np.float32))
        # on the CPU the blocks are views of the index's own memory: keep it alive (``index``
        # owns the C++ object; ``flat`` is a second proxy of it that may not)
        self._owner = (index, flat) if self.device.type == "cpu" else None
        self._load(xb)
        if self.dtype == torch.float16 and not all(bool(torch.isfinite(c).all()) for c in self.chunks):
            log.warning("a vector component exceeds fp16's range (65504): vectors held in fp32")
            self.dtype = torch.float32
            self._load(xb)

    def _mm_out_fp32(self) -> bool:
        import torch

        a = torch.ones((2, 2), dtype=torch.float16, device=self.device)
        try:
            return torch.mm(a, a, out_dtype=torch.float32).dtype == torch.float32
        except (TypeError, RuntimeError, NotImplementedError):
            return False

    def _load(self, xb: np.ndarray) -> None:
        import torch

        self.starts, self.chunks, self.norms = [], [], []
        for i in range(0, self.ntotal, self.chunk_rows):
            chunk = torch.from_numpy(xb[i : i + self.chunk_rows]).to(self.device, self.dtype)
            self.starts.append(i)
            self.chunks.append(chunk)
            if not self.ip:  # ||x||^2 of the vectors as held
                self.norms.append(chunk.float().pow(2).sum(1))

    def _scores(self, q, chunk):
        import torch

        if self.dtype == torch.float16:
            return torch.mm(q, chunk.T, out_dtype=torch.float32)
        return q @ chunk.T

    def search(self, x, k: int):
        import torch

        x = np.ascontiguousarray(x, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"queries of shape {x.shape} for an index of dimension {self.d}")
        k = int(k)
        scores = np.full((len(x), k), -_FLT_MAX if self.ip else _FLT_MAX, dtype=np.float32)
        rows = np.full((len(x), k), -1, dtype=np.int64)
        kk = min(k, self.ntotal)
        if not len(x) or kk <= 0:
            return scores, rows
        with torch.inference_mode():
            for b in range(0, len(x), self.query_batch):
                q = torch.from_numpy(x[b : b + self.query_batch]).to(self.device, self.dtype)
                qn = q.float().pow(2).sum(1, keepdim=True) if not self.ip else None
                best_s = best_r = None
                for c, (start, chunk) in enumerate(zip(self.starts, self.chunks)):
                    s = self._scores(q, chunk)
                    if not self.ip:
                        s = (qn + self.norms[c][None, :] - 2 * s).clamp_(min=0)
                    v, r = torch.topk(s, min(kk, chunk.shape[0]), dim=1, largest=self.ip, sorted=False)
                    r += start
                    if best_s is not None:  # merge into the running top k
                        v, r = torch.cat([best_s, v], 1), torch.cat([best_r, r], 1)
                        v, j = torch.topk(v, min(kk, v.shape[1]), dim=1, largest=self.ip, sorted=False)
                        r = torch.gather(r, 1, j)
                    best_s, best_r = v, r
                v, j = torch.sort(best_s, dim=1, descending=self.ip)
                scores[b : b + len(q), :kk] = v.float().cpu().numpy()
                rows[b : b + len(q), :kk] = torch.gather(best_r, 1, j).cpu().numpy()
        return scores, rows


def load_npy(path: str | os.PathLike, ndim: int | None = None, mmap_mode: str | None = None) -> np.ndarray:
    """``np.load`` of an embedding shard file, its checksum verified (:mod:`dcsr.integrity`; one
    without is read with a warning); a truncated, foreign or changed file (or an array of the
    wrong rank) is an :class:`InputError` naming it."""
    if not os.path.isfile(path):
        raise InputError(str(path), "no such .npy file")
    try:
        arr, verified = load_array(path, RERUN_NPY, mmap_mode)  # read once, hashed as read
    except InputError:
        raise
    except (ValueError, EOFError, OSError) as e:
        log.debug("np.load(%s): %s", path, e)
        raise InputError(str(path), f"not a readable .npy array (truncated or corrupt); {RERUN_NPY}") from None
    if not verified:
        log.warning("%s has no checksum (not written by dcsr's embedding step); read unverified", path)
    if ndim is not None and arr.ndim != ndim:
        raise InputError(str(path), f"holds an array of shape {arr.shape}; expected {ndim} dimensions")
    return arr


def index_shard(vectors_npy: str | os.PathLike, out_index: str | os.PathLike, factory: str = "Flat",
                train_size: int | None = None, seed: int = 0) -> dict:
    vecs = load_npy(vectors_npy, ndim=2, mmap_mode="r")
    index = build_index(vecs, factory, train_size=train_size, seed=seed, where=str(vectors_npy))
    write_index(index, out_index)
    return {"vectors": int(index.ntotal), "dim": int(vecs.shape[1]) if vecs.ndim == 2 else 0, "factory": factory}


def search_shard(index_path: str | os.PathLike, ids_npy: str | os.PathLike, queries_npy: str | os.PathLike,
                 out_npz: str | os.PathLike, k: int, use_gpu: bool | str = "auto", batch_size: int = 4096,
                 progress: bool = True, search_params: str = "") -> dict:
    """Top-``k`` of every query in one shard. Writes ``scores`` ``[Q, k]`` (float32) and
    ``ids`` ``[Q, k]`` (int64 passage ids; -1 where the shard has fewer than ``k`` vectors, or
    where an approximate index found fewer, as IVF with a small ``nprobe``)."""
    return search_shard_many(index_path, ids_npy, [(queries_npy, out_npz)], k, use_gpu, batch_size, progress,
                             search_params)[0]


def search_shard_many(index_path: str | os.PathLike, ids_npy: str | os.PathLike,
                      searches: Sequence[tuple[str | os.PathLike, str | os.PathLike]], k: int,
                      use_gpu: bool | str = "auto", batch_size: int = 4096, progress: bool = True,
                      search_params: str = "") -> list[dict]:
    """:func:`search_shard` for several ``(queries .npy, output .npz)`` pairs, loading the shard
    index once: every question encoder and test set searched against one passage encoder's
    shard (at 21M passages, reading a shard index costs far more than searching it). With
    ``progress``, a tqdm bar per question set on stderr advances once per query batch.
    ``search_params``: ``index.search_params`` (:func:`set_search_params`)."""
    index = read_index(index_path, use_gpu=use_gpu, search_params=search_params)
    ids = load_npy(ids_npy, ndim=1)
    check_ids(ids, ids_npy, index, index_path)
    return [_search_loaded(index, ids, queries_npy, out_npz, k, batch_size, progress)
            for queries_npy, out_npz in searches]


def check_ids(ids: np.ndarray, ids_npy, index, index_path) -> None:
    """A shard's ids must name every vector of its index, one id per vector."""
    if index.ntotal != len(ids):
        raise InputError(str(ids_npy), f"has {len(ids)} ids but the index {index_path} holds {index.ntotal} vectors; "
                                       "the two files come from different runs of the shard: embed and index it again")


def search_index(index, ids: np.ndarray, q: np.ndarray, k: int, batch_size: int = 4096,
                 where: str = "queries", progress: bool = False, desc: str = "search") -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of every query ``q [Q, d]`` in one loaded shard index: ``(scores [Q, k] float32,
    ids [Q, k] int64)``, ``ids`` mapping the index's rows (-1 and -inf where the shard has
    fewer than ``k`` vectors). ``where`` names the queries in errors; with ``progress`` a tqdm
    bar (stderr, ``desc``) counts the questions searched, one update per batch. Off by default:
    callers that batch themselves (dcsr.retrieval.mining) keep their own bar."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    if q.ndim != 2 or (len(q) and index.ntotal and q.shape[1] != index.d):
        raise InputError(where, f"holds vectors of shape {q.shape}; the index has dimension {index.d}")
    kk = min(k, max(int(index.ntotal), 1))
    scores = np.full((len(q), k), -np.inf, dtype=np.float32)
    rows = np.full((len(q), k), -1, dtype=np.int64)
    bar = tqdm(total=len(q), desc=desc, unit=" questions", disable=not progress, mininterval=2.0)
    for i in range(0, len(q), batch_size):
        if index.ntotal == 0:
            break
        s, r = index.search(q[i : i + batch_size], kk)
        s[r < 0] = -np.inf  # a hit an approximate index did not find (FAISS: -3.4e38)
        scores[i : i + batch_size, :kk] = s
        rows[i : i + batch_size, :kk] = r
        bar.update(len(s))
    bar.close()
    hit_ids = np.where(rows >= 0, ids[np.clip(rows, 0, None)] if len(ids) else -1, -1)
    return scores, hit_ids.astype(np.int64)


def _search_loaded(index, ids: np.ndarray, queries_npy, out_npz, k: int, batch_size: int,
                   progress: bool = True) -> dict:
    q = load_npy(queries_npy)
    name = Path(queries_npy)
    scores, hit_ids = search_index(index, ids, q, k, batch_size, where=str(queries_npy), progress=progress,
                                   desc=f"search {name.parent.name}/{name.name}")
    with atomic_path(out_npz, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, scores=scores, ids=hit_ids.astype(np.int64))
        seal(tmp)
    return {"queries": int(len(q)), "k": k, "vectors": int(index.ntotal)}


def merge_topk(shard_scores: Sequence[np.ndarray], shard_ids: Sequence[np.ndarray], k: int):
    """Exact top-``k`` over shards: ``(scores [Q, k], ids [Q, k])``, best first.

    Ties are broken by the smaller passage id, so the merged ranking does not depend on
    how the corpus was sharded. Missing hits (id -1, score -inf) sort last.
    """
    scores = np.concatenate(shard_scores, axis=1)
    ids = np.concatenate(shard_ids, axis=1)
    # lexsort sorts by the last key first: score descending, then id ascending.
    order = np.lexsort((ids, -scores), axis=1)[:, :k]
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(ids, order, axis=1)


RESEARCH_SHARD = "delete it and search the shard again"


def load_hits(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, ids)`` of a search job's hits file, read once and its checksum checked (one
    without is read with a warning); a truncated, foreign or changed file is an
    :class:`InputError` naming it."""
    try:
        buf, verified = read_verified(path, RESEARCH_SHARD)
        with np.load(io.BytesIO(buf), allow_pickle=False) as z:
            scores, ids = z["scores"], z["ids"]
    except InputError:
        raise
    except (ValueError, EOFError, OSError, KeyError, zipfile.BadZipFile) as e:
        log.debug("np.load(%s): %s", path, e)
        raise InputError(str(path), f"not a readable shard hits file (truncated or corrupt); {RESEARCH_SHARD}") from None
    if not verified:
        warn_unverified(path, RESEARCH_SHARD)
    return scores, ids


def merge_shard_hits(shard_npzs: Sequence[str | os.PathLike], k: int):
    hits = [load_hits(path) for path in shard_npzs]
    return merge_topk([s for s, _ in hits], [i for _, i in hits], k)


def topk_to_run(scores: np.ndarray, ids: np.ndarray) -> dict[int, list[tuple[int, float]]]:
    return {
        q: [(int(i), float(s)) for i, s in zip(ids[q], scores[q]) if i >= 0]
        for q in range(len(ids))
    }
