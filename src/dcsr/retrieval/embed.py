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

On a CUDA device the encoder is kept busy (:func:`dcsr.retrieval.batching.run_batches`): a background thread tokenizes,
pads and pins the next batches (up to a chunk of them) while the GPU runs the current ones;
inputs go to the device from pinned memory without blocking, and a batch's vectors come back
while later batches run. Batches are padded to a multiple of :data:`CUDA_PAD_MULTIPLE` tokens
(tensor cores; the padding is masked, so vectors are the same within float rounding), the
encoders attend with PyTorch's SDPA, and ``DCSR_EMBED_COMPILE`` (:data:`COMPILE_ENV`) opts in
to ``torch.compile``. On the CPU the same batches run in the calling thread, padded to their
longest row: the vectors are those of the plain loop, bit for bit.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm

from dcsr.cli import TOKENIZERS_DEFAULTED_ENV
from dcsr.data.answers import encoder_question
from dcsr.data.formats import iter_passages, iter_qas
from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import seal
from dcsr.models.precision import cpu_bf16, resolve
from dcsr.retrieval.batching import collate_marked, length_sorted_batches, pad_rows, round_up_batch, run_batches
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
#: passage for DPR's, measured in benchmarks/rehearsal/rehearsal.md) is held a chunk at a time, not all
#: at once. Length-sorted batches are formed within a chunk; shards smaller than a chunk batch
#: exactly as before.
TOKENIZE_CHUNK = 8192

#: On a CUDA device a batch is padded to a multiple of this many tokens: tensor cores compute in
#: tiles of 8 (and more) 16-bit values, and lengths in steps of 8 bound the shapes torch.compile
#: sees. The padding is masked, so the vectors are those of the batch padded to its longest row
#: within float rounding (not bit for bit: reductions run over another length). The CPU pads a
#: batch to its longest row, as ever.
CUDA_PAD_MULTIPLE = 8

#: An environment variable: ``1`` compiles the encoders with ``torch.compile(dynamic=True)`` for
#: embedding (:func:`compile_encoders`), a torch.compile mode name (``max-autotune``,
#: ``reduce-overhead``, ...) compiles them in that mode; unset, empty or ``0``: eager (the default).
COMPILE_ENV = "DCSR_EMBED_COMPILE"


def prefetch_depth(prefetch: int | None, batch_size: int, device: torch.device) -> int:
    """Batches a background thread tokenizes ahead of the encoder. ``None``: on CUDA, a chunk's
    batches and one more (the thread tokenizes the next chunk while the GPU runs this one's); on
    the CPU none: the batches are tokenized between encoder calls, as before. On a CPU the encoder
    takes nearly all the time and a thread only contends with torch's: on a 2-core Zen 4, MiniLM
    fp32 over 120 SQuAD passages, interleaved runs took a median 22.4 s with a tokenizing thread
    against 18.9 s without (fastest 15.5 s against 13.0 s; the machine shared with other jobs)."""
    if prefetch is not None:
        return max(0, int(prefetch))
    return -(-TOKENIZE_CHUNK // batch_size) + 1 if device.type == "cuda" else 0


def _text_batches(tokenizer, texts: Sequence[str], titles: Sequence[str] | None, side: str, max_length: int,
                  batch_size: int, multiple: int) -> Iterator[tuple[dict, np.ndarray]]:
    """:func:`encode_texts`'s ``(batch, rows)``: CPU tensors ``[B, L]`` of each length-sorted batch,
    chunk by chunk, and the rows of ``texts`` it holds."""
    from dcsr.models.biencoder import tokenize_passages, tokenize_questions
    from dcsr.models.markers import tokenize_marked_questions

    pad_id, type_id = tokenizer.pad_token_id, tokenizer.pad_token_type_id
    pad_value = {"input_ids": pad_id, "attention_mask": 0, "token_type_ids": type_id}
    n = len(texts)
    # Tokenized a chunk at a time without padding (the same input format as training); each
    # length-sorted batch of the chunk is padded on its own.
    for lo in range(0, n, TOKENIZE_CHUNK):
        hi = min(n, lo + TOKENIZE_CHUNK)
        chunk = list(texts[lo:hi])
        if side == "passage":
            enc = tokenize_passages(tokenizer, list(titles[lo:hi]), chunk, max_length, padding=False)
        elif side == "marked_question":  # DCSR: [CLS] <sent> question [SEP], the vector at <sent>
            enc = {"input_ids": tokenizer(chunk, add_special_tokens=False)["input_ids"]}
        else:
            enc = tokenize_questions(tokenizer, chunk, max_length, padding=False)
        keys = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc]
        for rows in length_sorted_batches([len(x) for x in enc["input_ids"]], batch_size):
            picked = rows.tolist()
            if side == "marked_question":
                batch = tokenize_marked_questions(tokenizer, [chunk[i] for i in picked], max_length)
            else:  # on the right whatever the tokenizer's padding_side: CLS pooling reads position 0
                batch = {k: pad_rows([enc[k][i] for i in picked], pad_value[k]) for k in keys}
            yield round_up_batch(batch, multiple, pad_id, type_id), rows + lo


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
    prefetch: int | None = None,
    pad_multiple: int | None = None,
) -> np.ndarray:
    """Vectors ``[len(texts), H]`` (float32) in the order of ``texts``.

    ``side`` is ``"passage"`` (title/text pairs through the passage encoder),
    ``"question"`` (the question encoder) or ``"marked_question"`` (DCSR's question input
    ``[CLS] <sent> question [SEP]``, pooled at the marker). ``precision`` is a resolved
    compute precision (:func:`dcsr.models.precision.resolve`): fp32, bf16 or fp16 autocast.
    ``prefetch``: batches tokenized ahead in a background thread (:func:`prefetch_depth`; None:
    the device's default). ``pad_multiple``: a batch's length is rounded up to a multiple of it
    (None: :data:`CUDA_PAD_MULTIPLE` on CUDA, 1 elsewhere).
    """
    n = len(texts)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    out: np.ndarray | None = None
    bar = tqdm(total=n, desc=desc, unit=f" {side}s", disable=not progress, mininterval=2.0)

    def sink(vecs: np.ndarray, rows: np.ndarray) -> None:
        nonlocal out
        if out is None:
            out = np.empty((n, vecs.shape[1]), dtype=np.float32)
        out[rows] = vecs
        bar.update(len(rows))

    multiple = pad_multiple or (CUDA_PAD_MULTIPLE if device.type == "cuda" else 1)
    batches = _text_batches(tokenizer, texts, titles, side, max_length, batch_size, multiple)
    encode = model.encode_passages if side == "passage" else model.encode_questions
    run_batches(encode, batches, device, precision, prefetch_depth(prefetch, batch_size, device), sink)
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
    prefetch: int | None = None,
    pad_multiple: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DCSR's contextual sentence vectors: each passage encoded whole with a ``<sent>`` marker
    before each sentence, one vector per marker.

    Returns ``(vectors [N, H] float32, rows [N], sentences [N])``: vector i is sentence
    ``sentences[i]`` (an index into ``spans_list[rows[i]]``) of passage ``rows[i]``, ordered by
    passage then sentence. Sentences cut off by the caps, and passages without sentences,
    give no vector. ``prefetch`` and ``pad_multiple`` as :func:`encode_texts`'s.
    """
    from dcsr.models.markers import encode_passages_with_markers, ensure_sentence_marker

    marker = ensure_sentence_marker(tokenizer)
    pad_id = tokenizer.pad_token_id
    # At most min(sentences, max_sentences) vectors per passage (truncation at max_length can
    # only drop more): the output is allocated once at that bound and cut to what was filled.
    bound = sum(min(len(sp), max_sentences) for sp in spans_list)
    out = np.zeros((bound, model.hidden_size), dtype=np.float32)
    rows_out = np.zeros(bound, dtype=np.int64)
    sentences_out = np.zeros(bound, dtype=np.int64)
    filled = 0
    bar = tqdm(total=len(texts), desc=desc, unit=" passages", disable=not progress, mininterval=2.0)
    multiple = pad_multiple or (CUDA_PAD_MULTIPLE if device.type == "cuda" else 1)

    def batches():
        """``(batch, (where, passages))``: a batch, the output rows of its vectors and its passages'
        count; the rows and sentence numbers of every chunk's vectors are filled here."""
        nonlocal filled
        # A chunk of passages is tokenized at a time, so that a shard's token lists are never all
        # held at once; its vectors keep the order passage then sentence.
        for lo in range(0, len(texts), TOKENIZE_CHUNK):
            hi = min(len(texts), lo + TOKENIZE_CHUNK)
            encoded = encode_passages_with_markers(tokenizer, titles[lo:hi], texts[lo:hi], spans_list[lo:hi],
                                                   max_length, max_sentences, marker)
            counts = np.asarray([len(e[2]) for e in encoded], dtype=np.int64)
            starts = filled + np.cumsum(counts) - counts  # a chunk is never empty
            total = int(counts.sum())
            rows_out[filled : filled + total] = np.repeat(np.arange(lo, hi, dtype=np.int64), counts)
            sentences_out[filled : filled + total] = [i for e in encoded for i in e[3]]
            for rows in length_sorted_batches([len(e[0]) for e in encoded], batch_size):
                rows = rows[counts[rows] > 0]
                if len(rows):
                    batch = collate_marked([encoded[r] for r in rows.tolist()], pad_id, multiple)
                    # the vectors come by row in the batch, then by sentence: row r's go to starts[r]...
                    c = counts[rows]
                    where = np.repeat(starts[rows] - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))
                    yield batch, (where, len(rows))
            filled += total

    def sink(vecs: np.ndarray, payload: tuple[np.ndarray, int]) -> None:
        out[payload[0]] = vecs
        bar.update(payload[1])

    run_batches(model.encode_passages, batches(), device, precision, prefetch_depth(prefetch, batch_size, device),
                 sink)
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


def _encoders(model) -> list:
    """The distinct encoders of a BiEncoder (a tied model's once)."""
    encoders = [model.question_model]
    return encoders + [model.passage_model] if model.passage_model is not model.question_model else encoders


def use_sdpa(model) -> list[str | None]:
    """Make the encoders of ``model`` attend with PyTorch's ``scaled_dot_product_attention`` (fused
    attention kernels on CUDA) where transformers supports it for them and they use another
    implementation; returns each encoder's attention implementation as it is after. Transformers 5
    picks SDPA by itself wherever it can (BERT, MiniLM, DPR's encoders), so this changes a model
    only when its config asked for another (``attn_implementation: eager``)."""
    impls = []
    for encoder in _encoders(model):
        config = getattr(encoder, "config", None)
        impl = getattr(config, "_attn_implementation", None)
        if impl not in (None, "sdpa") and getattr(encoder, "_supports_sdpa", False):
            try:
                encoder.set_attn_implementation("sdpa")
            except (AttributeError, ImportError, ValueError) as e:
                log.warning("the encoder keeps attention %s: %s", impl, e)
            impl = getattr(config, "_attn_implementation", impl)
        impls.append(impl)
    return impls


def compile_encoders(model, mode: str | None = None, dynamic: bool = True):
    """``torch.compile`` the encoders of ``model`` in place (``nn.Module.compile``: the modules keep
    their type and attributes), with dynamic shapes so that batches of other lengths reuse the
    graph; ``mode`` is torch.compile's (None: its default). Returns ``model``. Opt-in
    (:data:`COMPILE_ENV`, ``benchmarks/gpu/gpu_throughput.py --compile``): the first batches pay
    the compilation, and its vectors differ from eager's within float rounding."""
    for encoder in _encoders(model):
        encoder.compile(dynamic=dynamic, mode=mode)
    return model


def _compile_mode(value: str | None) -> tuple[bool, str | None]:
    """``(compile?, mode)`` of a :data:`COMPILE_ENV` value."""
    value = (value or "").strip()
    if value.lower() in ("", "0", "false", "no", "off"):
        return False, None
    return True, None if value.lower() in ("1", "true", "yes", "on", "default") else value


def _load_for_inference(model_dir, device: str, precision: str = "fp32", compile: bool = True):
    """``(device, tokenizer, BiEncoder in eval mode, meta, resolved precision)`` of a saved
    bi-encoder; the precision chosen is logged. On CUDA the encoders attend with SDPA
    (:func:`use_sdpa`); with :data:`COMPILE_ENV` set (and ``compile``: False where another runtime
    takes the encoder over) they are compiled (:func:`compile_encoders`)."""
    from dcsr.models.biencoder import load_biencoder

    dev = pick_device(device)
    resolved = resolve(precision, dev.type)
    tokenizer, model, meta = load_biencoder(model_dir, device=str(dev))
    model.eval()
    attention = use_sdpa(model) if dev.type == "cuda" else [getattr(getattr(e, "config", None), "_attn_implementation",
                                                                    None) for e in _encoders(model)]
    compiled, mode = _compile_mode(os.environ.get(COMPILE_ENV))
    compiled = compiled and compile
    if compiled:
        compile_encoders(model, mode)
    tokenizer_threads = parallel_tokenizer(dev.type, torch.get_num_threads())
    log.info("compute precision %s (embed.precision: %s, device %s, %d torch threads, tokenizer on %d), "
             "attention %s%s", resolved, precision, dev, torch.get_num_threads(), tokenizer_threads,
             "/".join(map(str, dict.fromkeys(attention))),
             f", torch.compile (mode {mode or 'default'})" if compiled else "")
    return dev, tokenizer, model, meta, resolved


def parallel_tokenizer(device_type: str, threads: int, env=None) -> int:
    """The threads the Rust tokenizer may use in this job: the job's ``threads`` on CUDA, 1 on a CPU.

    On a GPU one core tokenizes slower than the GPU encodes: on the H200 machine of 2026-11-28
    (benchmarks/gpu/gpu.md) bert-base in bf16 embedded 6,893 DPR passages/s, while one core of its
    Xeon tokenized 2,056 (13,295 on 16). So on CUDA, where the scripts' default
    ``TOKENIZERS_PARALLELISM=false`` stands (:data:`dcsr.cli.TOKENIZERS_DEFAULTED_ENV`), it turns
    true and ``RAYON_NUM_THREADS`` (unless set) is the job's threads, read by the tokenizer's pool
    when it first starts. On a CPU the job's cores encode, and a user's TOKENIZERS_PARALLELISM
    stands everywhere. Tokens are the same either way."""
    env = os.environ if env is None else env
    if device_type == "cuda" and env.get(TOKENIZERS_DEFAULTED_ENV) == "1" and threads > 1:
        env["TOKENIZERS_PARALLELISM"] = "true"
        env.setdefault("RAYON_NUM_THREADS", str(threads))
    if str(env.get("TOKENIZERS_PARALLELISM", "")).lower() in ("1", "true", "yes", "on"):
        return int(env.get("RAYON_NUM_THREADS") or os.cpu_count() or 1)
    return 1


def resolve_backend(setting: str, device_type: str, precision: str) -> str:
    """The runtime ``embed.backend`` means for a passage encoder computing in ``precision`` (resolved)
    on a ``device_type`` device. ``auto`` is ``openvino`` where the encoder computes in bf16 on a
    CPU with AVX-512 BF16 but no AMX (as AMD Zen 4), the one kind it was measured on: 1.27x torch
    encoding alone, 1.18x in the pipeline's jobs, dev top-k within 0.05 points pooled, no loss a
    sign test finds (benchmarks/embedding-backends/embedding-backends.md). Elsewhere (AMX, fp32, GPUs) it is
    ``torch``, the kinds where no such measurement was made."""
    if setting not in EMBED_BACKENDS:
        raise InputError("embed.backend", f"unknown backend {setting!r}; expected one of {', '.join(EMBED_BACKENDS)}")
    if setting == "torch-cast" and precision == "fp32":
        return "torch"  # nothing to cast: the stats name what ran
    if setting != "auto":
        return setting
    return "openvino" if device_type == "cpu" and precision == "bf16" and cpu_bf16() == "avx512_bf16" else "torch"


#: The ``embed.backend`` runtimes that run the encoder in torch (on any device, compilable).
TORCH_RUNTIMES = ("torch", "torch-cast")

#: The dtypes :func:`cast_passage_encoder` casts to, by resolved compute precision.
CAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def cast_passage_encoder(model, precision: str) -> str:
    """The ``torch-cast`` backend: the passage encoder's weights cast once to ``precision`` (bf16 or
    fp16, resolved), so that the encoder runs in it throughout, layer norms, residual adds and
    pooling included; returns the precision to run it under (``fp32``: no autocast).

    Under autocast (``torch``) the weights stay fp32 and each matrix product casts its operands,
    while layer norms, the adds of the residual stream and their inputs stay in fp32 (mixed-dtype
    adds, casts of activations): on one H200 those elementwise kernels took as long as the matrix
    products (benchmarks/gpu/gpu.md). The vectors differ from autocast's within bf16 rounding: for
    MiniLM on SQuAD passages (benchmarks/precision/precision.md) each at a cosine of at least
    0.9999 to its fp32 twin."""
    if precision not in CAST_DTYPES:
        raise ValueError(f"torch-cast computes in bf16 or fp16, not {precision!r}")
    model.passage_model.to(CAST_DTYPES[precision])
    return "fp32"


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
    split on the fly with the model's ``splitter``, ``dcsr.splitter``). ``out_sentences`` receives the sentence
    number of every vector (-1 for DPR's whole-passage vectors). ``fp16`` is the stored dtype;
    ``precision`` the compute precision (:mod:`dcsr.models.precision`; ``auto`` may pick bf16).
    ``backend`` ``onnx-int8`` runs the passage encoder in ONNX Runtime with int8 weights
    (:mod:`dcsr.models.onnx_int8`), one passage per call; ``openvino`` in OpenVINO at the
    compute precision (:mod:`dcsr.models.openvino_encoder`); ``torch`` (the default) in torch;
    ``torch-cast`` in torch with the passage encoder's weights in the compute precision
    (:func:`cast_passage_encoder`; ``torch`` where that is fp32);
    ``auto`` as :func:`resolve_backend` says. The stats' ``backend`` is the one that ran."""
    resolve_backend(backend, "cpu", "fp32")  # an unknown name fails before the model loads
    dev = pick_device(device)
    backend = resolve_backend(backend, dev.type, resolve(precision, dev.type))  # torch.compile is torch's alone
    dev, tokenizer, model, meta, precision = _load_for_inference(model_dir, device, precision,
                                                                 backend in TORCH_RUNTIMES)
    log.info("passage encoder runtime %s (embed.backend)", backend)
    if backend not in TORCH_RUNTIMES and dev.type != "cpu":
        raise InputError("embed.backend", f"{backend} runs on the CPU; use torch on a GPU")
    if backend == "onnx-int8":
        from dcsr.models.onnx_int8 import use_int8_passage_encoder

        use_int8_passage_encoder(model)
        # one passage per call, so that its vector does not depend on its batchmates; pooling in fp32
        precision, batch_size = "fp32", 1
    compute = precision  # what the encoder computes in (the stats' "precision")
    if backend == "torch-cast":
        precision = cast_passage_encoder(model, precision)
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
        from dcsr.data.sentences import DEFAULT_SPLITTER, split_sentences

        table = sentence_spans(sentences, set(ids)) if sentences is not None else {}
        missing = sum(1 for i in ids if i not in table)
        if missing:
            log.warning("%d of %d passages have no sentence-table entry; splitting them now", missing, len(ids))
        splitter = meta.get("settings", {}).get("splitter", DEFAULT_SPLITTER)  # a model from before dcsr.splitter
        spans_list = [table[i] if i in table else split_sentences(t, splitter) for i, t in zip(ids, texts)]
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
    rule, where = meta.get("question_text", "raw"), f"{model_dir}/dcsr.json: question_text"  # as it trained
    stats = []
    for questions, out_vectors in sets:
        texts = [encoder_question(q, rule, where) for q in questions]
        vecs = encode_texts(model, tokenizer, texts, None, side, max_length, batch_size, dev, precision=precision,
                            progress=progress, desc=f"embed questions ({Path(out_vectors).name})")
        _save_npy(Path(out_vectors), vecs)
        stats.append({"questions": len(questions), "dim": int(vecs.shape[1]) if len(questions) else 0,
                      "vectors": str(out_vectors)})
    return stats


def qas_questions(path: str | os.PathLike) -> list[str]:
    return [qa.question for qa in iter_qas(path)]
