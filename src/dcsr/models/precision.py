"""Compute precision of the encoders: which dtype a forward pass runs in, apart from the dtype
vectors are stored in.

``auto`` picks bfloat16 where the hardware runs it natively: a CUDA device with bf16 support
(else float16), or a CPU with Intel AMX (``amx_bf16`` in ``/proc/cpuinfo``), where
sentence-transformers' MiniLM encodes about 2.5x faster under bf16 autocast with every vector at
a cosine of at least 0.9999 to its fp32 twin (BENCHMARKS.md). CPUs without AMX (AVX-512 BF16
alone, as on AMD Zen 4, or none) run bf16 by emulation or slower kernels, so ``auto`` keeps fp32
there. ``fp32``, ``bf16`` and ``fp16`` force a precision (fp16 only on CUDA).
"""

from __future__ import annotations

import contextlib
import functools

from dcsr.errors import InputError
from dcsr.settings import PRECISIONS


@functools.lru_cache(maxsize=1)
def cpu_has_amx_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this machine's CPU has Intel AMX with bf16 (Linux; False where unknown)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return "amx_bf16" in line.split()
    except OSError:
        pass
    return False


def resolve(setting: str, device_type: str, where: str = "embed.precision") -> str:
    """The precision that ``setting`` means on a ``device_type`` ("cpu" / "cuda") device:
    ``fp32``, ``bf16`` or ``fp16``."""
    if setting not in PRECISIONS:
        raise InputError(where, f"unknown precision {setting!r}; expected one of {', '.join(PRECISIONS)}")
    if setting == "auto":
        if device_type == "cuda":
            import torch

            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "bf16" if device_type == "cpu" and cpu_has_amx_bf16() else "fp32"
    if setting == "fp16" and device_type != "cuda":
        raise InputError(where, "fp16 compute needs a CUDA device; use fp32 or bf16 on a CPU")
    return setting


def autocast(precision: str, device_type: str):
    """The autocast context of a resolved precision (none for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device_type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
