"""What every benchmark records about the machine it ran on."""

import os
import platform

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
