"""Train a DPR bi-encoder: NLL over in-batch negatives plus BM25 hard negatives.

The recipe is DPR's (Karpukhin et al. 2020, ``train_dense_encoder.py``): per question its
first positive passage, one hard negative from ``hard_negative_ctxs`` (shuffled every
epoch), all other questions' passages of the batch as negatives; dot-product scores, NLL
of the positive; AdamW with linear warm-up then linear decay, gradient-norm clipping.

Run it in one process (CPU or one GPU) or under ``torchrun`` (DDP, one GPU per process or
gloo on CPU). Every process sees the same globally shuffled order and takes its slice of
each *global* batch (``batch_size * world_size`` questions); question and passage vectors
are gathered from all processes (as DPR's ``_calc_loss``) and the loss is computed on the
global score matrix, so N processes with ``batch_size`` train exactly like one process
with ``batch_size * N``.

Sample building is the replaceable part: :class:`SampleBuilder` turns a training record
into a question, its passages and the index of the positive vector; DCSR subclasses it
(sentence markers, ``pool_positions``, sentence-level ``positive_index``) and passes the
class to :func:`train` without touching the loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from dcsr.errors import InputError
from dcsr.training.fingerprint import describe_change, file_identity, init_identity
from dcsr.data.formats import read_biencoder
from dcsr.fsutil import atomic_open, atomic_path
from dcsr.models.biencoder import (BiEncoder, build_biencoder, load_biencoder, score, tokenize_passages, tokenize_questions,
                    write_biencoder)
from dcsr.settings import NOT_IN_FINGERPRINT, TRAIN, Setting, Settings, filled
from dcsr.training.gradcache import grad_cache_step

# ---------------------------------------------------------------------- settings


def validate_settings(settings: Mapping[str, Any] | None, extra: Mapping[str, Setting] | None = None) -> Settings:
    """The full settings: the given ones checked against :data:`dcsr.settings.TRAIN` (plus
    ``extra``, the keys a :class:`SampleBuilder` adds) and every default filled in. An
    :class:`InputError` names any unknown key (and the closest valid one), wrong type or
    out-of-range value."""
    full = filled({**TRAIN, **(extra or {})}, settings, "settings")
    if full["dev_batch_size"] is None:
        full["dev_batch_size"] = full["batch_size"]
    return Settings(full)


def load_settings(arg: str | None) -> dict:
    """Settings from a JSON string, or from a JSON/YAML file if ``arg`` names one."""
    if arg is None or not str(arg).strip():
        return {}
    text, where = arg, "--settings"
    if os.path.isfile(arg):
        where = arg
        if arg.endswith((".yaml", ".yml")):
            from dcsr.yamlutil import strict_load

            return _settings_mapping(strict_load(Path(arg)), where)
        with open(arg, encoding="utf-8") as fh:
            text = fh.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(where, f"settings are neither an existing file nor valid JSON: {e.msg}")
    return _settings_mapping(value, where)


def _settings_mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(where, f"settings must be a JSON object, found {type(value).__name__}")
    return value


# ---------------------------------------------------------------------- samples


@dataclass
class Sample:
    """One question and its passages; ``positive`` indexes ``passages``."""

    question: str
    passages: list[dict]
    positive: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Batch:
    """A tokenized batch. ``q``: question inputs ``[B, Lq]``; ``p``: passage inputs ``[P, Lp]``
    (and, for DCSR, ``pool_positions``); ``positive_index`` ``[B]`` long: for each question
    the row of its positive among the vectors the passage encoder returns for ``p``."""

    q: dict
    p: dict
    positive_index: Tensor
    size: int

    def to(self, device: torch.device) -> "Batch":
        move = lambda d: {k: (v.to(device) if isinstance(v, Tensor) else v) for k, v in d.items()}  # noqa: E731
        return Batch(move(self.q), move(self.p), self.positive_index.to(device), self.size)


def sample_rng(seed: int, epoch: int, index: int) -> random.Random:
    """The RNG of one training sample: a function of (seed, epoch, record index) only, so that
    negatives do not depend on the number of processes, the batch size or a resume."""
    return random.Random(f"{seed}:{epoch}:{index}")


class SampleBuilder:
    """DPR's ``BiEncoder.create_biencoder_input``: questions, their passages, positive indices.

    Per question the passages are ``[positive, other negatives..., hard negatives...]`` (DPR's
    order; with the default ``other_negatives=0`` a batch is ``[pos_1, hn_1, pos_2, hn_2, ...]``)
    and the target of question i is the row of its positive in the concatenation.
    Subclasses (DCSR) override :meth:`sample` and/or :meth:`collate`, and may declare extra
    settings keys in ``SETTINGS`` (``{key: dcsr.settings.Setting}``).
    """

    method = "dpr"
    SETTINGS: dict[str, Setting] = {}

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.hard_negatives = settings["hard_negatives"]
        self.other_negatives = settings["other_negatives"]
        self.shuffle_positives = settings["shuffle_positives"]
        self.question_max_length = settings["question_max_length"]
        self.passage_max_length = settings["passage_max_length"]

    def setup(self, tokenizer, model: BiEncoder) -> None:
        """Called once with the tokenizer and the bi-encoder before training or export (DCSR
        binds its tokenizer and makes sure ``<sent>`` has an embedding row)."""

    @classmethod
    def input_files(cls) -> dict[str, str]:
        """Files besides the training and dev sets that determine the trained model, by name
        (DCSR: its sentence table); they enter the checkpoint's fingerprint."""
        return {}

    def prepare_records(self, records: list[dict], where: str, log: Callable[[str], None]) -> list[dict]:
        """The records of ``where`` (a file) that can be trained on; DPR keeps them all."""
        return records

    def sample(self, record: Mapping[str, Any], rng: random.Random, shuffle: bool = True,
               hard_negatives: int | None = None, other_negatives: int | None = None) -> Sample:
        """One training sample from a biencoder record (``shuffle=False`` for validation)."""
        n_hard = self.hard_negatives if hard_negatives is None else hard_negatives
        n_other = self.other_negatives if other_negatives is None else other_negatives
        positives = record["positive_ctxs"]
        if shuffle and self.shuffle_positives:
            positive = positives[rng.randrange(len(positives))]
        else:
            positive = positives[0]
        others = list(record.get("negative_ctxs", []))
        hard = list(record.get("hard_negative_ctxs", []))
        if shuffle:
            rng.shuffle(others)
            rng.shuffle(hard)
        if not hard:  # DPR's hard_neg_fallback: random negatives stand in for missing BM25 ones
            hard = others[:n_hard]
        passages = [positive] + others[:n_other] + hard[:n_hard]
        return Sample(record["question"], passages, 0)

    def collate(self, tokenizer, samples: Sequence[Sample]) -> Batch:
        """Tokenize samples into a :class:`Batch` (passages of all samples concatenated)."""
        questions, titles, texts, positive_index = [], [], [], []
        for s in samples:
            positive_index.append(len(texts) + s.positive)
            questions.append(s.question)
            titles.extend(p.get("title", "") for p in s.passages)
            texts.extend(p["text"] for p in s.passages)
        q = dict(tokenize_questions(tokenizer, questions, self.question_max_length))
        p = dict(tokenize_passages(tokenizer, titles, texts, self.passage_max_length))
        return Batch(q, p, torch.tensor(positive_index, dtype=torch.long), len(samples))

    def build(self, tokenizer, records: Sequence[Mapping[str, Any]], rngs: Sequence[random.Random],
              shuffle: bool = True, **kw) -> Batch:
        return self.collate(tokenizer, [self.sample(r, g, shuffle, **kw) for r, g in zip(records, rngs)])


def build_samples(records: Sequence[Mapping[str, Any]], settings: Mapping[str, Any] | None = None,
                  epoch: int = 0, indices: Sequence[int] | None = None, shuffle: bool = True,
                  builder: SampleBuilder | None = None) -> list[Sample]:
    """The samples of ``records`` (``indices`` into them, default all) in ``epoch``."""
    if builder is None:
        builder = SampleBuilder(validate_settings(settings))
    seed = builder.settings["seed"]
    indices = range(len(records)) if indices is None else indices
    return [builder.sample(records[i], sample_rng(seed, epoch, i), shuffle) for i in indices]


# ---------------------------------------------------------------------- distributed


@dataclass
class DistContext:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_distributed() -> tuple[DistContext, bool]:
    """Read torchrun's RANK / WORLD_SIZE / LOCAL_RANK; start a process group when WORLD_SIZE > 1.

    Returns ``(context, started)``; ``started`` says whether this call created the group.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank if world > 1 else torch.cuda.current_device())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
    started = False
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
        started = True
    return DistContext(rank, world, local_rank, device), started


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


# ---------------------------------------------------------------------- validation


def _split(indices: Sequence[int], ctx: DistContext) -> list[int]:
    return [int(i) for i in np.array_split(np.asarray(indices, dtype=np.int64), ctx.world)[ctx.rank]]


def _encode_local(model: BiEncoder, tokenizer, builder: SampleBuilder, samples: list[Sample],
                  ctx: DistContext, amp_dtype) -> tuple[Tensor, Tensor, Tensor]:
    h = model.hidden_size
    if not samples:  # a process may get no dev questions in the last, partial batch
        empty = torch.zeros((0, h), device=ctx.device)
        return empty, empty, torch.zeros((0,), dtype=torch.long, device=ctx.device)
    batch = builder.collate(tokenizer, samples).to(ctx.device)
    with _autocast(ctx.device, amp_dtype):
        q, p = model(batch.q, batch.p)
    return q.float(), p.float(), batch.positive_index


@torch.no_grad()
def evaluate(model: BiEncoder, tokenizer, dev_records: Sequence[Mapping[str, Any]],
             settings: Mapping[str, Any] | None = None, builder: SampleBuilder | None = None,
             ctx: DistContext | None = None, amp_dtype=None, progress: bool = False,
             average_rank: bool = True) -> dict:
    """DPR's two validations on the dev set, plus the DCSR paper's in-batch accuracy.

    Both read the first ``val_max_qs`` dev questions (all when null, as DPR).

    - ``nll_loss`` / ``accuracy`` (DPR's ``validate_nll``; DCSR Appendix A): dev batches of
      ``dev_batch_size * world_size`` questions built as training batches but unshuffled
      (first positive, first hard negatives); mean batch loss, and the fraction of
      questions whose highest-scoring passage in their batch is their positive.
    - ``average_rank`` (DPR's ``validate_average_rank``): the first ``val_av_rank_max_qs``
      questions with ``val_av_rank_hard_neg`` hard and ``val_av_rank_other_neg`` other
      negatives each; all their passages pooled; the mean 0-based rank of each question's
      positive among all pooled passages (as DPR: 0 = ranked first). ``average_rank=False``
      skips it (``average_rank`` is then ``None``): DPR computes it only from
      ``val_av_rank_start_epoch`` on, as it encodes ``1 + hard + other`` passages per question.

    ``model`` is the bare :class:`BiEncoder` (not DDP-wrapped); every process must call
    this, each encodes its slice, and all get the same numbers.
    """
    ctx = ctx or DistContext(device=next(model.parameters()).device)
    if builder is None:
        builder = SampleBuilder(validate_settings(settings))
    s = builder.settings
    was_training = model.training
    model.eval()
    n = len(dev_records) if s["val_max_qs"] is None else min(len(dev_records), s["val_max_qs"])
    global_bs = s["dev_batch_size"] * ctx.world
    n_rank = min(n, s["val_av_rank_max_qs"]) if average_rank else 0
    bar = None
    if progress and ctx.main:
        from tqdm import tqdm

        bar = tqdm(total=n + n_rank, desc="validate", unit=" q", file=sys.stderr, leave=False, mininterval=1.0)

    losses, correct = [], 0
    for start in range(0, n, global_bs):
        local = _split(range(start, min(n, start + global_bs)), ctx)
        samples = [builder.sample(dev_records[i], sample_rng(s["seed"], -1, i), shuffle=False) for i in local]
        q, p, pos = _encode_local(model, tokenizer, builder, samples, ctx, amp_dtype)
        q_all, p_all, targets = global_vectors(q, p, pos, ctx)
        loss, c = nll_loss(q_all, p_all, targets)
        losses.append(float(loss))
        correct += c
        if bar:
            bar.update(q_all.shape[0])

    q_parts, p_parts, t_parts, offset = [], [], [], 0
    for start in range(0, n_rank, global_bs):
        local = _split(range(start, min(n_rank, start + global_bs)), ctx)
        samples = [builder.sample(dev_records[i], sample_rng(s["seed"], -1, i), shuffle=False,
                                  hard_negatives=s["val_av_rank_hard_neg"], other_negatives=s["val_av_rank_other_neg"])
                   for i in local]
        q, p, pos = _encode_local(model, tokenizer, builder, samples, ctx, amp_dtype)
        q_all, p_all, targets = global_vectors(q, p, pos, ctx)
        q_parts.append(q_all.cpu())
        p_parts.append(p_all.cpu())
        t_parts.append(targets.cpu() + offset)
        offset += p_all.shape[0]
        if bar:
            bar.update(q_all.shape[0])
    if bar:
        bar.close()
    rank_sum = 0
    if n_rank:
        q_mat, p_mat, t_vec = torch.cat(q_parts), torch.cat(p_parts), torch.cat(t_parts)
        for i in range(0, q_mat.shape[0], 1024):  # [1024, P] score blocks bound the memory
            sc = score(q_mat[i : i + 1024], p_mat)
            gold = sc.gather(1, t_vec[i : i + 1024, None])
            rank_sum += int((sc > gold).sum().item())
    model.train(was_training)
    return {
        "nll_loss": float(np.mean(losses)) if losses else float("nan"),
        "accuracy": correct / n if n else float("nan"),
        "average_rank": (rank_sum / n_rank if n_rank else float("nan")) if average_rank else None,
        "questions": n,
        "average_rank_questions": n_rank,
        "average_rank_passages": offset,
    }


# ---------------------------------------------------------------------- helpers


def _amp_dtype(setting: str, device: torch.device):
    """``(autocast dtype or None, use GradScaler)`` for the ``amp`` setting: what
    :func:`dcsr.models.precision.resolve` makes of it (``auto``: bf16 on CUDA that has it, else fp16
    with a GradScaler; bf16 on a CPU with AMX; else none), ``off`` being fp32."""
    from dcsr.models.precision import resolve

    if setting == "fp16" and device.type != "cuda":
        raise InputError("settings.amp", "fp16 needs a CUDA device; use 'off' or 'bf16' on CPU")
    resolved = resolve("fp32" if setting == "off" else setting, device.type, where="settings.amp")
    return {"fp32": (None, False), "bf16": (torch.bfloat16, False), "fp16": (torch.float16, True)}[resolved]


def _autocast(device: torch.device, dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def linear_schedule(optimizer, warmup_steps: int, total_steps: int):
    """DPR's ``get_schedule_linear``: lr rises linearly over ``warmup_steps`` from 0, then
    falls linearly to 0 at ``total_steps``."""

    def lr_lambda(step: int) -> float:
        if step < warmup_steps:
            return float(step) / float(max(1, warmup_steps))
        return max(0.0, float(total_steps - step) / float(max(1, total_steps - warmup_steps)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def _optimizer(model: torch.nn.Module, s: Mapping[str, Any]):
    # DPR's get_optimizer: no weight decay on biases and LayerNorm weights (the 1-d tensors).
    decay, no_decay = [], []
    for _, param in model.named_parameters():
        if param.requires_grad:
            (no_decay if param.ndim < 2 else decay).append(param)
    groups = [{"params": decay, "weight_decay": s["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=s["learning_rate"], eps=s["adam_eps"])


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The global sample order of one epoch; identical in every process."""
    return np.random.default_rng([seed, epoch]).permutation(n)


class _EpochBatches(torch.utils.data.Dataset):
    """Item i: this process's slice of global batch ``start + i`` of an epoch, tokenized."""

    def __init__(self, records, order, builder, tokenizer, epoch, start, steps, ctx: DistContext):
        self.records, self.order, self.builder, self.tokenizer = records, order, builder, tokenizer
        self.epoch, self.start, self.steps, self.ctx = epoch, start, steps, ctx
        self.batch_size = builder.settings["batch_size"]

    def __len__(self) -> int:
        return self.steps - self.start

    def __getitem__(self, i: int) -> Batch:
        b, g = self.batch_size, self.batch_size * self.ctx.world
        first = (self.start + i) * g + self.ctx.rank * b
        idx = self.order[first : first + b]
        seed = self.builder.settings["seed"]
        samples = [self.builder.sample(self.records[j], sample_rng(seed, self.epoch, int(j)), True) for j in idx]
        return self.builder.collate(self.tokenizer, samples)


def _identity(x):
    return x


def _stderr_log(msg: str) -> None:
    print(f"[train] {msg}", file=sys.stderr, flush=True)


LAST = "last"
STATE_FILE = "trainer_state.pt"
VALIDATION_FILE = "validation.json"
TRAIN_LOG = "train_log.jsonl"
FINGERPRINT_FILE = "fingerprint.json"
STALE = "stale"


def fingerprint(s: Mapping[str, Any], method: str, train_json: Path, dev_json: Path, init: str,
                inputs: Mapping[str, str], world: int, compute: str | None = None) -> dict:
    """Everything that determines the model a run becomes: the method, every setting but
    :data:`~dcsr.settings.NOT_IN_FINGERPRINT` (the batch as the global batch, which is what
    the loss sees), the content of the training and dev sets and of ``inputs`` (DCSR's
    sentence table), the initial checkpoint, and ``compute``, the precision that ``amp`` resolved
    to on this machine (``auto`` is bf16 on a CPU with AMX, fp32 on one without). A checkpoint
    resumes only on an exact match."""
    settings = {k: v for k, v in s.items() if k not in NOT_IN_FINGERPRINT + ("batch_size", "dev_batch_size")}
    if s.get("grad_cache_chunk") and s.get("dropout") != 0.0:
        # with dropout on (None: the checkpoint's own, BERT's 0.1), chunks draw other masks than
        # one pass over the batch: the same loss in expectation, not the same model
        settings["grad_cache_chunk"] = s["grad_cache_chunk"]
    return {
        "method": method,
        "settings": {**settings, "global_batch": s["batch_size"] * world,
                     "global_dev_batch": s["dev_batch_size"] * world},
        "training data": file_identity(train_json),
        "dev data": file_identity(dev_json),
        **{name: file_identity(path) for name, path in sorted(inputs.items())},
        "init": init_identity(init),
        **({"compute": compute} if compute is not None else {}),
    }


def _unreadable(state_file: Path) -> str | None:
    """Why a checkpoint's state file cannot be loaded, or None. torch.save writes a zip archive:
    its directory and every member's CRC are checked, which reads the file once without
    unpickling it."""
    import zipfile

    try:
        with zipfile.ZipFile(state_file) as z:
            bad = z.testzip()
        return None if bad is None else f"member {bad} is damaged"
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        return str(e) or type(e).__name__


def _set_aside(checkpoint_dir: Path, last: Path, reason: str, say: Callable[[str], None]) -> None:
    """Move a checkpoint that does not match this run to ``checkpoint_dir/stale/<time>``
    (never deleted: it is a user's data) and say why in one line."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest = checkpoint_dir / STALE / stamp
    n = 1
    while dest.exists():
        n += 1
        dest = checkpoint_dir / STALE / f"{stamp}-{n}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(last, dest)
    say(f"checkpoint {last} set aside: it does not match this run ({reason}); moved it to {dest}, "
        "training from the start")


def _recover_last(checkpoint_dir: Path) -> Path | None:
    """``checkpoint_dir/last`` if present. A kill inside atomic_path's directory swap can
    leave only ``.last.old``; it is complete, so it is put back."""
    last = checkpoint_dir / LAST
    old = checkpoint_dir / f".{LAST}.old"
    if not last.exists() and (old / STATE_FILE).is_file():
        os.replace(old, last)
    for stale in checkpoint_dir.glob(f".{LAST}.*.tmp"):  # half-written checkpoints of a killed run
        shutil.rmtree(stale, ignore_errors=True)
    return last if (last / STATE_FILE).is_file() else None


# ---------------------------------------------------------------------- training


def train(settings: Mapping[str, Any] | None, train_json: str | os.PathLike, dev_json: str | os.PathLike, init: str,
          output_dir: str | os.PathLike, checkpoint_dir: str | os.PathLike,
          log: Callable[[str], None] | None = None, builder_cls: type[SampleBuilder] = SampleBuilder) -> dict:
    """Train a bi-encoder from checkpoint ``init`` and write it to ``output_dir``.

    Runs single-process, or one process per device under ``torchrun`` (RANK / WORLD_SIZE /
    LOCAL_RANK from the environment). Resumes from ``checkpoint_dir/last`` when its
    fingerprint (:func:`fingerprint`: inputs, init, settings) equals this run's; a checkpoint
    that does not match is moved to ``checkpoint_dir/stale/`` and training starts fresh.
    Only rank 0 writes: checkpoints (``checkpoint_dir/last/``: the bi-encoder layout,
    ``trainer_state.pt``, ``validation.json``), the live ``checkpoint_dir/train_log.jsonl``,
    and at the very end, atomically, ``output_dir`` (``question_encoder/``,
    ``passage_encoder/``, ``dcsr.json``, ``validation.json``, ``train_log.jsonl``).
    Returns a summary (steps, last validation) in every process.
    """
    s = validate_settings(settings, builder_cls.SETTINGS)
    ctx, started = setup_distributed()
    try:
        trainer = Trainer(s, Path(train_json), Path(dev_json), init, Path(output_dir), Path(checkpoint_dir),
                          log or _stderr_log, builder_cls, ctx)
        return trainer.run()
    finally:
        if started:
            dist.destroy_process_group()


class Trainer:
    """One training run, in named steps: :meth:`setup` (data, model, optimizer, and whether the
    last checkpoint is this run's), :meth:`resume` (its state, when it is), :meth:`step` (one
    optimization step on a global batch), :meth:`validate`, :meth:`save` (a checkpoint) and
    :meth:`finish` (the trained model, atomically). :meth:`run` is the loop that calls them.

    ``settings`` is one :class:`~dcsr.settings.Settings` of :data:`dcsr.settings.TRAIN` plus
    the builder's keys, checked, defaults filled (:func:`validate_settings`)."""

    def __init__(self, settings: Settings, train_json: Path, dev_json: Path, init: str, output_dir: Path,
                 checkpoint_dir: Path, log: Callable[[str], None], builder_cls: type[SampleBuilder],
                 ctx: DistContext):
        self.s, self.ctx = settings, ctx
        self.train_json, self.dev_json, self.init = train_json, dev_json, init
        self.output_dir, self.checkpoint_dir = output_dir, checkpoint_dir
        self.builder_cls = builder_cls
        self.say = log if ctx.main else (lambda msg: None)
        self.step_no, self.epoch, self.pos = 0, 0, 0
        self.history: list[dict] = []
        self.log_fh = None

    # ------------------------------------------------------------------ setup and resume
    def setup(self) -> None:
        """Read the data, decide whether ``checkpoint_dir/last`` is this run's (else set it
        aside), build or load the model, and make the optimizer, schedule and scaler."""
        s, ctx = self.s, self.ctx
        self.builder = self.builder_cls(s)
        records = read_biencoder(self.train_json)
        dev_records = read_biencoder(self.dev_json)
        self.global_bs = s.batch_size * ctx.world

        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        last = _recover_last(self.checkpoint_dir) if ctx.main else None
        self.amp_dtype, use_scaler = _amp_dtype(s.amp, ctx.device)
        compute = str(self.amp_dtype or torch.float32).removeprefix("torch.")
        # JSON-normalised, as it is compared with the one stored beside the checkpoint
        self.identity = json.loads(json.dumps(fingerprint(s, self.builder.method, self.train_json, self.dev_json,
                                                          self.init, self.builder_cls.input_files(), ctx.world,
                                                          compute))) if ctx.main else None
        if last is not None:
            try:
                old = json.loads((last / FINGERPRINT_FILE).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                old = None
            if old != self.identity:
                _set_aside(self.checkpoint_dir, last, describe_change(old, self.identity), self.say)
                last = None
            elif (damage := _unreadable(last / STATE_FILE)) is not None:
                # a state cut short (a full disk, a killed copy) fails the same way on every rerun:
                # set it aside like a mismatched one and start over
                _set_aside(self.checkpoint_dir, last, f"{STATE_FILE} cannot be read ({damage})", self.say)
                last = None
        if ctx.enabled:  # rank 0 decided; everyone then reads the same state
            dist.barrier()
            last = self.checkpoint_dir / LAST if (self.checkpoint_dir / LAST / STATE_FILE).is_file() else None
        self.state = torch.load(last / STATE_FILE, map_location="cpu", weights_only=False) if last is not None else None

        # Same seed in every process for anything random in building the model; dropout then
        # gets a per-process stream.
        random.seed(s.seed)
        np.random.seed(s.seed)
        torch.manual_seed(s.seed)
        if self.state is not None:
            self.tokenizer, self.model, _ = load_biencoder(last, device="cpu", dropout=s.dropout)
        else:
            self.tokenizer, self.model = build_biencoder(self.init, s.pooling, s.dropout, s.normalize, s.scale)
        self.builder.setup(self.tokenizer, self.model)
        self.records = self.builder.prepare_records(records, str(self.train_json), self.say)
        self.dev_records = self.builder.prepare_records(dev_records, str(self.dev_json), self.say)
        if not self.dev_records:
            raise InputError(str(self.dev_json), "the dev set has no usable records")
        self.steps_per_epoch = len(self.records) // self.global_bs  # the last partial global batch is dropped
        if self.steps_per_epoch == 0:
            raise InputError(str(self.train_json), f"{len(self.records)} training records are fewer than one global "
                                                   f"batch ({s.batch_size} x {ctx.world} processes)")
        self.total_steps = s.epochs * self.steps_per_epoch
        if s.max_steps:
            self.total_steps = min(self.total_steps, s.max_steps)
        self.warmup = int(round(s.warmup_ratio * self.total_steps)) if s.warmup_ratio is not None else s.warmup_steps
        self.model.to(ctx.device)
        self.model.train()
        torch.manual_seed(s.seed + ctx.rank)
        if ctx.enabled:
            from torch.nn.parallel import DistributedDataParallel

            self.ddp = DistributedDataParallel(self.model,
                                               device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
        else:
            self.ddp = self.model
        self.optimizer = _optimizer(self.model, s)
        self.scheduler = linear_schedule(self.optimizer, self.warmup, self.total_steps)
        self.scaler = torch.amp.GradScaler(ctx.device.type, enabled=use_scaler)
        self.meta = {
            "method": self.builder.method,
            "trained": True,
            "base_checkpoint": self.init,
            "question_max_length": s.question_max_length,
            "passage_max_length": s.passage_max_length,
            "settings": dict(s),
            "world_size": ctx.world,
            "fingerprint": self.identity,
        }

    def resume(self) -> None:
        """Take up the state of the checkpoint :meth:`setup` kept (optimizer, schedule, scaler,
        position, validations, every process's RNG), and the training log up to its step."""
        state, ctx = self.state, self.ctx
        if state is not None:
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.scaler.load_state_dict(state["scaler"])
            self.step_no, self.epoch, self.pos = state["step"], state["epoch"], state["position"]
            self.history = list(state["validation"])
            rng = state["rng"]
            if len(rng) == ctx.world:
                _set_rng_state(rng[ctx.rank])
            else:
                # the global batch is the same (the fingerprint checks it), but the per-process
                # random streams cannot be carried over: dropout masks differ from here on
                self.say(f"the checkpoint was written by {len(rng)} process(es), this run has {ctx.world}: the "
                         "random state of each process restarts from the seed (dropout masks and the order of "
                         f"ties differ from an uninterrupted run of {len(rng)})")
            self.say(f"resuming from step {self.step_no} (epoch {self.epoch}, batch {self.pos} of "
                     f"{self.steps_per_epoch})")
        else:
            self.say(f"starting from {self.init}")
        self.say(f"{len(self.records)} training records, {len(self.dev_records)} dev; {ctx.world} process(es) on "
                 f"{ctx.device}; global batch {self.global_bs}; {self.steps_per_epoch} steps per epoch; "
                 f"{self.total_steps} steps; warm-up {self.warmup}; amp {self.amp_dtype}")
        self.log_path = self.checkpoint_dir / TRAIN_LOG
        if ctx.main:
            kept = []
            if state is not None and self.log_path.exists():
                with open(self.log_path, encoding="utf-8") as fh:
                    kept = [line for line in fh if line.strip() and json.loads(line).get("step", 0) <= self.step_no]
            with atomic_open(self.log_path, "w", encoding="utf-8") as fh:
                fh.writelines(kept)
            self.log_fh = open(self.log_path, "a", encoding="utf-8")

    # ------------------------------------------------------------------ the loop's steps
    def epoch_batches(self) -> torch.utils.data.DataLoader:
        """This process's batches of the rest of the current epoch (up to ``max_steps``), from
        the current position: the epoch's global order, tokenized in ``num_workers`` workers."""
        s = self.s
        order = _epoch_order(len(self.records), s.seed, self.epoch)
        steps_here = min(self.steps_per_epoch, self.pos + (self.total_steps - self.step_no))
        data = _EpochBatches(self.records, order, self.builder, self.tokenizer, self.epoch, self.pos, steps_here,
                             self.ctx)
        # A loader draws its workers' base seed from the generator it is given, else from
        # torch's global RNG, which also drives dropout: a resume (a new loader mid-epoch)
        # would then shift the dropout stream. Its own generator keeps the global RNG intact.
        return torch.utils.data.DataLoader(data, batch_size=None, shuffle=False, num_workers=s.num_workers,
                                           collate_fn=_identity, generator=torch.Generator().manual_seed(s.seed + self.epoch))

    def step(self, batch: Batch) -> tuple[float, float, float]:
        """One optimization step on this process's slice of a global batch: ``(loss, in-batch
        accuracy, learning rate)``. With ``grad_cache_chunk`` the slice is encoded that many
        questions at a time (:mod:`dcsr.training.gradcache`): the same loss and gradients."""
        ctx = self.ctx
        batch = batch.to(ctx.device)
        if self.s.grad_cache_chunk > 0:
            # GradCache: the same loss and gradients, the batch encoded grad_cache_chunk questions at a time
            def loss_fn(q: Tensor, p: Tensor) -> tuple[Tensor, tuple[Tensor, int, int]]:
                q_all, p_all, targets = global_vectors(q, p, batch.positive_index, ctx)
                loss, correct = nll_loss(q_all, p_all, targets)
                return self.scaler.scale(loss * ctx.world), (loss, correct, q_all.shape[0])

            loss, correct, questions = grad_cache_step(self.ddp, batch.q, batch.p, self.s.grad_cache_chunk, loss_fn,
                                                       encoder=self.model,
                                                       autocast=lambda: _autocast(ctx.device, self.amp_dtype))
        else:
            with _autocast(ctx.device, self.amp_dtype):
                q, p = self.ddp(batch.q, batch.p)
            q_all, p_all, targets = global_vectors(q.float(), p.float(), batch.positive_index, ctx)
            loss, correct = nll_loss(q_all, p_all, targets)
            questions = q_all.shape[0]
            # Each process back-propagates through its own rows only and DDP averages the
            # gradients; scaling by world_size makes that average the single-process
            # gradient of the global batch.
            self.scaler.scale(loss * ctx.world).backward()
        self.scaler.unscale_(self.optimizer)
        if self.s.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.s.max_grad_norm)
        lr = self.scheduler.get_last_lr()[0]
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_no += 1
        self.pos += 1
        return float(loss.detach()), correct / questions, lr

    def validate(self) -> None:
        """In-batch NLL and accuracy on the dev set (and DPR's average rank), appended to the
        run's validation history."""
        s, t0 = self.s, time.time()
        # DPR computes the average rank from val_av_rank_start_epoch on; the run's last
        # validation always does, so that every trained model reports one.
        rank = self.epoch >= s.val_av_rank_start_epoch or self.step_no >= self.total_steps
        result = evaluate(self.model, self.tokenizer, self.dev_records, builder=self.builder, ctx=self.ctx,
                          amp_dtype=self.amp_dtype, progress=True, average_rank=rank)
        result = {"epoch": self.epoch, "step": self.step_no, **result, "seconds": round(time.time() - t0, 3)}
        self.history.append(result)
        ranked = (f"average rank {result['average_rank']:.2f} ({result['average_rank_questions']} questions, "
                  f"{result['average_rank_passages']} passages)" if rank else
                  f"average rank from epoch {s.val_av_rank_start_epoch} on")
        self.say(f"validation epoch {self.epoch} step {self.step_no}: nll {result['nll_loss']:.4f}, in-batch "
                 f"accuracy {result['accuracy']:.4f}, {ranked}")

    def save(self) -> None:
        """A checkpoint at ``checkpoint_dir/last``, replaced atomically: the model, the trainer's
        state with every process's RNG, the validations and the fingerprint."""
        ctx = self.ctx
        rng = [None] * ctx.world
        if ctx.enabled:
            dist.all_gather_object(rng, _rng_state())
        else:
            rng = [_rng_state()]
        if not ctx.main:
            return
        trainer_state = {
            "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(), "step": self.step_no, "epoch": self.epoch, "position": self.pos,
            "rng": rng, "validation": self.history, "settings": dict(self.s), "world_size": ctx.world,
            "total_steps": self.total_steps,
        }
        with atomic_path(self.checkpoint_dir / LAST) as tmp:
            write_biencoder(self.model, self.tokenizer, tmp, {**self.meta, "step": self.step_no, "epoch": self.epoch})
            torch.save(trainer_state, tmp / STATE_FILE)
            _write_json(tmp / VALIDATION_FILE, self.history)
            _write_json(tmp / FINGERPRINT_FILE, self.identity)

    def finish(self) -> dict:
        """Write the trained model to ``output_dir`` (rank 0, atomically) and return the summary."""
        ctx = self.ctx
        if ctx.main:
            with atomic_path(self.output_dir) as tmp:
                write_biencoder(self.model, self.tokenizer, tmp,
                                {**self.meta, "step": self.step_no, "epoch": self.epoch})
                _write_json(tmp / VALIDATION_FILE, self.history)
                shutil.copy(self.log_path, tmp / TRAIN_LOG)
            self.say(f"wrote {self.output_dir} after {self.step_no} steps")
        if ctx.enabled:
            dist.barrier()
        return {"steps": self.step_no, "epoch": self.epoch, "validation": self.history[-1] if self.history else None}

    def run(self) -> dict:
        """setup, resume, then steps (validating and saving after each epoch, and every
        ``checkpoint_every_steps``) until ``max_steps`` or ``epochs``; then finish."""
        from tqdm import tqdm

        s, ctx = self.s, self.ctx
        self.setup()
        self.resume()
        bar = tqdm(total=self.total_steps, initial=self.step_no, desc="train", unit=" step", file=sys.stderr,
                   disable=not ctx.main, mininterval=1.0, dynamic_ncols=True)
        rolling: list[float] = []
        try:
            while self.step_no < self.total_steps and self.epoch < s.epochs:
                for batch in self.epoch_batches():
                    t0 = time.time()
                    value, accuracy, lr = self.step(batch)
                    rolling.append(value)
                    if self.log_fh is not None:
                        self.log_fh.write(json.dumps({"step": self.step_no, "epoch": self.epoch, "loss": value,
                                                      "accuracy": accuracy, "lr": lr,
                                                      "seconds": round(time.time() - t0, 4)}) + "\n")
                        self.log_fh.flush()
                    bar.update(1)
                    bar.set_postfix(loss=f"{value:.4f}", epoch=self.epoch, refresh=False)
                    if s.log_every_steps and self.step_no % s.log_every_steps == 0:
                        self.say(f"step {self.step_no}/{self.total_steps} epoch {self.epoch}: loss "
                                 f"{np.mean(rolling):.4f} (mean of the last {len(rolling)}), lr {lr:.3g}")
                        rolling = []
                    if self.pos == self.steps_per_epoch:
                        self.validate()
                        self.epoch, self.pos = self.epoch + 1, 0
                        self.save()
                    elif s.checkpoint_every_steps and self.step_no % s.checkpoint_every_steps == 0:
                        self.save()
                    if self.step_no >= self.total_steps:
                        break
            if not self.history or self.history[-1]["step"] != self.step_no:  # stopped by max_steps inside an epoch
                self.validate()
                self.save()
        finally:
            bar.close()
            if self.log_fh is not None:
                self.log_fh.close()
        return self.finish()


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(value, fh, indent=1)
        fh.write("\n")


def export_untrained(settings: Mapping[str, Any] | None, init: str, output_dir: str | os.PathLike,
                     log: Callable[[str], None] | None = None, builder_cls: type[SampleBuilder] = SampleBuilder) -> None:
    """Write the untrained bi-encoder (both encoders = checkpoint ``init``) in the trained layout,
    so the "untrained encoder" baseline flows through the same downstream stages."""
    from dcsr.models.biencoder import save_biencoder

    s = validate_settings(settings, builder_cls.SETTINGS)
    tokenizer, model = build_biencoder(init, s["pooling"], s["dropout"], s["normalize"], s["scale"])
    builder_cls(s).setup(tokenizer, model)
    save_biencoder(model, tokenizer, output_dir, {
        "method": builder_cls.method,
        "trained": False,
        "base_checkpoint": init,
        "question_max_length": s["question_max_length"],
        "passage_max_length": s["passage_max_length"],
        "settings": dict(s),
        "step": 0,
        "epoch": 0,
    })
    (log or _stderr_log)(f"wrote the untrained bi-encoder from {init} to {output_dir}")
