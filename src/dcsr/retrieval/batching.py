"""Batches for the encoders, and feeding them to a device.

Rows are grouped by similar token length (:func:`length_sorted_batches`), padded in numpy
(:func:`pad_rows`, :func:`collate_marked` for DCSR's marked passages; :func:`round_up_batch` to a
multiple of tensor cores' tile) and run by :func:`run_batches`: on a CUDA device a background
thread (:func:`prefetched`) makes and pins the next batches while the GPU runs the current ones,
inputs go from pinned memory without blocking, and a batch's vectors come back while
:data:`IN_FLIGHT` later batches run. On the CPU the same batches run in the calling thread, the
plain loop, bit for bit. :mod:`dcsr.retrieval.embed` tokenizes the texts into these batches.
"""

from __future__ import annotations

import collections
import itertools
import queue
import threading
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from dcsr.models.precision import autocast

#: On CUDA, batches queued on the GPU before the oldest one's vectors are waited for: the host
#: queues the next batch while this many run, so that a pause of the host (the tokenizing thread
#: holding the GIL while it converts a chunk's tokens) does not leave the GPU idle. Queued
#: batches cost no memory beyond their inputs and outputs: the caching allocator reuses a
#: batch's activations for the next in stream order.
IN_FLIGHT = 4


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row indices grouped into batches of similar length, longest first.

    Longest first makes the first batch the largest memory peak, so an out-of-memory
    error shows at once rather than at the end of a long shard.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def pad_rows(rows: Sequence[Sequence[int]], value: int, multiple: int = 1) -> torch.Tensor:
    """``[B, L]`` int64: the rows left-aligned and padded with ``value`` to ``L``, the longest row
    rounded up to a multiple of ``multiple``: ``tokenizer.pad``'s right padding, in numpy rather
    than row by row in Python."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    width = -(-int(lengths.max(initial=0)) // multiple) * multiple
    out = np.full((len(rows), width), value, dtype=np.int64)
    out[np.arange(width) < lengths[:, None]] = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64,
                                                          count=int(lengths.sum()))
    return torch.from_numpy(out)


def round_up_batch(batch: dict, multiple: int, pad_token_id: int, pad_token_type_id: int = 0) -> dict:
    """``batch`` with its ``[B, L]`` inputs padded on the right (masked out) to a multiple of
    ``multiple`` tokens, and its flat ``pool_positions`` / ``pool_ends`` (``b * L + t``,
    :mod:`dcsr.models.markers`) moved to the new row length. A batch already there is returned
    as it is."""
    length = batch["input_ids"].shape[1]
    extra = -length % max(1, multiple)
    if not extra:
        return batch
    out = dict(batch)
    for key, value in (("input_ids", pad_token_id), ("attention_mask", 0), ("token_type_ids", pad_token_type_id)):
        if batch.get(key) is not None:
            out[key] = torch.nn.functional.pad(batch[key], (0, extra), value=value)
    if batch.get("pool_positions") is not None:
        shift = batch["pool_positions"] // length * extra  # a position's row, times the width added to each row
        out["pool_positions"] = batch["pool_positions"] + shift
        if batch.get("pool_ends") is not None:  # an end may be its row's last index + 1: shifted with its start
            out["pool_ends"] = batch["pool_ends"] + shift
    return out


def collate_marked(encoded: Sequence[tuple[list[int], list[int], list[int], list[int]]], pad_token_id: int,
                   multiple: int = 1) -> dict:
    """:func:`dcsr.models.markers.collate_encoded_passages` of every marked sentence (``select``
    None), in numpy rather than row by row, with rows padded to a multiple of ``multiple``: the
    same ``input_ids``, ``attention_mask``, ``token_type_ids``, ``pool_positions`` and
    ``pool_ends`` (the pooling's inputs; ``sentence_owner`` / ``sentence_index`` are left out, the
    caller knows its rows)."""
    input_ids = pad_rows([e[0] for e in encoded], pad_token_id, multiple)
    length = input_ids.shape[1]
    lengths = np.fromiter((len(e[0]) for e in encoded), dtype=np.int64, count=len(encoded))
    counts = np.fromiter((len(e[2]) for e in encoded), dtype=np.int64, count=len(encoded))
    positions = np.fromiter(itertools.chain.from_iterable(e[2] for e in encoded), dtype=np.int64,
                            count=int(counts.sum()))
    # a sentence runs from its marker to the next marker, the last one to its row's final [SEP]
    until = np.empty_like(positions)
    until[:-1] = positions[1:]
    last = (np.cumsum(counts) - 1)[counts > 0]
    until[last] = lengths[counts > 0] - 1
    row_start = np.repeat(np.arange(len(encoded), dtype=np.int64) * length, counts)
    return {"input_ids": input_ids,
            "attention_mask": torch.from_numpy((np.arange(length) < lengths[:, None]).astype(np.int64)),
            "token_type_ids": pad_rows([e[1] for e in encoded], 0, multiple),
            "pool_positions": torch.from_numpy(row_start + positions), "pool_ends": torch.from_numpy(row_start + until)}


def prefetched(items: Iterable, depth: int) -> Iterator:
    """The items of ``items`` in order, made by a background thread up to ``depth`` ahead; an
    exception raised there is raised here. Closing this generator stops the thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    def work() -> None:
        try:
            for item in items:
                if not put((True, item)):
                    return
            put((False, None))
        except BaseException as e:  # raised in the consumer
            put((False, e))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=work, name="dcsr-embed-tokenize", daemon=True)
    thread.start()
    try:
        while True:
            ok, item = q.get()
            if ok:
                yield item
            elif item is None:
                return
            else:
                raise item
    finally:
        stop.set()
        thread.join()


def run_batches(encode: Callable, batches: Iterable[tuple[dict, object]], device: torch.device, precision: str,
                prefetch: int, sink: Callable[[np.ndarray, object], None]) -> None:
    """``sink(vectors, payload)`` for each ``(batch, payload)`` of ``batches`` in order, the vectors
    (float32 numpy ``[N, H]``) those of ``encode(**batch)`` on ``device`` under ``precision``.

    ``prefetch`` > 0 makes the batches (tokenization, padding) in a background thread, that many
    ahead. On CUDA the batches are pinned (in that thread) and copied to the GPU without blocking,
    and a batch's vectors are copied back (into pinned memory, without blocking) and handed to
    ``sink`` only once :data:`IN_FLIGHT` later batches are queued: the GPU does not wait for the
    host between batches. On the CPU a batch is encoded and sunk before the next (the plain
    loop), with the same vectors bit for bit whether or not a thread tokenizes."""
    cuda = device.type == "cuda"
    if cuda:
        batches = (({k: v.pin_memory() for k, v in batch.items()}, payload) for batch, payload in batches)
    source = prefetched(batches, prefetch) if prefetch > 0 else iter(batches)
    pending: collections.deque = collections.deque()
    try:
        for batch, payload in source:
            batch = {k: v.to(device, non_blocking=cuda) for k, v in batch.items()}
            with autocast(precision, device.type):
                vecs = encode(**batch)
            if not cuda:
                sink(vecs.float().cpu().numpy(), payload)
                continue
            host = vecs.float().to("cpu", non_blocking=True)
            copied = torch.cuda.Event()
            copied.record()
            pending.append((host, copied, payload))
            while len(pending) > IN_FLIGHT:
                host, copied, payload = pending.popleft()
                copied.synchronize()
                sink(host.numpy(), payload)
        while pending:
            host, copied, payload = pending.popleft()
            copied.synchronize()
            sink(host.numpy(), payload)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
