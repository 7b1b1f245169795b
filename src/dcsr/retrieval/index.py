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

Where a shard is searched is ``index.gpu``: :func:`dcsr.retrieval.placement.place_index` places
the index :func:`read_index` loads on faiss-gpu, torch on CUDA or the CPU, each searched as the
CPU index is, so the hits files keep one layout.
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

from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import VerifiedReader, load_array, read_verified, seal, warn_unverified
from dcsr.retrieval.placement import _faiss_parts, _unwrap, faiss_message, load_faiss, max_search_k, place_index

log = logging.getLogger(__name__)


def build_index(vectors: np.ndarray, factory: str = "Flat", train_size: int | None = None, seed: int = 0,
                where: str = "the shard"):
    """A FAISS inner-product index over ``vectors`` ``[n, d]`` (float32 internally).

    Factories that need training (IVF, PQ, ...) are trained on a seeded sample of at most
    ``train_size`` vectors of the shard itself. One that needs more training vectors than that
    (IVF1024 on 300 vectors, PQ's 256 centroids on 100) is an :class:`InputError` naming
    ``config: index.factory`` and both numbers; too few per cluster for k-means to be good
    (FAISS asks for 39) is a warning. ``where`` names the vectors in messages.
    """
    faiss = load_faiss()
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
    faiss = load_faiss()
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
        msg = faiss_message(e)
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


def parse_search_params(search_params: str) -> list[tuple[str, float]]:
    """``[(name, value)]`` of a ParameterSpace string (``index.search_params``); a malformed one is
    an :class:`InputError` naming the config key."""
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
    faiss = load_faiss()
    space = faiss.ParameterSpace()
    for name, value in parse_search_params(search_params):
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
    faiss = load_faiss()
    with atomic_path(path, suffix=".faiss") as tmp:
        faiss.write_index(index, str(tmp))
        seal(tmp)


def read_index(path: str | os.PathLike, use_gpu: bool | str = "auto", search_params: str = "",
               k: int | None = None):
    """A FAISS index from ``path``, its checksum verified; a missing, truncated, corrupt or
    changed file is an :class:`InputError`. ``search_params`` (:func:`set_search_params`) are
    set before the index is copied to GPUs, which copy them (``nprobe``). ``use_gpu`` is
    ``index.gpu`` (:func:`place_index`): what comes back may be a faiss-gpu index or a
    :class:`TorchFlatIndex`, both searched as the CPU index is. ``k``: the top-k that
    :func:`search_index` will ask of it, so that an index is not placed where it cannot
    search that deep (faiss-gpu: :data:`FAISS_GPU_MAX_K`)."""
    faiss = load_faiss()
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
    # the depth asked of every shard of a run alike (k, one more on an exact index), not capped at
    # this shard's size: the shards of one run are searched in one place (check_one_placement)
    return place_index(index, use_gpu, f"the index {path}", None if k is None else k + exact_flat(index))


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
    index = read_index(index_path, use_gpu=use_gpu, search_params=search_params, k=k)
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
    callers that batch themselves (dcsr.retrieval.mining) keep their own bar.

    Equal scores are ordered by the smaller passage id, and with an exact (Flat) index so is the
    cut: where the k-th and the (k+1)-th score are equal, the query is searched deeper until the
    tie ends, and the hits with the smallest ids are kept. Which of several equal vectors an
    index returns otherwise follows its row order (faiss on the CPU), or the GPU's kernel
    (faiss-gpu, ``torch.topk``), so a shard whose ids do not rise with its rows, or a GPU, could
    give :func:`merge_topk` a different top-k for another sharding or another run."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    if q.ndim != 2 or (len(q) and index.ntotal and q.shape[1] != index.d):
        raise InputError(where, f"holds vectors of shape {q.shape}; the index has dimension {index.d}")
    ntotal = int(index.ntotal)
    kk = min(k, max(ntotal, 1))
    probe = probe_depth(index, kk)
    limit = max_search_k(index)
    if limit is not None and kk > limit:
        raise ValueError(f"{where}: top {kk} asked of an index that returns at most {limit} hits a query "
                         "(faiss-gpu); read it with read_index(..., k=...) to have it placed where it can")
    probe = min(probe, limit or probe)  # at faiss-gpu's limit exactly: no probe, the cut follows the GPU
    scores = np.full((len(q), k), -np.inf, dtype=np.float32)
    out_ids = np.full((len(q), k), -1, dtype=np.int64)
    bar = tqdm(total=len(q), desc=desc, unit=" questions", disable=not progress, mininterval=2.0)
    for i in range(0, len(q), batch_size):
        if ntotal == 0:
            break
        qb = q[i : i + batch_size]
        s, r = index.search(qb, probe)
        s, h = _hit_ids(s, r, ids)
        if probe > kk:
            tied = np.flatnonzero(np.isfinite(s[:, kk]) & (s[:, kk] == s[:, kk - 1]))
            if len(tied):
                s, h = _deepen_ties(index, ids, qb, s, h, tied, kk, ntotal)
        order = np.lexsort((h, -s), axis=1)[:, :kk]  # score descending, then the smaller id
        scores[i : i + batch_size, :kk] = np.take_along_axis(s, order, axis=1)
        out_ids[i : i + batch_size, :kk] = np.take_along_axis(h, order, axis=1)
        bar.update(len(s))
    bar.close()
    return scores, out_ids


def probe_depth(index, k: int) -> int:
    """The hits a query :func:`search_index` first asks of ``index`` for its top ``k``: one more
    on an exact Flat index with more than ``k`` vectors (is the cut inside a tie?), else ``k``."""
    k = min(k, max(int(index.ntotal), 1))
    return k + 1 if k < index.ntotal and exact_flat(index) else k


def _hit_ids(s: np.ndarray, r: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An index's ``(scores, rows)`` as ``(scores, passage ids)``: a hit an approximate index did
    not find (row -1; FAISS scores it -3.4e38) becomes -inf and id -1."""
    s = np.where(r < 0, -np.inf, s).astype(np.float32)
    h = np.where(r >= 0, ids[np.clip(r, 0, None)] if len(ids) else -1, -1).astype(np.int64)
    return s, h


def _deepen_ties(index, ids, qb, s, h, tied, kk: int, ntotal: int):
    """Search the queries ``tied`` (whose k-th and (k+1)-th scores are equal) deeper, doubling the
    depth until the last hit scores below the k-th or the shard is exhausted, so that every hit
    tied with the k-th is among the candidates; returns ``(scores, ids)`` padded to one width.
    faiss-gpu stops at :data:`FAISS_GPU_MAX_K` hits: a tie running past it is cut there, in the
    GPU's order, with a warning."""
    depth, width = s.shape[1], s.shape[1]
    limit = min(ntotal, max_search_k(index) or ntotal)
    got: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    rows = tied
    while len(rows):
        depth = min(2 * depth, limit)
        s2, h2 = _hit_ids(*index.search(qb[rows], depth), ids)
        boundary = s[rows, kk - 1]
        done = (depth >= limit) | (s2[:, -1] < boundary)
        cut = int(np.sum(done & (depth < ntotal) & (s2[:, -1] >= boundary)))
        if cut:
            log.warning("%d queries have hits tied with their top-%d's last score past the %d hits faiss-gpu "
                        "returns a query: which of the tied hits are kept follows the GPU's order, not the smaller "
                        "passage id (index.gpu: torch or false search the whole tie)", cut, kk, depth)
        for j in np.flatnonzero(done):
            got[int(rows[j])] = (s2[j], h2[j])
        rows = rows[~done]
        width = max(width, depth)
    s_all = np.full((len(s), width), -np.inf, dtype=np.float32)
    h_all = np.full((len(s), width), -1, dtype=np.int64)
    s_all[:, : s.shape[1]], h_all[:, : s.shape[1]] = s, h
    for row, (s2, h2) in got.items():
        s_all[row], h_all[row] = -np.inf, -1
        s_all[row, : len(s2)], h_all[row, : len(h2)] = s2, h2
    return s_all, h_all


def exact_flat(index) -> bool:
    """Whether a loaded index searches every vector exactly (a FAISS ``Flat`` on the CPU or on
    GPUs, also sharded or replicated over GPUs, or :class:`TorchFlatIndex`): only there is
    searching one hit deeper the same search, a hit longer."""
    from dcsr.retrieval.placement import TorchFlatIndex

    if isinstance(index, TorchFlatIndex):
        return True
    parts = _faiss_parts(index)
    return bool(parts) and all(name.startswith(("IndexFlat", "GpuIndexFlat")) for name in parts)


def _search_loaded(index, ids: np.ndarray, queries_npy, out_npz, k: int, batch_size: int,
                   progress: bool = True) -> dict:
    q = load_npy(queries_npy)
    name = Path(queries_npy)
    scores, hit_ids = search_index(index, ids, q, k, batch_size, where=str(queries_npy), progress=progress,
                                   desc=f"search {name.parent.name}/{name.name}")
    where = placement_of(index)
    with atomic_path(out_npz, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, scores=scores, ids=hit_ids.astype(np.int64), placement=np.array(where))
        seal(tmp)
    return {"queries": int(len(q)), "k": k, "vectors": int(index.ntotal), "placement": where}


def placement_of(index) -> str:
    """Where, and so in what precision, a loaded index searches (recorded in each hits file):
    ``faiss-cpu`` (fp32), ``faiss-gpu`` (faiss-gpu, Flat vectors in fp16 as ``useFloat16``), or
    ``torch-<device>-<dtype of the vectors>`` (:class:`TorchFlatIndex`)."""
    from dcsr.retrieval.placement import TorchFlatIndex

    if isinstance(index, TorchFlatIndex):
        return f"torch-{index.device.type}-{str(index.dtype).removeprefix('torch.')}"
    # faiss-gpu's cloner keeps a pre-transform (OPQ, RR) and an IndexIDMap on the CPU, around the
    # GPU index or its IndexShards: the index under them is where the search runs
    parts = _faiss_parts(_unwrap(index))
    return "faiss-gpu" if parts and parts[0].startswith("Gpu") else "faiss-cpu"


def check_one_placement(paths: Sequence[str | os.PathLike], placements: Sequence[str | None]) -> None:
    """The shards of one merged run were searched in one place: a shard searched on a GPU (fp16
    vectors) and another on the CPU (fp32) score alike vectors differently, so the merge would
    rank two searches against each other (a cluster whose search jobs landed on GPU and CPU
    nodes under ``index.gpu: auto``). Hits files older than the record are not compared."""
    known = [(path, where) for path, where in zip(paths, placements) if where]
    for path, where in known[1:]:
        if where != known[0][1]:
            raise InputError(str(path), f"was searched on {where}, but {known[0][0]} on {known[0][1]}; the shards of "
                                        "one run are searched in one place, so that their scores rank alike: search "
                                        "them again with index.gpu set to true, torch or false (not auto)")


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


def load_hits(path: str | os.PathLike, with_placement: bool = False):
    """``(scores, ids)`` of a search job's hits file, read once and its checksum checked (one
    without is read with a warning); a truncated, foreign or changed file is an
    :class:`InputError` naming it. With ``with_placement``, ``(scores, ids, placement)``:
    where it was searched (:func:`placement_of`; None in a file older than the record)."""
    try:
        buf, verified = read_verified(path, RESEARCH_SHARD)
        with np.load(io.BytesIO(buf), allow_pickle=False) as z:
            scores, ids = z["scores"], z["ids"]
            where = str(z["placement"]) if "placement" in z.files else None
    except InputError:
        raise
    except (ValueError, EOFError, OSError, KeyError, zipfile.BadZipFile) as e:
        log.debug("np.load(%s): %s", path, e)
        raise InputError(str(path), f"not a readable shard hits file (truncated or corrupt); {RESEARCH_SHARD}") from None
    if not verified:
        warn_unverified(path, RESEARCH_SHARD)
    return (scores, ids, where) if with_placement else (scores, ids)


def load_shard_hits(shard_npzs: Sequence[str | os.PathLike]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every shard's ``(scores, ids)`` of one run, each file read once, searched in one place
    (:func:`check_one_placement`)."""
    hits = [load_hits(path, with_placement=True) for path in shard_npzs]
    check_one_placement(shard_npzs, [w for _, _, w in hits])
    return [(s, i) for s, i, _ in hits]


def merge_shard_hits(shard_npzs: Sequence[str | os.PathLike], k: int):
    hits = load_shard_hits(shard_npzs)
    return merge_topk([s for s, _ in hits], [i for _, i in hits], k)


def topk_to_run(scores: np.ndarray, ids: np.ndarray) -> dict[int, list[tuple[int, float]]]:
    return {
        q: [(int(i), float(s)) for i, s in zip(ids[q], scores[q]) if i >= 0]
        for q in range(len(ids))
    }
