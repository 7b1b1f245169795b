"""What every benchmark records about the machine it ran on."""

import json
import os
import platform
import time
from pathlib import Path

import torch


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} cores, {cpu_model()}, {gpu}, torch {torch.__version__}, {torch.get_num_threads()} threads"


def emit(result: dict, out: str | None) -> None:
    """Print a benchmark's result as JSON, and write it to ``out`` when given."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")


def timed(fn, repeats: int) -> tuple[float, list[float]]:
    """``(seconds of a warm-up call of fn, [seconds of each of repeats more calls])``, each call
    between CUDA synchronizations where a GPU is present."""
    out = []
    for _ in range(repeats + 1):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return out[0], out[1:]
