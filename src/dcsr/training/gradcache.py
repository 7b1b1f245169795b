"""GradCache: exact large-batch in-batch-negative training in small memory chunks (Gao et al. 2021,
"Scaling Deep Contrastive Learning Batch Size under Memory Limited Setup").

Written here rather than taken from the ``gradcache`` PyPI package, which is unmaintained.

The loss of a bi-encoder batch couples every question with every passage, so the whole batch's
activations are normally held at once. GradCache splits the encoder from the loss in three
passes (:func:`grad_cache_step`):

1. every chunk of questions and passages is encoded without gradient (its RNG state kept,
   :class:`RandContext`), giving all vectors;
2. the loss is computed on those vectors, made leaves that require a gradient, and
   back-propagated to them: the gradient of the loss w.r.t. every vector is cached;
3. every chunk is encoded again with gradient, under the RNG state of its pass-1 encoding
   (dropout draws the same masks), and ``(vectors * cached gradient).sum()`` is
   back-propagated, which adds the chunk's share of the full-batch parameter gradient.

Chunks are rows of the tokenized question and passage dicts (:func:`chunk_rows`); a DCSR
batch's pooling keys (flat ``pool_positions`` / ``pool_ends`` ``b * L + t``, ``sentence_owner``,
``sentence_index``) are re-based to the chunk, and each chunk's vectors are put back at their
rows in the whole batch's order, which the loss targets index.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping

import torch
import torch.distributed as dist
from torch import Tensor

from dcsr.models.biencoder import MODEL_INPUTS

#: Pooling keys holding flat token indices ``b * L + t`` into the batch ``[B, L]``, one per vector.
FLAT_POSITION_KEYS = ("pool_positions", "pool_ends")
#: Pooling keys holding a row ``b`` of the batch, one per vector.
ROW_INDEX_KEYS = ("sentence_owner",)
#: Pooling keys holding a value per vector that does not depend on the rows around it.
VECTOR_KEYS = ("sentence_index",)


class RandContext:
    """The RNG state at construction (torch's CPU RNG and, on CUDA, ``device``'s), reinstated
    inside ``with``; on leaving, the RNG is back where it was before entering. As GradCache's
    ``RandContext``: a chunk encoded again under it draws the same dropout masks."""

    def __init__(self, device: torch.device | None = None):
        self.cuda_index = None
        if device is not None and device.type == "cuda":
            self.cuda_index = device.index if device.index is not None else torch.cuda.current_device()
        self.state = self._get()
        self._outer = None

    def _get(self):
        cuda = torch.cuda.get_rng_state(self.cuda_index) if self.cuda_index is not None else None
        return torch.get_rng_state(), cuda

    def _set(self, state) -> None:
        cpu, cuda = state
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state(cuda, self.cuda_index)

    def __enter__(self) -> "RandContext":
        self._outer = self._get()
        self._set(self.state)
        return self

    def __exit__(self, *exc) -> None:
        self._set(self._outer)
        self._outer = None


def _rows(batch: Mapping[str, Any]) -> int:
    return int(batch["input_ids"].shape[0])


def chunk_rows(batch: Mapping[str, Any], start: int, end: int) -> tuple[dict, Tensor]:
    """Rows ``[start, end)`` of a tokenized batch as a batch of their own, and the indices,
    among the vectors the whole batch pools to, of the vectors the chunk pools to (in the
    chunk's order).

    Model inputs are sliced by row (the padded length ``L`` is kept). Without
    ``pool_positions`` a row is one vector, so the indices are ``start .. end - 1``. With it
    (DCSR), the vectors are those whose position lies in rows ``[start, end)``;
    ``pool_positions`` / ``pool_ends`` are shifted by ``-start * L``, ``sentence_owner`` by
    ``-start``, and ``sentence_index`` is kept. A tensor under any other key is a
    ``ValueError``: how it would be chunked is not known here."""
    n = _rows(batch)
    if not 0 <= start <= end <= n:
        raise ValueError(f"rows [{start}, {end}) of a batch of {n}")
    positions = batch.get("pool_positions")
    if positions is None:
        picked = torch.arange(start, end, dtype=torch.long)
    else:
        length = int(batch["input_ids"].shape[1])
        owner = positions.long() // length
        picked = ((owner >= start) & (owner < end)).nonzero().squeeze(1)
    out: dict = {}
    for key, value in batch.items():
        if not isinstance(value, Tensor):
            out[key] = value
        elif key in MODEL_INPUTS:
            out[key] = value[start:end]
        elif positions is not None and key in FLAT_POSITION_KEYS:
            out[key] = value.index_select(0, picked.to(value.device)) - start * int(batch["input_ids"].shape[1])
        elif positions is not None and key in ROW_INDEX_KEYS:
            out[key] = value.index_select(0, picked.to(value.device)) - start
        elif positions is not None and key in VECTOR_KEYS:
            out[key] = value.index_select(0, picked.to(value.device))
        else:
            raise ValueError(f"GradCache cannot chunk the batch key {key!r}: it is neither a model input "
                             f"{MODEL_INPUTS} nor a known pooling key")
    return out, picked


def chunk_bounds(questions: int, passages: int, chunk: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``[((q_start, q_end), (p_start, p_end)), ...]``: ``chunk`` questions per chunk (the last
    one the rest) and the passage rows in proportion, ``[q_start * P // B, q_end * P // B)``
    (DPR, ``k`` passages per question: exactly those questions' passages; DCSR, whose questions
    have 2-3 passages each: a chunk's rows may end inside a question's)."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if questions == 0:
        return [((0, 0), (0, passages))]
    q_edges = list(range(0, questions, chunk)) + [questions]
    p_edges = [q * passages // questions for q in q_edges]
    return [((q_edges[i], q_edges[i + 1]), (p_edges[i], p_edges[i + 1])) for i in range(len(q_edges) - 1)]


def _place(parts: list[Tensor], indices: list[Tensor], total: int) -> Tensor:
    """The chunks' vectors at their rows of the whole batch: ``[total, H]``."""
    first = parts[0]
    out = first.new_zeros((total,) + tuple(first.shape[1:]))
    for part, index in zip(parts, indices):
        out.index_copy_(0, index.to(out.device), part)
    return out


def _most_chunks(mine: int, device: torch.device) -> int:
    """The most chunks any process encodes: every DDP forward syncs buffers (a collective), so
    all processes must run as many."""
    n = torch.tensor([mine], dtype=torch.long, device=device)
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    return int(n.item())


def grad_cache_step(model: Callable[[dict, dict], tuple[Tensor, Tensor]], q: Mapping[str, Any],
                    p: Mapping[str, Any], chunk: int,
                    loss_fn: Callable[[Tensor, Tensor], tuple[Tensor, Any]],
                    encoder: Callable[[dict, dict], tuple[Tensor, Tensor]] | None = None,
                    autocast: Callable[[], Any] = contextlib.nullcontext) -> Any:
    """Back-propagate the loss of a whole batch, encoding it ``chunk`` questions at a time.

    ``model(q, p) -> (q_vecs [B, H], p_vecs [P, H])`` is called with gradient in pass 3; when
    it has ``no_sync`` (DistributedDataParallel) every chunk but the last runs under it, so the
    gradients are all-reduced once, and a process with fewer chunks than another first encodes
    its first rows as often as it lacks chunks, with a zero gradient (DDP forwards are
    collectives; an encoder cannot take an empty chunk).
    ``encoder`` (default ``model``; the bare module under DDP) encodes without gradient in pass
    1. ``loss_fn(q_vecs, p_vecs)`` gets all vectors, float32 leaves in the whole batch's order,
    and returns ``(tensor to back-propagate, result)``; ``result`` is returned. ``autocast()``
    is entered around every encoding. The parameters' ``.grad`` receive the gradient of
    that tensor, as ``tensor.backward()`` after one pass over the whole batch would give.
    """
    encoder = model if encoder is None else encoder
    n_q, n_p = _rows(q), _rows(p)
    device = q["input_ids"].device
    no_sync = getattr(model, "no_sync", None)
    bounds = chunk_bounds(n_q, n_p, chunk)
    extra = 0
    if no_sync is not None and dist.is_available() and dist.is_initialized():
        extra = _most_chunks(len(bounds), device) - len(bounds)
    parts = []
    for (qa, qb), (pa, pb) in bounds:
        q_chunk, q_index = chunk_rows(q, qa, qb)
        p_chunk, p_index = chunk_rows(p, pa, pb)
        parts.append([q_chunk, q_index, p_chunk, p_index, None])

    # pass 1: every vector, no graph kept; each chunk's RNG state as its encoding starts
    q_parts, p_parts = [], []
    with torch.no_grad():
        for part in parts:
            q_chunk, _, p_chunk, _, _ = part
            part[4] = RandContext(device)
            with autocast():
                q_vecs, p_vecs = encoder(q_chunk, p_chunk)
            q_parts.append(q_vecs.float())
            p_parts.append(p_vecs.float())
    q_total = sum(int(x[1].numel()) for x in parts)
    p_total = sum(int(x[3].numel()) for x in parts)
    q_all = _place(q_parts, [x[1] for x in parts], q_total).requires_grad_()
    p_all = _place(p_parts, [x[3] for x in parts], p_total).requires_grad_()
    del q_parts, p_parts

    # pass 2: the loss and its gradient w.r.t. every vector
    to_backward, result = loss_fn(q_all, p_all)
    to_backward.backward()
    q_grad = q_all.grad if q_all.grad is not None else torch.zeros_like(q_all)
    p_grad = p_all.grad if p_all.grad is not None else torch.zeros_like(p_all)
    del q_all, p_all, to_backward

    # pass 3: each chunk again with its pass-1 RNG, its vectors' cached gradient back-propagated
    # (after the stand-ins for chunks this process lacks: its first rows, gradient zero, RNG untouched)
    q_first, _ = chunk_rows(q, 0, min(1, n_q))
    p_first, _ = chunk_rows(p, 0, min(1, n_p))
    passes = [(q_first, None, p_first, None, RandContext(device)) for _ in range(extra)] + parts
    for i, (q_chunk, q_index, p_chunk, p_index, rng) in enumerate(passes):
        last = i == len(passes) - 1
        with (no_sync() if no_sync is not None and not last else contextlib.nullcontext()), rng:
            with autocast():
                q_vecs, p_vecs = model(q_chunk, p_chunk)
            if q_index is None:
                surrogate = (q_vecs.float() * 0).sum() + (p_vecs.float() * 0).sum()
            else:
                surrogate = ((q_vecs.float() * q_grad.index_select(0, q_index.to(q_grad.device))).sum()
                             + (p_vecs.float() * p_grad.index_select(0, p_index.to(p_grad.device))).sum())
            surrogate.backward()
    return result
