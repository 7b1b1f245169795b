"""GPUs on the machine that runs the jobs: how many a job of a GPU rule takes, and which.

Snakemake counts a ``gpu`` resource (``--resources gpu=N`` caps the sum over running jobs) but
never says *which* GPU a job may use, so without help every job would open ``cuda:0``. Two
parts fix that:

- :func:`job_gpus`: a GPU rule's ``gpu`` resource is what the config asks (``train.gpus``,
  ``embed.gpus``, ``index.gpus``) or, where that is 0 and the jobs run on this machine (not on a
  cluster's nodes), 1 if torch (or faiss, for searching) sees a GPU here (:func:`gpus_here`), for
  the job will use it. On a machine without one it stays 0: nothing changes.
- ``python -m dcsr.pipeline.gpus N -- COMMAND...`` starts each GPU rule's command: it takes N of
  the GPUs visible here (all of them where it asks for more), each held through an exclusive
  ``flock`` on a file of its own in :func:`lock_dir`, sets ``CUDA_VISIBLE_DEVICES`` to them and
  execs the command, which keeps the locks (inherited descriptors) until it and its children
  exit. A job that finds fewer than N
  free waits, holding none meanwhile (no two jobs can block each other). With N = 0, without
  GPUs, or inside a Slurm job that sees no more GPUs than it asks for (Slurm bound the job's own)
  it execs the command untouched; inside one Slurm allocation of more GPUs (Snakemake's local
  executor in ``salloc``) the jobs share them out as on any machine.
- ``DCSR_JOBS_PER_GPU`` (:func:`jobs_per_gpu`, default 1) lets that many jobs share each GPU,
  each holding one of its slots (a lock file each; slot 0's is the one-job lock), never two
  slots of one GPU. A job holds its GPU from its start to its end, its imports included, so
  small models on a large GPU (a test config: a GPU job of a tiny BERT is some 10 s of Python
  and CUDA start for under a second on the GPU) run one at a time without it. Runs that share
  a machine share slots 0 to K-1: give them the same value. ``--count`` prints the GPUs times
  the slots, the ``--resources gpu=`` that ``make demo`` passes.

Torch and faiss are asked in a child process, only where a GPU driver is present, so a CPU
machine pays nothing and the process that builds the DAG never initialises CUDA. That child
imports torch and faiss and starts CUDA (662 MB and seconds of CPU in every GPU job of the GPU
kit's DAG on an H200, 2026-11-28: its ``children_peak_rss_mb``), so the process that builds the
DAG asks once and hands its answer to the GPU jobs it starts on this machine
(:func:`counts_for_jobs`, :data:`GPUS_HERE_ENV`); a job that runs in another environment (a
conda environment's) or under another ``CUDA_VISIBLE_DEVICES`` asks for itself.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dcsr.drivers import DRIVER_NODES, gpu_driver_present
from dcsr.pipeline.job_shell import running_python

_PROBE = """
import json
counts = {"torch": 0, "faiss": 0}
try:
    import torch
    counts["torch"] = torch.cuda.device_count() if torch.cuda.is_available() else 0
except Exception:
    pass
try:
    import faiss
    counts["faiss"] = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
except Exception:
    pass
print(json.dumps(counts))
"""


def listed_devices(env=None) -> list[str] | None:
    """The devices ``CUDA_VISIBLE_DEVICES`` lists, up to the first invalid entry as CUDA reads it
    (``""`` and ``-1`` hide every GPU); None where it is unset."""
    value = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            break
        out.append(item)
    return out


#: The GPU counts of the process that built the DAG, for the GPU jobs it starts on this machine
#: (:func:`counts_for_jobs`; read by :func:`inherited_counts`).
GPUS_HERE_ENV = "DCSR_GPUS_HERE"
_COUNTED = ("torch", "faiss")


def counts_for_jobs(counts: dict[str, int], environment: str | None = None, env=None) -> str:
    """:data:`GPUS_HERE_ENV`'s value: ``counts`` as the Python environment ``environment``
    (default: this one, ``sys.prefix``) found them under this ``CUDA_VISIBLE_DEVICES``, which a
    job's :func:`gpus_here` takes only where both are its own. The environment, not the
    interpreter's path: Snakemake runs as the venv's ``python3`` and a job as its ``python``."""
    env = os.environ if env is None else env
    return json.dumps({**{k: int(counts.get(k, 0)) for k in _COUNTED},
                       "environment": sys.prefix if environment is None else str(environment),
                       "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES")})


def inherited_counts(environment: str | None = None, env=None) -> dict[str, int] | None:
    """The counts :data:`GPUS_HERE_ENV` hands down, where ``environment`` (default: this one)
    counted them under the ``CUDA_VISIBLE_DEVICES`` of ``env``; None where it is unset,
    malformed or another's."""
    env = os.environ if env is None else env
    environment = sys.prefix if environment is None else str(environment)
    try:
        told = json.loads(env.get(GPUS_HERE_ENV) or "null")
    except ValueError:
        return None
    if (not isinstance(told, dict) or told.get("environment") != environment
            or told.get("cuda_visible_devices") != env.get("CUDA_VISIBLE_DEVICES")):
        return None
    counts = {k: told.get(k) for k in _COUNTED}
    if not all(type(v) is int and v >= 0 for v in counts.values()):
        return None
    return counts


@functools.cache
def gpus_here(python: str | None = None) -> dict[str, int]:
    """``{"torch": n, "faiss": m}``: the GPUs that torch's CUDA and faiss see on this machine,
    asked of ``python`` (default: this Python, unless the process that started this one counted
    them in this environment, :func:`inherited_counts`) in a child process (0 where it fails, or
    where no GPU driver or ``CUDA_VISIBLE_DEVICES`` hides them all, without asking)."""
    none = {"torch": 0, "faiss": 0}
    if listed_devices() == [] or not gpu_driver_present(DRIVER_NODES):
        return none
    if python is None and (known := inherited_counts()) is not None:
        return known
    try:
        python = python or str(running_python())  # absolute: Snakemake's --directory moved the cwd
        r = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=300)
        counts = json.loads(r.stdout.strip().splitlines()[-1])
        return {k: int(counts.get(k, 0)) for k in none}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        print(f"dcsr.pipeline.gpus: could not count the GPUs ({e}); the jobs ask for none", file=sys.stderr)
        return none


@functools.cache
def gpus_here_for_jobs() -> dict[str, int]:
    """:func:`gpus_here`, handed to the jobs this process starts (:data:`GPUS_HERE_ENV` in its
    environment), so that a GPU job's ``python -m dcsr.pipeline.gpus`` does not start torch and
    faiss a second time to count them. For the process that runs the jobs on this machine."""
    counts = gpus_here()
    os.environ[GPUS_HERE_ENV] = counts_for_jobs(counts)
    return counts


def job_gpus(configured: int, usable: bool) -> int:
    """A GPU rule's ``gpu`` resource: the config's count, else 1 where the job will find a GPU
    it uses (``usable``), else 0."""
    return int(configured) if int(configured) > 0 else int(bool(usable))


def lock_dir(env=None) -> Path:
    """Where the GPUs' lock files are: ``DCSR_GPU_LOCK_DIR``, else a folder of this user's in the
    temporary directory, so that every run of one user on this machine shares them."""
    env = os.environ if env is None else env
    return Path(env.get("DCSR_GPU_LOCK_DIR") or Path(tempfile.gettempdir()) / f"dcsr-gpu-locks-{os.getuid()}")


JOBS_PER_GPU_ENV = "DCSR_JOBS_PER_GPU"


def jobs_per_gpu(env=None) -> int:
    """How many jobs may share one GPU: ``DCSR_JOBS_PER_GPU``, default 1 (a GPU a job)."""
    value = (os.environ if env is None else env).get(JOBS_PER_GPU_ENV, "").strip()
    if not value:
        return 1
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{JOBS_PER_GPU_ENV}={value!r}: expected a whole number of jobs, at least 1")
    return int(value)


def _lock_name(device: str, slot: int = 0) -> str:
    return "gpu-" + re.sub(r"[^A-Za-z0-9_.-]", "_", device) + (f".slot{slot}" if slot else "") + ".lock"


def _lock_one(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def try_acquire(n: int, devices: list[str], where: Path, slots: int = 1) -> list[tuple[str, int]] | None:
    """``n`` of ``devices``, each with one of its ``slots`` lock files in ``where`` that this
    process could lock, as (device, open descriptor holding the lock) in the order of
    ``devices``; None, holding nothing, where fewer than ``n`` have a free slot. Slot 0 of every
    device is tried before slot 1 of any, so that jobs spread over the GPUs before they share."""
    where.mkdir(parents=True, exist_ok=True)
    held: dict[str, int] = {}
    for slot in range(slots):
        for device in devices:
            if device in held or (fd := _lock_one(where / _lock_name(device, slot))) is None:
                continue
            held[device] = fd
            if len(held) == n:
                return [(d, held[d]) for d in devices if d in held]
    for fd in held.values():
        os.close(fd)
    return None


def acquire(n: int, devices: list[str], where: Path, poll: float = 2.0, timeout: float | None = None,
            say=None, slots: int = 1) -> list[tuple[str, int]]:
    """:func:`try_acquire` until ``n`` devices have a free slot (every ``poll`` seconds, at most
    ``timeout``). Raises ValueError where ``devices`` has fewer than ``n``, TimeoutError."""
    if n > len(devices):
        raise ValueError(f"the job needs {n} GPU(s), and this machine shows {len(devices)} "
                         f"({','.join(devices) or 'none'})")
    start, told = time.monotonic(), False
    while (held := try_acquire(n, devices, where, slots)) is None:
        if timeout is not None and time.monotonic() - start > timeout:
            raise TimeoutError(f"no {n} of the GPUs {','.join(devices)} came free in {timeout:g} s (locks in {where})")
        if say and not told:
            say(f"waiting for {n} of the GPUs {','.join(devices)} (others' jobs hold them; locks in {where})")
            told = True
        time.sleep(poll)
    return held


def visible_devices(env=None) -> list[str]:
    """The GPUs a job here may be given: those ``CUDA_VISIBLE_DEVICES`` lists, else 0..n-1 for
    the n that torch or faiss sees."""
    listed = listed_devices(env)
    if listed is not None and not listed:
        return []
    counts = gpus_here()
    n = max(counts.values())
    return listed[:n] if listed is not None else [str(i) for i in range(n)]


def run(argv: list[str]) -> None:
    """``N -- COMMAND...``: exec COMMAND on N GPUs of its own (see the module's doc); ``--count``
    prints the GPU jobs that may run here at once (the GPUs visible here times :func:`jobs_per_gpu`)."""
    try:
        slots = jobs_per_gpu()
    except ValueError as e:
        raise SystemExit(f"dcsr.pipeline.gpus: {e}") from None
    if argv[:1] == ["--count"]:
        print(len(visible_devices()) * slots)
        return
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        raise SystemExit("usage: python -m dcsr.pipeline.gpus N -- COMMAND [ARG...] | --count")
    n, command = int(argv[0]), argv[2:]
    devices = visible_devices() if n > 0 else []
    if devices and "SLURM_JOB_ID" in os.environ and len(devices) <= n:
        devices = []  # Slurm bound this job its own GPUs (the executor's job), no more than it asked for
    if devices:  # here, or in one Slurm allocation whose GPUs Snakemake's local executor shares out
        say = lambda msg: print(f"dcsr.pipeline.gpus: {msg}", file=sys.stderr, flush=True)  # noqa: E731
        if n > len(devices):
            say(f"the job asks for {n} GPUs; this machine shows {len(devices)}, which it gets")
        held = acquire(min(n, len(devices)), devices, lock_dir(), say=say, slots=slots)
        for _, fd in held:
            os.set_inheritable(fd, True)
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(d for d, _ in held)
        say(f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}"
            + (f" (one of {slots} jobs a GPU, {JOBS_PER_GPU_ENV})" if slots > 1 else ""))
    sys.stdout.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    run(sys.argv[1:])
