"""Compute precision: what `embed.precision` resolves to, and that bf16 vectors agree with fp32."""

import numpy as np
import pytest
import torch

from dcsr.models import precision
from dcsr.errors import InputError


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    amx, zen4, avx2 = tmp_path / "amx", tmp_path / "zen4", tmp_path / "avx2"
    amx.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_bf16 amx_tile\n")
    zen4.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 avx512_vnni\n")
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 fma\n")
    assert precision.cpu_bf16(str(amx)) == "amx_bf16"
    assert precision.cpu_bf16(str(zen4)) == "avx512_bf16"  # AVX-512 BF16 alone (AMD Zen 4)
    assert precision.cpu_bf16(str(avx2)) is None  # AVX2 (AMD Zen 3): bf16 only by emulation
    assert precision.cpu_bf16(str(tmp_path / "missing")) is None


@pytest.mark.parametrize("flag, expected", [("amx_bf16", "bf16"), ("avx512_bf16", "bf16"), (None, "fp32")])
def test_auto_is_bf16_on_cpus_with_bf16_instructions(monkeypatch, flag, expected):
    monkeypatch.setattr(precision, "cpu_bf16", lambda: flag)
    assert precision.resolve("auto", "cpu") == expected
    assert precision.resolve("fp32", "cpu") == "fp32" and precision.resolve("bf16", "cpu") == "bf16"


def test_fp16_on_a_cpu_and_unknown_values_are_errors():
    with pytest.raises(InputError, match="embed.precision: fp16 compute needs a CUDA device"):
        precision.resolve("fp16", "cpu")
    with pytest.raises(InputError, match="unknown precision 'half'; expected one of auto, fp32, bf16, fp16"):
        precision.resolve("half", "cpu")


def test_bf16_vectors_agree_with_fp32(tiny_bert):
    from dcsr.retrieval.embed import encode_texts
    from dcsr.models.biencoder import build_biencoder

    tok, model = build_biencoder(str(tiny_bert))
    model.eval()
    texts = ["the river flows north through the city", "a short one", "who wrote it and when was it written"]
    fp32 = encode_texts(model, tok, texts, ["t"] * 3, "passage", 32, 2, torch.device("cpu"), precision="fp32",
                        progress=False)
    bf16 = encode_texts(model, tok, texts, ["t"] * 3, "passage", 32, 2, torch.device("cpu"), precision="bf16",
                        progress=False)
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape
    assert not np.array_equal(bf16, fp32)  # it did compute in bf16
    cos = (fp32 * bf16).sum(1) / (np.linalg.norm(fp32, axis=1) * np.linalg.norm(bf16, axis=1))
    assert cos.min() > 0.99


def test_auto_on_cuda_counts_native_bf16_only(monkeypatch):
    """A V100 or T4 runs bf16 by emulation only, which torch.cuda.is_bf16_supported() counts by
    default: auto must ask for native bf16 and take fp16 (with a GradScaler) there."""
    native = {"value": False}

    def is_bf16_supported(including_emulation=True):
        return native["value"] or including_emulation

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    assert precision.resolve("auto", "cuda") == "fp16"  # emulated bf16 only (V100, T4)
    native["value"] = True
    assert precision.resolve("auto", "cuda") == "bf16"  # A100, H100

    def old_signature():  # a torch before the argument: its answer is taken as it is
        return False

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", old_signature)
    assert precision.resolve("auto", "cuda") == "fp16"
