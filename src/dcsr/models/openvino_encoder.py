"""The ``openvino`` encoder backend: a transformer converted with ``openvino.convert_model`` and
run by OpenVINO's CPU plugin, in fp32 or in bf16 (``INFERENCE_PRECISION_HINT``).

It stands in for a Hugging Face encoder inside a :class:`~dcsr.models.biencoder.BiEncoder`, as
:mod:`dcsr.models.onnx_int8` does: the same inputs, an output with ``last_hidden_state``;
pooling, markers and normalization stay the bi-encoder's own, in fp32. Batches stay as torch
makes them (length-sorted, padded to their longest passage): the weights are not quantized, so
a passage's vector does not hang on its batchmates more than in torch.

Measured (benchmarks/embedding-backends/embedding-backends.md): on a CPU with AVX-512 BF16 (AMD Zen 4) OpenVINO in
bf16 encodes 1.3x faster than torch under bf16 autocast, its vectors as close to fp32 as torch's
bf16 ones; on AVX2 without bf16 instructions its fp32 is about 1.1x torch's fp32. Training
always stays in torch.
"""

from __future__ import annotations

import logging
import warnings
from types import SimpleNamespace
from typing import Callable

import numpy as np
import torch

from dcsr.errors import InputError
from dcsr.models.onnx_int8 import LastHidden, input_names, numpy_feed

log = logging.getLogger(__name__)

#: Our resolved compute precisions (dcsr.models.precision) as OpenVINO's inference precision hint.
HINTS = {"fp32": "f32", "bf16": "bf16"}


class OpenVINOEncoder(torch.nn.Module):
    """A compiled OpenVINO model in the shape of a Hugging Face encoder (``last_hidden_state``,
    float32 on the CPU)."""

    def __init__(self, compiled, names: tuple[str, ...], config):
        super().__init__()
        self.compiled, self.names, self.config = compiled, names, config
        self.request = compiled.create_infer_request()

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, **_):
        feed = numpy_feed(self.names, input_ids, attention_mask, token_type_ids)
        out = self.request.infer(list(feed.values()))  # by position, in the order of `names`
        hidden = np.array(out[self.compiled.output(0)], dtype=np.float32)  # a copy: the request reuses its buffer
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden).to(input_ids.device))


def openvino_encoder(model: torch.nn.Module, precision: str = "fp32", threads: int | None = None,
                     transform: Callable | None = None) -> OpenVINOEncoder:
    """``model`` (a Hugging Face encoder) converted to OpenVINO and compiled for the CPU at a
    resolved ``precision`` (fp32 or bf16) with ``threads`` threads (default: torch's), one
    stream, latency first, threads not pinned to cores. ``transform`` may rewrite the converted
    ``openvino.Model`` before it is compiled (benchmarks/embedding-backends/embed_throughput.py quantizes it with
    NNCF). Nothing is written to disk."""
    if precision not in HINTS:
        raise InputError("embed.precision", f"the openvino backend computes in fp32 or bf16, not {precision}")
    import openvino as ov

    model = model.eval()
    names = input_names(model)
    # a padded example, the kind of batch it runs (an unpadded one converts as well: checked with MiniLM)
    example = {"input_ids": torch.tensor([[101, 2023, 2003, 102], [101, 2023, 102, 0]]),
               "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
               "token_type_ids": torch.tensor([[0, 0, 1, 1], [0, 0, 1, 0]])}
    with torch.no_grad(), warnings.catch_warnings():  # inputs by position, in the order of `names`
        # the tracer's notices on Python branches: shapes checked once (tests run other shapes)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        converted = ov.convert_model(LastHidden(model, names), example_input=tuple(example[n] for n in names),
                                     input=[(ov.PartialShape([-1, -1]), ov.Type.i64) for _ in names])
    if transform is not None:
        converted = transform(converted)
    threads = int(threads or torch.get_num_threads())
    compiled = ov.Core().compile_model(converted, "CPU", {
        "INFERENCE_PRECISION_HINT": HINTS[precision], "INFERENCE_NUM_THREADS": threads,
        "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1,
        # unpinned: pinned, two one-thread jobs on one machine both took core 0 (wall twice the CPU time)
        "ENABLE_CPU_PINNING": False})
    log.info("openvino: %s converted and compiled (OpenVINO %s, %s, %d threads)", type(model).__name__,
             ov.__version__, compiled.get_property("INFERENCE_PRECISION_HINT"), threads)
    return OpenVINOEncoder(compiled, names, model.config)


def use_openvino_passage_encoder(bi_encoder, precision: str) -> None:
    """Swap a :class:`~dcsr.models.biencoder.BiEncoder`'s passage encoder for its OpenVINO twin."""
    bi_encoder.passage_model = openvino_encoder(bi_encoder.passage_model, precision)
