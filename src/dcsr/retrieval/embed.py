"""Encode corpus shards and question sets into ``.npy`` vectors.

A corpus shard is every passage whose row number ``r`` (0-based, in corpus order) has
``r % num_shards == shard``: each shard job streams the corpus once and keeps only its own
rows, so shards need no prior count and run as independent jobs. Inside a shard, passages
are encoded in batches of similar token length (sorted by length) and the vectors are put
back in corpus order, which avoids padding short passages to the longest one in a batch.

Outputs of one shard: ``<prefix>.npy`` (float32 or float16, ``[n, H]``),
``<prefix>.ids.npy`` (int64 passage ids, ``[n]``) and ``<prefix>.sents.npy`` (int32, ``[n]``:
the sentence number of each vector inside its passage, -1 for a whole-passage vector). Every
``.npy`` written here ends with its checksum (:mod:`dcsr.integrity`), checked where it is read.

A DPR model gives one vector per passage. A DCSR model (``method: dcsr`` in its
``dcsr.json``) gives one vector per sentence that gets a ``<sent>`` marker inside the caps
(:func:`dcsr.models.markers.encode_passage_with_markers`), so ``n`` counts sentences and a
passage id repeats; the index and the search are the same for both.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm import tqdm

from dcsr.data.formats import iter_passages, iter_qas
from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import seal
from dcsr.models.precision import autocast, cpu_bf16, resolve
from dcsr.settings import EMBED_BACKENDS

log = logging.getLogger(__name__)


def pick_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def shard_passages(corpus_tsv: str | os.PathLike, shard: int, num_shards: int):
    """The passages of one shard: ``(ids, titles, texts)`` in corpus order: rows ``shard,
    shard + num_shards, ...``. ``corpus_tsv`` may be the corpus's passage store (a directory,
    :mod:`dcsr.data.passage_store`): then only the shard's rows are read."""
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} is outside 0..{num_shards - 1}")
    if Path(corpus_tsv).is_dir():
        from dcsr.data.passage_store import PassageStore

        rows = PassageStore(corpus_tsv).shard(shard, num_shards)
        return [p.id for p in rows], [p.title for p in rows], [p.text for p in rows]
    ids, titles, texts = [], [], []
    for row, p in enumerate(iter_passages(corpus_tsv)):
        if row % num_shards == shard:
            ids.append(p.id)
            titles.append(p.title)
            texts.append(p.text)
    return ids, titles, texts


#: Texts tokenized at a time when encoding: a shard's tokenizer output (31.8 KB per 256-token
#: passage for DPR's, measured in benchmarks/rehearsal.md) is held a chunk at a time, not all
#: at once. Length-sorted batches are formed within a chunk; shards smaller than a chunk batch
#: exactly as before.
TOKENIZE_CHUNK = 8192


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
    precision: str = "fp32",
    progress: bool = True,
    desc: str = "encode",
) -> np.ndarray:
    """Vectors ``[len(texts), H]`` (float32) in the order of ``texts``.

    ``side`` is ``"passage"`` (title/text pairs through the passage encoder),
    ``"question"`` (the question encoder) or ``"marked_question"`` (DCSR's question input
    ``[CLS] <sent> question [SEP]``, pooled at the marker). ``precision`` is a resolved
    compute precision (:func:`dcsr.models.precision.resolve`): fp32, bf16 or fp16 autocast.
    """
    n = len(texts)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    from dcsr.models.biencoder import tokenize_passages, tokenize_questions

    out: np.ndarray | None = None
    bar = tqdm(total=n, desc=desc, unit=f" {side}s", disable=not progress, mininterval=2.0)
    # Tokenized a chunk at a time without padding (the same input format as training); each
    # length-sorted batch of the chunk is padded on its own.
    for lo in range(0, n, TOKENIZE_CHUNK):
        hi = min(n, lo + TOKENIZE_CHUNK)
        chunk = list(texts[lo:hi])
        if side == "passage":
            enc = tokenize_passages(tokenizer, list(titles[lo:hi]), chunk, max_length, padding=False)
        elif side == "marked_question":  # DCSR: [CLS] <sent> question [SEP], the vector at <sent>
            from dcsr.models.markers import tokenize_marked_questions

            enc = {"input_ids": tokenizer(chunk, add_special_tokens=False)["input_ids"]}
        else:
            enc = tokenize_questions(tokenizer, chunk, max_length, padding=False)
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
        for rows in length_sorted_batches([len(x) for x in enc["input_ids"]], batch_size):
            if side == "marked_question":
                batch = tokenize_marked_questions(tokenizer, [chunk[i] for i in rows.tolist()], max_length)
            else:
                batch = tokenizer.pad([{k: enc[k][i] for k in keys} for i in rows.tolist()], return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items()}
            with autocast(precision, device.type):
                vecs = model.encode_passages(**batch) if side == "passage" else model.encode_questions(**batch)
            vecs = vecs.float().cpu().numpy()
            if out is None:
                out = np.empty((n, vecs.shape[1]), dtype=np.float32)
            out[rows + lo] = vecs
            bar.update(len(rows))
    bar.close()
    return out


@torch.inference_mode()
def encode_sentence_passages(
    model,
    tokenizer,
    titles: Sequence[str],
    texts: Sequence[str],
    spans_list: Sequence[Sequence[tuple[int, int]]],
    max_length: int,
    max_sentences: int,
    batch_size: int,
    device: torch.device,
    precision: str = "fp32",
    progress: bool = True,
    desc: str = "encode sentences",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DCSR's contextual sentence vectors: each passage encoded whole with a ``<sent>`` marker
    before each sentence, one vector per marker.

    Returns ``(vectors [N, H] float32, rows [N], sentences [N])``: vector i is sentence
    ``sentences[i]`` (an index into ``spans_list[rows[i]]``) of passage ``rows[i]``, ordered by
    passage then sentence. Sentences cut off by the caps, and passages without sentences,
    give no vector.
    """
    from dcsr.models.markers import collate_encoded_passages, encode_passages_with_markers, ensure_sentence_marker

    marker = ensure_sentence_marker(tokenizer)
    # At most min(sentences, max_sentences) vectors per passage (truncation at max_length can
    # only drop more): the output is allocated once at that bound and cut to what was filled.
    bound = sum(min(len(sp), max_sentences) for sp in spans_list)
    out = np.zeros((bound, model.hidden_size), dtype=np.float32)
    rows_out = np.zeros(bound, dtype=np.int64)
    sentences_out = np.zeros(bound, dtype=np.int64)
    filled = 0
    bar = tqdm(total=len(texts), desc=desc, unit=" passages", disable=not progress, mininterval=2.0)
    # A chunk of passages is tokenized at a time, so that a shard's token lists are never all
    # held at once; its vectors keep the order passage then sentence.
    for lo in range(0, len(texts), TOKENIZE_CHUNK):
        hi = min(len(texts), lo + TOKENIZE_CHUNK)
        encoded = encode_passages_with_markers(tokenizer, titles[lo:hi], texts[lo:hi], spans_list[lo:hi], max_length,
                                               max_sentences, marker)
        counts = np.asarray([len(e[2]) for e in encoded], dtype=np.int64)
        starts = filled + np.cumsum(counts) - counts  # a chunk is never empty
        total = int(counts.sum())
        rows_out[filled : filled + total] = np.repeat(np.arange(lo, hi, dtype=np.int64), counts)
        sentences_out[filled : filled + total] = [i for e in encoded for i in e[3]]
        for rows in length_sorted_batches([len(e[0]) for e in encoded], batch_size):
            rows = [int(r) for r in rows if counts[r]]
            if rows:
                batch = collate_encoded_passages([encoded[r] for r in rows], None, tokenizer.pad_token_id)
                batch = {k: v.to(device) for k, v in batch.items()}
                with autocast(precision, device.type):
                    vecs = model.encode_passages(**batch).float().cpu().numpy()  # by row in batch, then sentence
                at = 0
                for r in rows:
                    out[starts[r] : starts[r] + counts[r]] = vecs[at : at + counts[r]]
                    at += counts[r]
            bar.update(len(rows))
        filled += total
    bar.close()
    return out[:filled], rows_out[:filled], sentences_out[:filled]


def is_sentence_level(meta: dict) -> bool:
    """Whether a saved bi-encoder indexes sentences (DCSR) rather than passages."""
    return meta.get("method") == "dcsr"


def _save_npy(path: Path, array: np.ndarray) -> None:
    """``np.save`` atomically, sealed with its checksum (:mod:`dcsr.integrity`; ``np.load`` ignores
    the trailer, :func:`dcsr.retrieval.index.load_npy` checks it)."""
    with atomic_path(path, suffix=".npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, array)
        seal(tmp)


def _load_for_inference(model_dir, device: str, precision: str = "fp32"):
    """``(device, tokenizer, BiEncoder in eval mode, meta, resolved precision)`` of a saved
    bi-encoder; the precision chosen is logged."""
    from dcsr.models.biencoder import load_biencoder

    dev = pick_device(device)
    resolved = resolve(precision, dev.type)
    tokenizer, model, meta = load_biencoder(model_dir, device=str(dev))
    model.eval()
    log.info("compute precision %s (embed.precision: %s, device %s, %d torch threads)", resolved, precision, dev,
             torch.get_num_threads())
    return dev, tokenizer, model, meta, resolved


def resolve_backend(setting: str, device_type: str, precision: str) -> str:
    """The runtime ``embed.backend`` means for a passage encoder computing in ``precision`` (resolved)
    on a ``device_type`` device. ``auto`` is ``openvino`` where the encoder computes in bf16 on a
    CPU with AVX-512 BF16 but no AMX (as AMD Zen 4), the one kind it was measured on: 1.27x torch
    encoding alone, 1.18x in the pipeline's jobs, dev top-k within 0.05 points pooled, no loss a
    sign test finds (benchmarks/embedding-backends.md). Elsewhere (AMX, fp32, GPUs) it is
    ``torch``, the kinds where no such measurement was made."""
    if setting not in EMBED_BACKENDS:
        raise InputError("embed.backend", f"unknown backend {setting!r}; expected one of {', '.join(EMBED_BACKENDS)}")
    if setting != "auto":
        return setting
    return "openvino" if device_type == "cpu" and precision == "bf16" and cpu_bf16() == "avx512_bf16" else "torch"


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
    sentences: str | os.PathLike | None = None,
    out_sentences: str | os.PathLike | None = None,
    precision: str = "fp32",
    backend: str = "torch",
) -> dict:
    """Encode one corpus shard with the passage encoder of ``model_dir``; returns stats.

    A DCSR model encodes one vector per sentence, with the sentence spans of the sentence
    table ``sentences`` (passages missing from it, or every passage when it is None, are
    split on the fly with the default splitter). ``out_sentences`` receives the sentence
    number of every vector (-1 for DPR's whole-passage vectors). ``fp16`` is the stored dtype;
    ``precision`` the compute precision (:mod:`dcsr.models.precision`; ``auto`` may pick bf16).
    ``backend`` ``onnx-int8`` runs the passage encoder in ONNX Runtime with int8 weights
    (:mod:`dcsr.models.onnx_int8`), one passage per call; ``openvino`` in OpenVINO at the
    compute precision (:mod:`dcsr.models.openvino_encoder`); ``torch`` (the default) in torch;
    ``auto`` as :func:`resolve_backend` says. The stats' ``backend`` is the one that ran."""
    resolve_backend(backend, "cpu", "fp32")  # an unknown name fails before the model loads
    dev, tokenizer, model, meta, precision = _load_for_inference(model_dir, device, precision)
    backend = resolve_backend(backend, dev.type, precision)
    log.info("passage encoder runtime %s (embed.backend)", backend)
    if backend != "torch" and dev.type != "cpu":
        raise InputError("embed.backend", f"{backend} runs on the CPU; use torch on a GPU")
    if backend == "onnx-int8":
        from dcsr.models.onnx_int8 import use_int8_passage_encoder

        use_int8_passage_encoder(model)
        # one passage per call, so that its vector does not depend on its batchmates; pooling in fp32
        precision, batch_size = "fp32", 1
    compute = precision  # what the encoder computes in (the stats' "precision")
    if backend == "openvino":
        from dcsr.models.openvino_encoder import use_openvino_passage_encoder

        use_openvino_passage_encoder(model, precision)
        precision = "fp32"  # OpenVINO computes at `compute`; torch pools its fp32 output in fp32
    max_length = max_length or int(meta.get("passage_max_length", 256))
    ids, titles, texts = shard_passages(corpus_tsv, shard, num_shards)
    log.info("shard %d/%d: %d passages, device %s, method %s", shard, num_shards, len(ids), dev,
             meta.get("method", "dpr"))
    if is_sentence_level(meta):
        from dcsr.data.formats import sentence_spans
        from dcsr.data.sentences import split_sentences

        table = sentence_spans(sentences, set(ids)) if sentences is not None else {}
        missing = sum(1 for i in ids if i not in table)
        if missing:
            log.warning("%d of %d passages have no sentence-table entry; splitting them now", missing, len(ids))
        spans_list = [table[i] if i in table else split_sentences(t) for i, t in zip(ids, texts)]
        max_sentences = int(meta.get("settings", {}).get("max_sentences", 10))
        vecs, rows, sent_no = encode_sentence_passages(model, tokenizer, titles, texts, spans_list, max_length,
                                                       max_sentences, batch_size, dev, precision=precision, progress=progress,
                                                       desc=f"embed shard {shard}")
        vec_ids = np.asarray(ids, dtype=np.int64)[rows] if len(rows) else np.zeros(0, dtype=np.int64)
    else:
        vecs = encode_texts(model, tokenizer, texts, titles, "passage", max_length, batch_size, dev,
                            precision=precision, progress=progress, desc=f"embed shard {shard}")
        vec_ids, sent_no = np.asarray(ids, dtype=np.int64), np.full(len(ids), -1, dtype=np.int64)
    if len(vec_ids) == 0:
        vecs = np.zeros((0, model.hidden_size), dtype=np.float32)
    _save_npy(Path(out_vectors), vecs.astype(np.float16 if fp16 else np.float32, copy=False))
    _save_npy(Path(out_ids), vec_ids)
    if out_sentences is not None:
        _save_npy(Path(out_sentences), np.asarray(sent_no, dtype=np.int32))
    return {"shard": shard, "passages": len(ids), "vectors": int(len(vec_ids)), "dim": int(vecs.shape[1]),
            "dtype": "float16" if fp16 else "float32", "precision": compute, "backend": backend,
            "method": meta.get("method", "dpr"), "device": dev.type,
            "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None}


def embed_questions(
    model_dir: str | os.PathLike,
    questions: Sequence[str],
    out_vectors: str | os.PathLike,
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "auto",
    progress: bool = True,
    precision: str = "fp32",
) -> dict:
    """Encode questions with the question encoder of ``model_dir`` into ``out_vectors``."""
    return embed_question_sets(model_dir, [(questions, out_vectors)], batch_size, max_length, device, progress,
                               precision)[0]


def embed_question_sets(
    model_dir: str | os.PathLike,
    sets: Sequence[tuple[Sequence[str], str | os.PathLike]],
    batch_size: int = 128,
    max_length: int | None = None,
    device: str = "auto",
    progress: bool = True,
    precision: str = "fp32",
) -> list[dict]:
    """Encode several question sets ``[(questions, out_vectors), ...]`` with the question
    encoder of ``model_dir``, loading it once. Returns one stats dict per set."""
    dev, tokenizer, model, meta, precision = _load_for_inference(model_dir, device, precision)
    max_length = max_length or int(meta.get("question_max_length", 256))
    side = "marked_question" if is_sentence_level(meta) else "question"
    stats = []
    for questions, out_vectors in sets:
        vecs = encode_texts(model, tokenizer, list(questions), None, side, max_length, batch_size, dev,
                            precision=precision, progress=progress, desc=f"embed questions ({Path(out_vectors).name})")
        _save_npy(Path(out_vectors), vecs)
        stats.append({"questions": len(questions), "dim": int(vecs.shape[1]) if len(questions) else 0,
                      "vectors": str(out_vectors)})
    return stats


def qas_questions(path: str | os.PathLike) -> list[str]:
    return [qa.question for qa in iter_qas(path)]
