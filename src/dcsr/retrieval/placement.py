"""Where a loaded FAISS shard index is searched: ``index.gpu`` (:func:`place_index`).

faiss-gpu for the index types it has GPU indexes for (Flat, IVF-Flat, IVF-SQ, IVF-PQ; sharded
over the GPUs, Flat in fp16), exact search in torch on CUDA for a Flat index where FAISS has no
GPU build (:class:`TorchFlatIndex`), or FAISS on the CPU, which is also where an index neither
can hold (SQ8, HNSW32) stays, with a log line. Each is searched as the CPU index is
(``search(x, k) -> (scores, rows)``), so the search jobs' hits files keep one layout. Also the
lazy FAISS import and its readable error messages, which :mod:`dcsr.retrieval.index` shares.
"""

from __future__ import annotations

import logging
import re

import numpy as np

from dcsr.drivers import gpu_driver_present
from dcsr.errors import InputError
from dcsr.settings import INDEX_GPU

log = logging.getLogger(__name__)


def load_faiss():
    """The ``faiss`` module, imported when a job first needs it (not when this module is)."""
    import faiss

    return faiss


def gpu_available() -> bool:
    """Whether this FAISS is a GPU build and sees a GPU."""
    faiss = load_faiss()
    return hasattr(faiss, "get_num_gpus") and faiss.get_num_gpus() > 0


def faiss_message(e: Exception) -> str:
    """The readable end of a FAISS C++ exception (no function signature, no source line)."""
    text = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
    m = re.search(r"failed: (.+)$", text) or re.search(r"at \S+:\d+: (?:Error: )?(.+)$", text)
    return m.group(1).strip() if m else text


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
    """The index an IndexPreTransform (PCA, OPQ) or IndexIDMap wraps, all the way down (an object
    that is no FAISS index, as it is)."""
    faiss = load_faiss()
    try:
        index = faiss.downcast_index(index)
    except (AttributeError, RuntimeError, TypeError):
        return index
    while isinstance(index, (faiss.IndexPreTransform, faiss.IndexIDMap)):
        index = faiss.downcast_index(index.index)
    return index


def faiss_gpu_support(index) -> tuple[bool, str]:
    """Whether faiss-gpu can hold ``index`` (``(True, what it becomes)``) or not (``(False,
    why)``): Flat, SQfp16, and IVF-Flat, IVF-SQ and IVF-PQ over a flat coarse quantizer (the
    GPU indexes FAISS has: GpuIndexFlat, GpuIndexIVFFlat, GpuIndexIVFScalarQuantizer,
    GpuIndexIVFPQ), within the IVF-PQ sizes GpuIndexIVFPQ takes."""
    faiss = load_faiss()
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
    faiss = load_faiss()
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
        log.warning("%s stays on the CPU: faiss-gpu's cloner refused it: %s", what, faiss_message(e))
        return index
    on_cpu = _cpu_parts(gpu)
    if on_cpu:  # FAISS's multi-GPU cloner shards Flat and IVF only; others come back as CPU copies, silently
        log.warning("%s stays on the CPU: faiss-gpu's cloner for %d GPUs returned a CPU index (%s)", what,
                    faiss.get_num_gpus(), ", ".join(on_cpu))
        return index
    log.info("%s: searched with FAISS GPU indexes on %d GPU(s) (%s, sharded)", what, faiss.get_num_gpus(), why)
    return gpu


#: faiss-gpu's k-selection limit (GPU_MAX_SELECTION_K, faiss/gpu/utils/DeviceDefs.cuh): a GPU
#: index returns at most this many hits a query and throws for a larger k. A build with cuVS
#: selects up to 16,384; which one runs cannot be read from Python, so the smaller is assumed.
FAISS_GPU_MAX_K = 2048


def max_search_k(index) -> int | None:
    """The most hits a query one search of a loaded index can return: :data:`FAISS_GPU_MAX_K`
    for a faiss-gpu index (or one wrapped, sharded or replicated), None (no limit) for faiss on
    the CPU and for :class:`TorchFlatIndex`."""
    if isinstance(index, TorchFlatIndex):
        return None
    return FAISS_GPU_MAX_K if any(n.startswith("Gpu") for n in _faiss_parts(_unwrap(index))) else None


def _cpu_parts(index) -> list[str]:
    """The class names of a cloned FAISS index (or of the shards or replicas it holds,
    :func:`_faiss_parts`) when none of them is a GPU index; empty when one is, or when ``index``
    is no FAISS index."""
    inner = _unwrap(index)
    if not isinstance(inner, load_faiss().Index):
        return []
    names = _faiss_parts(inner)
    return [] if any(n.startswith("Gpu") for n in names) else names


def _faiss_parts(index) -> list[str]:
    """The class names of a FAISS index (downcast), or of each part of one sharded or replicated
    over GPUs (``IndexShards``, ``IndexReplicas``); none where the parts cannot be read."""
    faiss = load_faiss()
    try:
        index = faiss.downcast_index(index)
    except (AttributeError, RuntimeError, TypeError):
        pass
    name = type(index).__name__
    if not name.startswith(("IndexShards", "IndexReplicas")):
        return [name]
    try:
        return [type(faiss.downcast_index(index.at(i))).__name__ for i in range(index.count())]
    except (AttributeError, RuntimeError, TypeError):
        return []


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
    faiss = load_faiss()
    inner = faiss.downcast_index(index)
    name = type(inner).__name__
    if name not in _GPU_FLAT:
        return False, (f"it is a {name}, and torch searches Flat indexes only (exact search; "
                       "index.factory: Flat)")
    if inner.metric_type not in (faiss.METRIC_INNER_PRODUCT, faiss.METRIC_L2):
        return False, "its metric is neither inner product nor L2"
    return True, "Flat"


def place_index(index, use_gpu: bool | str = "auto", what: str = "the index", depth: int | None = None):
    """Where a loaded CPU index is searched, as ``index.gpu`` (``use_gpu``) says:

    - ``False``: faiss on the CPU, ``index`` itself.
    - ``True``: faiss-gpu, on every GPU it sees (:func:`_to_faiss_gpus`); an index it cannot
      hold stays on the CPU with a warning; no GPU in faiss is an :class:`InputError`.
    - ``"torch"``: a Flat index searched exactly in torch on CUDA (:class:`TorchFlatIndex`,
      fp16 vectors, fp32 scores), for a CUDA torch beside faiss-cpu; any other index stays
      with faiss on the CPU, with a warning; no CUDA in torch is an :class:`InputError`.
    - ``"auto"``: faiss-gpu where faiss sees a GPU; else torch where the index is Flat and
      torch sees CUDA; else faiss on the CPU.

    ``depth``: the most hits a query the caller will ask for in one search. Past
    :data:`FAISS_GPU_MAX_K` faiss-gpu would throw, so under ``True`` or ``"auto"`` the index
    goes to torch (a Flat index, where torch sees CUDA) or stays on the CPU, with a warning.
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
        if depth is None or depth <= FAISS_GPU_MAX_K:
            return _to_faiss_gpus(index, what)
        log.warning("%s is not searched with faiss-gpu: it returns at most %d hits a query, and this search asks "
                    "for %d; it goes to torch on CUDA if it is Flat, else stays on the CPU", what, FAISS_GPU_MAX_K,
                    depth)
        use_gpu = "auto"
    # "torch", or "auto" without faiss-gpu (or past its depth)
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

        faiss = load_faiss()
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
