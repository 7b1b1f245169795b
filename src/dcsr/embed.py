"""Encode corpus shards and question sets into ``.npy`` vectors.

A corpus shard is every passage whose row number ``r`` (0-based, in corpus order) has
``r % num_shards == shard``: each shard job streams the corpus once and keeps only its own
rows, so shards need no prior count and run as independent jobs. Inside a shard, passages
are encoded in batches of similar token length (sorted by length) and the vectors are put
back in corpus order, which avoids padding short passages to the longest one in a batch.

Outputs of one shard: ``<prefix>.npy`` (float32 or float16, ``[n, H]``) and
``<prefix>.ids.npy`` (int64 passage ids, ``[n]``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm import tqdm

from .formats import iter_passages, iter_qas
from .fsutil import atomic_path

log = logging.getLogger(__name__)


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def shard_passages(corpus_tsv: str | os.PathLike, shard: int, num_shards: int):
    """The passages of one shard: ``(ids, titles, texts)`` in corpus order."""
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} is outside 0..{num_shards - 1}")
    ids, titles, texts = [], [], []
    for row, p in enumerate(iter_passages(corpus_tsv)):
        if row % num_shards == shard:
            ids.append(p.id)
            titles.append(p.title)
            texts.append(p.text)
    return ids, titles, texts


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row indices grouped into batches of similar length, longest first.

    Longest first makes the first batch the largest memory peak, so an out-of-memory
    error shows at once rather than at the end of a long shard.
    """
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


@torch.inference_mode()
def encode_texts(
    model,
    tokenizer,
    texts: Sequence[str],
    titles: Sequence[str] | None,
    side: str,
    max_length: int,
    batch_size: int,
    device: torch.device,
    amp: bool = False,
    progress: bool = True,
    desc: str = "encode",
) -> np.ndarray:
    """Vectors ``[len(texts), H]`` (float32) in the order of ``texts``.

    ``side`` is ``"passage"`` (title/text pairs through the passage encoder) or
    ``"question"`` (the question encoder).
    """
    n = len(texts)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    from .model import tokenize_passages, tokenize_questions

    # Tokenize once without padding (the same input format as training); each
    # length-sorted batch is padded on its own.
    if side == "passage":
        enc = tokenize_passages(tokenizer, titles, texts, max_length, padding=False)
    else:
        enc = tokenize_questions(tokenizer, texts, max_length, padding=False)
    keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
    lengths = [len(x) for x in enc["input_ids"]]
    out: np.ndarray | None = None
    bar = tqdm(total=n, desc=desc, unit=f" {side}s", disable=not progress, mininterval=2.0)
    for rows in length_sorted_batches(lengths, batch_size):
        feats = [{k: enc[k][i] for k in keys} for i in rows.tolist()]
        batch = tokenizer.pad(feats, return_tensors="pt")
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=amp and device.type == "cuda"):
            vecs = model.encode_passages(**batch) if side == "passage" else model.encode_questions(**batch)
        vecs = vecs.float().cpu().numpy()
        if out is None:
            out = np.empty((n, vecs.shape[1]), dtype=np.float32)
        out[rows] = vecs
        bar.update(len(rows))
    bar.close()
    return out


def _save_npy(path: Path, array: np.ndarray) -> None:
    with atomic_path(path, suffix=".npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, array)


def _load_for_inference(model_dir, device: str):
    """``(device, tokenizer, BiEncoder in eval mode, meta)`` of a saved bi-encoder."""
    from .model import load_biencoder

    dev = pick_device(device)
    tokenizer, model, meta = load_biencoder(model_dir, device=str(dev))
    model.eval()
    return dev, tokenizer, model, meta


def embed_corpus_shard(
    model_dir: str | os.PathLike,
    corpus_tsv: str | os.PathLike,
    shard: int,
    num_shards: int,
    out_vectors: str | os.PathLike,
    out_ids: str | os.PathLike,
    batch_size: int = 64,
    max_length: int | None = None,
    fp16: bool = False,
    device: str = "auto",
    progress: bool = True,
) -> dict:
    """Encode one corpus shard with the passage encoder of ``model_dir``; returns stats."""
    dev, tokenizer, model, meta = _load_for_inference(model_dir, device)
    max_length = max_length or int(meta.get("passage_max_length", 256))
    ids, titles, texts = shard_passages(corpus_tsv, shard, num_shards)
    log.info("shard %d/%d: %d passages, device %s", shard, num_shards, len(ids), dev)
    vecs = encode_texts(model, tokenizer, texts, titles, "passage", max_length, batch_size, dev,
                        amp=fp16, progress=progress, desc=f"embed shard {shard}")
    if len(ids) == 0:
        vecs = np.zeros((0, model.hidden_size), dtype=np.float32)
    _save_npy(Path(out_vectors), vecs.astype(np.float16 if fp16 else np.float32))
    _save_npy(Path(out_ids), np.asarray(ids, dtype=np.int64))
    return {"shard": shard, "passages": len(ids), "dim": int(vecs.shape[1]), "dtype": "float16" if fp16 else "float32"}


def embed_questions(
    model_dir: str | os.PathLike,
    questions: Sequence[str],
    out_vectors: str | os.PathLike,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "auto",
    progress: bool = True,
) -> dict:
    """Encode questions with the question encoder of ``model_dir`` into ``out_vectors``."""
    dev, tokenizer, model, meta = _load_for_inference(model_dir, device)
    max_length = max_length or int(meta.get("question_max_length", 256))
    vecs = encode_texts(model, tokenizer, list(questions), None, "question", max_length, batch_size, dev,
                        progress=progress, desc="embed questions")
    _save_npy(Path(out_vectors), vecs)
    return {"questions": len(questions), "dim": int(vecs.shape[1]) if len(questions) else 0}


def qas_questions(path: str | os.PathLike) -> list[str]:
    return [qa.question for qa in iter_qas(path)]
