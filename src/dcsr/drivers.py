"""Whether this machine has a GPU driver at all, from its device nodes alone.

Importing torch costs seconds of CPU: the same search job on a Zen 1 took 2.41-2.52 s of CPU
with it and 0.46-0.47 s without. A job on a machine without a GPU driver has no GPU to find, so it asks nothing: the
search jobs' ``index.gpu: auto`` (:func:`dcsr.retrieval.placement.torch_cuda_available`) and the
GPU count of the DAG (:func:`dcsr.pipeline.gpus.gpus_here`) look here first.
"""

from __future__ import annotations

import os

#: Device nodes of the drivers that torch's CUDA (NVIDIA), ROCm (AMD) and WSL2's CUDA go through.
DRIVER_NODES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg")


def gpu_driver_present(nodes=None) -> bool:
    """Whether one of ``nodes`` (:data:`DRIVER_NODES` as it is when asked) exists: without one,
    neither torch nor faiss can see a GPU."""
    return any(os.path.exists(p) for p in (DRIVER_NODES if nodes is None else nodes))
