"""Compute precision of the encoders: which dtype a forward pass runs in, apart from the dtype
vectors are stored in.

``auto`` picks bfloat16 where the hardware computes it natively: a CUDA device with native bf16
(Ampere and later; else float16, with a GradScaler in training: a V100 or T4 only emulates bf16),
or a CPU with bf16 instructions in ``/proc/cpuinfo``: Intel AMX (``amx_bf16``) or AVX-512 BF16
(``avx512_bf16``, as on AMD Zen 4). Measured (benchmarks/precision/precision.md), MiniLM encodes 2.6x
faster under bf16 autocast with AMX and about 1.7x with AVX-512 BF16 alone, every vector at a
cosine of at least 0.9999 to its fp32 twin; a CPU with neither (AVX2) emulates bf16 and runs it
slower than fp32, so ``auto`` keeps fp32 there. ``fp32``, ``bf16`` and ``fp16`` force a
precision (fp16 only on CUDA).
"""

from __future__ import annotations

import contextlib
import functools

from dcsr.errors import InputError
from dcsr.settings import PRECISIONS


NATIVE_BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # the CPU flags under which auto computes in bf16


@functools.lru_cache(maxsize=4)
def cpu_bf16(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The bf16 instructions of this machine's CPU: ``"amx_bf16"`` (Intel AMX),
    ``"avx512_bf16"`` (AVX-512 BF16 without AMX, as AMD Zen 4), or None (none, or unknown: not
    Linux)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split())
                    return next((f for f in NATIVE_BF16_FLAGS if f in flags), None)
    except OSError:
        pass
    return None


def cuda_native_bf16() -> bool:
    """Whether the current CUDA device computes bf16 natively (Ampere and later).
    ``torch.cuda.is_bf16_supported()`` also counts emulation by default, which says yes on a V100
    or T4, where bf16 runs slowly; ``including_emulation=False`` (torch >= 2.3) asks for the
    hardware alone; a torch without the argument is asked without it."""
    import torch

    try:
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    except TypeError:  # a torch before the argument
        return bool(torch.cuda.is_bf16_supported())


def resolve(setting: str, device_type: str, where: str = "embed.precision") -> str:
    """The precision that ``setting`` means on a ``device_type`` ("cpu" / "cuda") device:
    ``fp32``, ``bf16`` or ``fp16``."""
    if setting not in PRECISIONS:
        raise InputError(where, f"unknown precision {setting!r}; expected one of {', '.join(PRECISIONS)}")
    if setting == "auto":
        if device_type == "cuda":
            return "bf16" if cuda_native_bf16() else "fp16"
        return "bf16" if device_type == "cpu" and cpu_bf16() else "fp32"
    if setting == "fp16" and device_type != "cuda":
        raise InputError(where, "fp16 compute needs a CUDA device; use fp32 or bf16 on a CPU")
    return setting


def autocast(precision: str, device_type: str):
    """The autocast context of a resolved precision (none for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device_type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def cpu_host(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's vendor and the SIMD level torch runs its kernels at (``GenuineIntel/AVX512``,
    ``AuthenticAMD/AVX2``). fp32 results are deterministic on one kind of CPU, but MKL and ATen
    take other code paths on another, and a tiny model's near-ties may then flip."""
    vendor = "unknown"
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("vendor_id"):
                    vendor = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch

        level = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - no torch, no level: the key still names the vendor
        level = "unknown"
    return f"{vendor}/{level}"


def kind_key(device: str = "cpu", precision: str = "fp32", backend: str = "torch",
             gpu_name: str | None = None) -> str:
    """The kind of a run, as pins record it: ``"<host> <precision> <backend>"``. The host is
    the CPU (:func:`cpu_host`, plus its bf16 instructions when it computed in bf16: AMX and
    AVX-512 BF16 take other kernels) or ``cuda:<device name>``. So ``auto``'s choices are part
    of the kind: a CUDA bf16 run, or OpenVINO on a Zen 4, is a kind of its own."""
    if device == "cuda":
        host = f"cuda:{gpu_name or 'unknown'}"
    else:
        host = cpu_host()
        if precision == "bf16":
            host += f"+{cpu_bf16() or 'emulated'}"
    return f"{host} {precision} {backend}"
