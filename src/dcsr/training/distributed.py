"""Where and how training computes: the process group (one process, or torchrun's DDP over
GPUs or gloo on CPU) and each process's share of the job's threads, gathering question and
passage vectors from every process, the NLL loss on the global score matrix (as DPR's
``_calc_loss``), and the autocast precision of ``amp``."""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from dcsr.errors import InputError
from dcsr.models.biencoder import score

#: How long a process waits in an NCCL collective (torch's default: 10 minutes) while rank 0 alone
#: hashes the inputs or writes a checkpoint on a slow shared file system.
NCCL_TIMEOUT = datetime.timedelta(minutes=60)

@dataclass
class DistContext:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    threads: str = ""  # how the process's threads were chosen (thread_budget), for the log

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def thread_budget(environ=os.environ) -> tuple[int, str]:
    """``(threads, why)``: this process's share of its job's CPU threads, and where it came from.

    The job's threads are ``OMP_NUM_THREADS`` (Snakemake sets it to the job's ``threads``, and
    torchrun passes it to every process it starts), else the cores this process may run on
    (``os.sched_getaffinity``). The ``LOCAL_WORLD_SIZE`` processes torchrun starts on a node share
    them: each takes ``max(1, job threads // LOCAL_WORLD_SIZE)``, where each used to take them all
    (8 processes of a 16-thread job ran 128 threads on 16 cores)."""
    local = max(1, int(environ.get("LOCAL_WORLD_SIZE") or 1))
    omp = (environ.get("OMP_NUM_THREADS") or "").strip()
    if omp.isdigit() and int(omp) > 0:
        job, source = int(omp), "OMP_NUM_THREADS"
    else:
        try:
            job, source = len(os.sched_getaffinity(0)), "the cores this process may run on"
        except AttributeError:  # not Linux
            job, source = os.cpu_count() or 1, "the machine's cores"
    threads = max(1, job // local)
    return threads, (f"{threads} torch thread(s) per process: the job's {job} ({source}) over {local} process(es) "
                     "on this node")


def setup_distributed() -> tuple[DistContext, bool]:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK; start a process group when WORLD_SIZE > 1.

    With several processes on a node (``LOCAL_WORLD_SIZE`` > 1) each takes its share of the job's
    threads (:func:`thread_budget`): ``torch.set_num_threads`` and ``OMP_NUM_THREADS`` for the
    processes it starts (data loader workers). One process keeps torch's own count (which torch
    takes from ``OMP_NUM_THREADS`` too), so that an explicit ``torch.set_num_threads`` stands.

    Returns ``(context, started)``; ``started`` says whether this call created the group.
    """
    if int(os.environ.get("LOCAL_WORLD_SIZE") or 1) > 1:
        threads, why = thread_budget()
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
    else:
        why = f"{torch.get_num_threads()} torch thread(s) in one process"
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        # a launcher that shows each task its own GPU (srun --gpus-per-task=1) leaves one device
        torch.cuda.set_device(local_rank % torch.cuda.device_count() if world > 1 else torch.cuda.current_device())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    started = False
    if world > 1 and not dist.is_initialized():
        if cuda:  # rank 0 alone hashes inputs and writes 2-3 GB checkpoints while the others wait in NCCL
            dist.init_process_group("nccl", timeout=NCCL_TIMEOUT)
        else:
            dist.init_process_group("gloo")
        started = True
    return DistContext(rank, world, local_rank, device, why), started


def gather_rows(local: Tensor, ctx: DistContext) -> tuple[Tensor, list[int]]:
    """Concatenate ``local`` ``[n_r, ...]`` of every process in rank order: ``[sum n_r, ...]``.

    Row counts may differ between processes (padding is stripped). As DPR's ``_calc_loss``,
    the other processes' rows are detached copies and this process's rows are ``local``
    itself, so gradients flow back through the local part only. Returns the rows and the
    per-rank counts.
    """
    if not ctx.enabled:
        return local, [local.shape[0]]
    n = torch.tensor([local.shape[0]], device=local.device, dtype=torch.long)
    counts = [torch.zeros_like(n) for _ in range(ctx.world)]
    dist.all_gather(counts, n)
    sizes = [int(c.item()) for c in counts]
    longest = max(sizes)
    padded = local
    if local.shape[0] < longest:
        pad = local.new_zeros((longest - local.shape[0],) + tuple(local.shape[1:]))
        padded = torch.cat([local, pad], dim=0)
    bufs = [torch.empty_like(padded) for _ in range(ctx.world)]
    dist.all_gather(bufs, padded.detach().contiguous())
    bufs[ctx.rank] = padded  # keep the graph for the local rows
    return torch.cat([b[:s] for b, s in zip(bufs, sizes)], dim=0), sizes


def global_vectors(q: Tensor, p: Tensor, positive_index: Tensor, ctx: DistContext) -> tuple[Tensor, Tensor, Tensor]:
    """Gather ``q [B_r, H]``, ``p [P_r, H]`` and targets ``[B_r]`` of all processes into the
    global batch ``[B, H]``, ``[P, H]``, ``[B]`` (targets shifted to global passage rows)."""
    p_all, p_sizes = gather_rows(p, ctx)
    q_all, _ = gather_rows(q, ctx)
    shifted = positive_index.to(p.device) + sum(p_sizes[: ctx.rank])
    targets, _ = gather_rows(shifted, ctx)
    return q_all, p_all, targets


def nll_loss(q: Tensor, p: Tensor, targets: Tensor) -> tuple[Tensor, int]:
    """DPR's ``BiEncoderNllLoss``: mean over questions of ``-log softmax(q @ p.T)[i, target_i]``.

    q: ``[B, H]``; p: ``[P, H]``; targets: ``[B]``. Scores are computed in float32. Returns
    the loss and how many questions score their positive highest (in-batch correct).
    """
    scores = score(q.float(), p.float())  # [B, P]
    log_probs = F.log_softmax(scores, dim=1)
    loss = F.nll_loss(log_probs, targets, reduction="mean")
    correct = int((scores.detach().argmax(dim=1) == targets).sum().item())
    return loss, correct


def _amp_dtype(setting: str, device: torch.device):
    """``(autocast dtype or None, use GradScaler)`` for the ``amp`` setting: what
    :func:`dcsr.models.precision.resolve` makes of it (``auto``: bf16 on CUDA that computes it
    natively, else fp16 with a GradScaler; bf16 on a CPU with AMX or AVX-512 BF16; else none),
    ``off`` being fp32."""
    from dcsr.models.precision import resolve

    if setting == "fp16" and device.type != "cuda":
        raise InputError("settings.amp", "fp16 needs a CUDA device; use 'off' or 'bf16' on CPU")
    resolved = resolve("fp32" if setting == "off" else setting, device.type, where="settings.amp")
    return {"fp32": (None, False), "bf16": (torch.bfloat16, False), "fp16": (torch.float16, True)}[resolved]


def _autocast(device: torch.device, dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
