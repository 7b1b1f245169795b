"""The ``onnx-int8`` encoder backend: a transformer exported to ONNX, its weights quantized to int8
per channel with activations quantized per call (ONNX Runtime's dynamic quantization), run by
ONNX Runtime on the CPU.

It stands in for a Hugging Face encoder inside a :class:`~dcsr.models.biencoder.BiEncoder`: the
same inputs, an output with ``last_hidden_state``; pooling, markers and normalization stay the
bi-encoder's own. Activations are quantized with one scale per call, so a passage's vector would
depend on the passages it is batched with; :func:`int8_encoder` therefore runs one text per call
(``batch_size`` 1 in :func:`dcsr.retrieval.embed.encode_texts`), which also leaves no padding,
and a passage gets the same vector in any shard and any batch.

Measured on the demo (benchmarks/embedding-backends/embedding-backends.md): faster than torch fp32 on CPUs without
native bf16, at a cost in top-k recorded there. Training always stays in torch.
"""

from __future__ import annotations

import inspect
import logging
import tempfile
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

log = logging.getLogger(__name__)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class LastHidden(torch.nn.Module):
    """The encoder with positional inputs and its last hidden state as the one output (what the
    ONNX exporter and ``openvino.convert_model`` trace)."""

    def __init__(self, model: torch.nn.Module, names: tuple[str, ...]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args))).last_hidden_state


def input_names(model: torch.nn.Module) -> tuple[str, ...]:
    """The inputs of ``INPUTS`` that ``model``'s forward takes, in that order (an exported
    encoder's positional inputs)."""
    sig = inspect.signature(model.forward).parameters
    return tuple(n for n in INPUTS if n in sig)


def numpy_feed(names: tuple[str, ...], input_ids, attention_mask=None, token_type_ids=None) -> dict:
    """The inputs ``names`` of an exported encoder as int64 numpy arrays (token types all zeros
    where a model that takes them is called without, as Hugging Face does)."""
    given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    feed = {}
    for name in names:
        value = given[name] if given[name] is not None else torch.zeros_like(input_ids)
        feed[name] = value.detach().cpu().numpy().astype(np.int64, copy=False)
    return feed


class Int8Encoder(torch.nn.Module):
    """An ONNX Runtime session in the shape of a Hugging Face encoder (``last_hidden_state``)."""

    def __init__(self, session, config):
        super().__init__()
        self.session = session
        self.names = tuple(i.name for i in session.get_inputs())
        self.config = config  # the exported model's (hidden_size, ...)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, **_):
        feed = numpy_feed(self.names, input_ids, attention_mask, token_type_ids)
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        return SimpleNamespace(last_hidden_state=torch.from_numpy(hidden).to(input_ids.device))


def int8_encoder(model: torch.nn.Module, threads: int | None = None, quantize: bool = True) -> Int8Encoder:
    """``model`` (a Hugging Face encoder in eval mode) exported to ONNX, its ``MatMul`` weights
    quantized to int8 per output channel, in an ONNX Runtime session of ``threads`` threads
    (default: torch's). ``quantize=False`` keeps the fp32 export (to test the export alone).
    Nothing is written outside a temporary folder."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = model.eval()
    names = input_names(model)
    example = {"input_ids": torch.tensor([[101, 2023, 102], [101, 2003, 102]]),
               "attention_mask": torch.ones(2, 3, dtype=torch.long),
               "token_type_ids": torch.zeros(2, 3, dtype=torch.long)}
    axes = {n: {0: "batch", 1: "length"} for n in (*names, "last_hidden_state")}
    with tempfile.TemporaryDirectory(prefix="dcsr-onnx-") as tmp:
        fp32 = Path(tmp) / "encoder.onnx"
        run = Path(tmp) / "encoder.int8.onnx" if quantize else fp32
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
            torch.onnx.export(LastHidden(model, names), tuple(example[n] for n in names), str(fp32),
                              input_names=list(names), output_names=["last_hidden_state"], dynamic_axes=axes,
                              opset_version=17, dynamo=False)
        if quantize:
            quantize_dynamic(str(fp32), str(run), weight_type=QuantType.QInt8, per_channel=True)
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads or torch.get_num_threads())
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        session = ort.InferenceSession(str(run), options, providers=["CPUExecutionProvider"])
    log.info("onnx-int8: %s exported and quantized (ONNX Runtime %s, %d threads)", type(model).__name__,
             ort.__version__, options.intra_op_num_threads)
    return Int8Encoder(session, model.config)


def use_int8_passage_encoder(bi_encoder) -> None:
    """Swap a :class:`~dcsr.models.biencoder.BiEncoder`'s passage encoder for its int8 ONNX twin."""
    bi_encoder.passage_model = int8_encoder(bi_encoder.passage_model)
