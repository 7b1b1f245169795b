"""The ONNX Runtime variants tried before the onnx-int8 backend was written: the passage encoder
exported to ONNX (fp32, with ORT's transformer graph fusions, int8 weights per tensor or per
channel, reduce_range, uint8 weights, fused then quantized, one passage per call) against torch
fp32, on the demo's first passages, one thread (benchmarks/embedding-backends/embedding-backends.md,
"Speed, first look"). Every variant runs the pipeline's encode path
(``dcsr.retrieval.embed.encode_texts``, length-sorted batches) with the passage encoder swapped.

    python benchmarks/embedding-backends/ort_variants.py [--model results/models/dpr-a] \\
        [--corpus results/data/squad/psgs_w100.tsv] [--passages 300] [--threads 1] [--out FILE]

``--model`` is a bi-encoder folder of the pipeline (``results/models/untrained`` is the demo's
MiniLM untrained). Per variant: seconds, speed relative to torch fp32, and the lowest and median
cosine of its vectors to torch's.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for benchmarks_common
from benchmarks_common import emit, machine  # noqa: E402


def export(model, path: Path) -> None:
    """``model`` (a Hugging Face encoder) to ONNX fp32, as :func:`dcsr.models.onnx_int8.int8_encoder` does."""
    from dcsr.models.onnx_int8 import LastHidden, input_names

    names = input_names(model)
    example = {"input_ids": torch.tensor([[101, 2023, 102], [101, 2003, 102]]),
               "attention_mask": torch.ones(2, 3, dtype=torch.long), "token_type_ids": torch.zeros(2, 3, dtype=torch.long)}
    axes = {n: {0: "batch", 1: "length"} for n in (*names, "last_hidden_state")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(LastHidden(model.eval(), names), tuple(example[n] for n in names), str(path),
                          input_names=list(names), output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)


def variants(fp32: Path, config, tmp: Path) -> dict[str, tuple[Path, int]]:
    """``{name: (onnx file, batch size)}`` of every variant of the page's table."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    fused = tmp / "fused.onnx"
    optimize_model(str(fp32), model_type="bert", num_heads=config.num_attention_heads,
                   hidden_size=config.hidden_size).save_model_to_file(str(fused))

    def q(name, source=fp32, **kw):
        out = tmp / f"{name}.onnx"
        quantize_dynamic(str(source), str(out), **kw)
        return out

    per_channel = q("int8-channel", per_channel=True, weight_type=QuantType.QInt8)
    return {"fp32 export": (fp32, 64), "fp32, transformer graph fusions": (fused, 64),
            "int8 per tensor, batch 64": (q("int8-tensor", weight_type=QuantType.QInt8), 64),
            "int8 per channel, batch 64": (per_channel, 64),
            "int8 per channel, reduce_range": (q("int8-rr", per_channel=True, reduce_range=True,
                                                 weight_type=QuantType.QInt8), 64),
            "int8 per channel, uint8 weights": (q("uint8", per_channel=True, weight_type=QuantType.QUInt8), 64),
            # the fused graph's contrib ops hide their outputs' types from shape inference: say fp32
            "int8 per channel after the graph fusions": (q("fused-int8", fused, per_channel=True,
                                                           weight_type=QuantType.QInt8,
                                                           extra_options={"DefaultTensorType": 1}), 64),
            "int8 per channel, one passage per call": (per_channel, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="results/models/dpr-a")
    ap.add_argument("--corpus", default="results/data/squad/psgs_w100.tsv")
    ap.add_argument("--passages", type=int, default=300)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    import onnxruntime as ort

    from dcsr.data.formats import iter_passages
    from dcsr.models.onnx_int8 import Int8Encoder
    from dcsr.retrieval.embed import _load_for_inference, encode_texts

    dev, tokenizer, model, meta, _ = _load_for_inference(a.model, "cpu", "fp32", compile=False)
    passages = list(itertools.islice(iter_passages(a.corpus), a.passages))
    length = int(meta.get("passage_max_length", 256))

    def encode(batch_size):
        t = time.perf_counter()
        vecs = encode_texts(model, tokenizer, [p.text for p in passages], [p.title for p in passages], "passage",
                            length, batch_size, dev, progress=False)
        return vecs, time.perf_counter() - t

    base, base_s = encode(64)
    rows = {"torch fp32, batch 64": {"seconds": round(base_s, 2)}}
    torch_encoder = model.passage_model
    with tempfile.TemporaryDirectory(prefix="ort-variants-") as tmp:
        fp32 = Path(tmp) / "encoder.onnx"
        export(torch_encoder, fp32)
        for name, (path, batch_size) in variants(fp32, torch_encoder.config, Path(tmp)).items():
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = a.threads, 1, 3
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            model.passage_model = Int8Encoder(session, torch_encoder.config)
            vecs, seconds = encode(batch_size)
            cos = (vecs * base).sum(1) / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(base, axis=1))
            rows[name] = {"seconds": round(seconds, 2), "speed": round(base_s / seconds, 2),
                          "lowest_cosine": round(float(cos.min()), 4), "median_cosine": round(float(np.median(cos)), 4)}
            print(f"{name}: {rows[name]}", file=sys.stderr, flush=True)
        model.passage_model = torch_encoder
    emit({"machine": machine(), "onnxruntime": ort.__version__, "model": a.model, "passages": len(passages),
          "threads": a.threads, "variants": rows}, a.out)


if __name__ == "__main__":
    main()
