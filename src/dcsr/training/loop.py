"""Train a DPR bi-encoder: NLL over in-batch negatives plus BM25 hard negatives.

The recipe is DPR's (Karpukhin et al. 2020, ``train_dense_encoder.py``): per question its
first positive passage, one hard negative from ``hard_negative_ctxs`` (shuffled every
epoch), all other questions' passages of the batch as negatives; dot-product scores, NLL
of the positive; AdamW with linear warm-up then linear decay, gradient-norm clipping.

Run it in one process (CPU or one GPU) or under ``torchrun`` (DDP, one GPU per process or
gloo on CPU). Every process sees the same globally shuffled order and takes its slice of
each *global* batch (``batch_size * world_size`` questions); question and passage vectors
are gathered from all processes (as DPR's ``_calc_loss``) and the loss is computed on the
global score matrix, so N processes with ``batch_size`` train like one process with
``batch_size * N``: exactly without dropout (tested), in distribution with it, each process
drawing its own dropout masks (as DPR's GPUs do).

Sample building is the replaceable part: :class:`SampleBuilder` turns a training record
into a question, its passages and the index of the positive vector; DCSR subclasses it
(sentence markers, ``pool_positions``, sentence-level ``positive_index``) and passes the
class to :func:`train` without touching the loop.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from dcsr.data.formats import SOURCE_KEY, read_biencoder
from dcsr.errors import InputError
from dcsr.fsutil import atomic_open, atomic_path
from dcsr.models.biencoder import (META_FILE, PASSAGE_DIR, QUESTION_DIR, build_biencoder, load_biencoder, tie_encoders,
                                   write_biencoder)
from dcsr.settings import Settings
from dcsr.training.checkpoint_state import (BEST, FINGERPRINT_FILE, LAST, STATE_FILE, TRAIN_LOG, VALIDATION_FILE,
                                            _recover_last, _rng_state, _set_aside, _set_rng_state, _unreadable,
                                            best_validation, fingerprint, keep_best, load_trainer_state)
from dcsr.training.distributed import DistContext, _amp_dtype, _autocast, global_vectors, nll_loss, setup_distributed
from dcsr.training.fingerprint import describe_change
from dcsr.training.gradcache import grad_cache_step
from dcsr.training.samples import (Batch, SampleBuilder, read_training_records, sample_rng, validate_settings,
                                   with_positives)
from dcsr.training.validation import evaluate

# ---------------------------------------------------------------------- helpers


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


#: What a model folder holds of the encoders themselves (``model_from: best`` keeps these of the best validation).
ENCODER_FILES = (QUESTION_DIR, PASSAGE_DIR, META_FILE)


def _sources(records: Sequence[Mapping[str, Any]]) -> list | None:
    """Each record's training set, when the records come from more than one (a *Multi* file); else None."""
    sources = [r.get(SOURCE_KEY) for r in records]
    return sources if len(set(sources)) > 1 else None


def _epoch_order(n: int, seed: int, epoch: int, sources: Sequence | None = None, global_bs: int = 1) -> np.ndarray:
    """The global sample order of one epoch, cut into global batches in order; identical in every
    process. One training set: a permutation of its ``n`` records. Several (``sources``: each
    record's), as DPR's ``MultiSetDataIterator`` ("all samples from a single batch should be from
    the same dataset"): each set's records permuted and cut into whole global batches (its last
    partial one dropped), and the batches of all sets shuffled together, so that every global
    batch, and its in-batch negatives, is one dataset's."""
    rng = np.random.default_rng([seed, epoch])
    if sources is None:
        return rng.permutation(n)
    labels = np.asarray([str(x) for x in sources])
    batches = []
    for label in sorted(set(labels.tolist())):
        members = np.flatnonzero(labels == label)
        members = members[rng.permutation(len(members))]
        whole = len(members) // global_bs
        batches.extend(members[: whole * global_bs].reshape(whole, global_bs))
    if not batches:
        return np.empty(0, dtype=np.int64)
    return np.concatenate([batches[i] for i in rng.permutation(len(batches))])


def _epoch_steps(n: int, sources: Sequence | None, global_bs: int) -> int:
    """Global batches per epoch: :func:`_epoch_order`'s whole ones (its length is the same for
    every seed and epoch), each training set's last partial one dropped."""
    return len(_epoch_order(n, 0, 0, sources, global_bs)) // global_bs


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


# ---------------------------------------------------------------------- training


def train(settings: Mapping[str, Any] | None, train_json: str | os.PathLike, dev_json: str | os.PathLike, init: str,
          output_dir: str | os.PathLike, checkpoint_dir: str | os.PathLike,
          log: Callable[[str], None] | None = None, builder_cls: type[SampleBuilder] = SampleBuilder,
          code: str | None = None) -> dict:
    """Train a bi-encoder from checkpoint ``init`` and write it to ``output_dir``.

    Runs single-process, or one process per device under ``torchrun`` (RANK / WORLD_SIZE /
    LOCAL_RANK from the environment). Resumes from ``checkpoint_dir/last`` when its
    fingerprint (:func:`fingerprint`: inputs, init, settings) equals this run's; a checkpoint
    that does not match is moved to ``checkpoint_dir/stale/`` and training starts fresh. ``code``:
    the training code's digest (the rule's ``code`` param), part of the fingerprint when given.
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
                          log or _stderr_log, builder_cls, ctx, code=code)
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
                 ctx: DistContext, code: str | None = None):
        self.s, self.ctx, self.code = settings, ctx, code
        self.train_json, self.dev_json, self.init = train_json, dev_json, init
        self.output_dir, self.checkpoint_dir = output_dir, checkpoint_dir
        self.builder_cls = builder_cls
        self.say = log if ctx.main else (lambda msg: None)
        self.step_no, self.epoch, self.pos = 0, 0, 0
        self.skipped_steps = 0  # steps the GradScaler skipped (inf or NaN gradients under amp fp16)
        self.last_skipped = False
        self.history: list[dict] = []
        self.log_fh = None

    # ------------------------------------------------------------------ setup and resume
    def setup(self) -> None:
        """Read the data, decide whether ``checkpoint_dir/last`` is this run's (else set it
        aside), build or load the model, and make the optimizer, schedule and scaler."""
        s, ctx = self.s, self.ctx
        self.builder = self.builder_cls(s)
        records = read_training_records(self.train_json, self.builder, self.say)
        dev_records = with_positives(read_biencoder(self.dev_json, require_positive=False), self.dev_json, self.say)
        self.global_bs = s.batch_size * ctx.world

        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        last = _recover_last(self.checkpoint_dir) if ctx.main else None
        self.amp_dtype, use_scaler = _amp_dtype(s.amp, ctx.device)
        compute = str(self.amp_dtype or torch.float32).removeprefix("torch.")
        # JSON-normalised, as it is compared with the one stored beside the checkpoint
        self.identity = json.loads(json.dumps(fingerprint(s, self.builder.method, self.train_json, self.dev_json,
                                                          self.init, self.builder_cls.input_files(), ctx.world,
                                                          compute, self.code))) if ctx.main else None
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
        self.state = load_trainer_state(last / STATE_FILE) if last is not None else None

        # Same seed in every process for anything random in building the model; dropout then
        # gets a per-process stream.
        random.seed(s.seed)
        np.random.seed(s.seed)
        torch.manual_seed(s.seed)
        if self.state is not None:
            self.tokenizer, self.model, _ = load_biencoder(last, device="cpu", dropout=s.dropout,
                                                           attention_dropout=s.attention_dropout)
        else:
            self.tokenizer, self.model = build_biencoder(self.init, s.pooling, s.dropout, s.normalize, s.scale,
                                                         s.attention_dropout, s.token_types)
        if s.tie_encoders:  # a checkpoint saves the one encoder twice: share it again
            tie_encoders(self.model, self.init)
        self.builder.setup(self.tokenizer, self.model)
        self.records = self.builder.prepare_records(records, str(self.train_json), self.say)
        self.dev_records = self.builder.prepare_records(dev_records, str(self.dev_json), self.say)
        if not self.dev_records:
            raise InputError(str(self.dev_json), "the dev set has no usable records")
        # several training sets: one per global batch, as DPR's later code; mixed: one pool, as DPR's paper's
        sets = _sources(self.records)
        self.sources = sets if s.multiset_batches == "per_dataset" else None
        self.steps_per_epoch = _epoch_steps(len(self.records), self.sources, self.global_bs)  # partial batches dropped
        if sets is not None:
            self.say(f"{len(set(sets))} training sets ({', '.join(sorted(set(map(str, sets))))}): "
                     + ("each global batch is one set's, as DPR's multi-set training" if self.sources is not None else
                        "one shuffled pool (multiset_batches: mixed, as the code of DPR's paper)"))
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
            "question_text": s.question_text,
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
            self.skipped_steps = int(state.get("skipped_steps", 0))
            # a validation of a checkpoint older than the record: epochs trained = step / steps a epoch
            self.history = [{**v, "epochs_trained": v.get("epochs_trained", round(v["step"] / self.steps_per_epoch, 4))}
                            for v in state["validation"]]
            rng = state["rng"]
            if len(rng) == ctx.world:
                if (note := _set_rng_state(rng[ctx.rank])) is not None:
                    self.say(note)
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
                 f"{self.total_steps} steps; warm-up {self.warmup}; amp {self.amp_dtype}; "
                 f"{ctx.threads or f'{torch.get_num_threads()} torch thread(s) per process'}")
        if self.warmup >= self.total_steps:
            self.say(f"warning: the warm-up ({self.warmup} steps) is as long as the whole run ({self.total_steps} "
                     f"steps): the learning rate rises to {self.total_steps / self.warmup:.0%} of learning_rate and "
                     "never decays (as DPR's 1,237-step warm-up on a small training set); warmup_steps or "
                     "warmup_ratio sets a shorter one")
        self.log_path = self.checkpoint_dir / TRAIN_LOG
        if ctx.main:
            kept = []
            if state is not None and self.log_path.exists():
                kept = _log_lines_to(self.log_path, self.step_no, self.say)
            with atomic_open(self.log_path, "w", encoding="utf-8") as fh:
                fh.writelines(kept)
            self.log_fh = open(self.log_path, "a", encoding="utf-8")

    # ------------------------------------------------------------------ the loop's steps
    def epoch_batches(self) -> torch.utils.data.DataLoader:
        """This process's batches of the rest of the current epoch (up to ``max_steps``), from
        the current position: the epoch's global order, tokenized in ``num_workers`` workers."""
        s = self.s
        order = _epoch_order(len(self.records), s.seed, self.epoch, self.sources, self.global_bs)
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
        questions at a time (:mod:`dcsr.training.gradcache`): the same loss and gradients.

        A loss that is not finite (the run diverged: too high a learning rate) is an
        :class:`~dcsr.errors.InputError` naming the step, raised before the optimizer takes it.
        Under a GradScaler (amp fp16) an infinite loss and inf or NaN gradients are what the scaler
        handles: it skips the step and lowers its scale (counted in ``skipped_steps``, marked
        ``skipped`` in the training log); a NaN loss is still an error."""
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
        lr = self.scheduler.get_last_lr()[0]
        value = float(loss.detach())
        if math.isnan(value) or (math.isinf(value) and not self.scaler.is_enabled()):
            raise InputError(f"training step {self.step_no + 1}",
                             f"the loss is {value} at learning rate {lr:.3g}: training diverged (the weights would "
                             "turn to NaN); lower learning_rate, warm up over more steps (warmup_steps) or clip "
                             "gradients (max_grad_norm), and run again")
        self.scaler.unscale_(self.optimizer)
        if self.s.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.s.max_grad_norm)
        scale = self.scaler.get_scale() if self.scaler.is_enabled() else None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        # the scaler lowers its scale exactly when it found inf or NaN gradients and skipped the step
        self.last_skipped = scale is not None and self.scaler.get_scale() < scale
        self.skipped_steps += self.last_skipped
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_no += 1
        self.pos += 1
        return value, correct / questions, lr

    def validate(self) -> None:
        """In-batch NLL and accuracy on the dev set (and DPR's average rank), appended to the
        run's validation history."""
        s, t0 = self.s, time.time()
        # DPR computes the average rank from val_av_rank_start_epoch on; the run's last
        # validation always does, so that every trained model reports one.
        rank = self.epoch >= s.val_av_rank_start_epoch or self.step_no >= self.total_steps
        result = evaluate(self.model, self.tokenizer, self.dev_records, builder=self.builder, ctx=self.ctx,
                          amp_dtype=self.amp_dtype, progress=True, average_rank=rank)
        # epochs trained: the epoch's end (epoch + 1), or where max_steps stopped inside it
        trained = round(self.epoch + self.pos / self.steps_per_epoch, 4)
        result = {"epoch": self.epoch, "epochs_trained": trained, "step": self.step_no, **result,
                  "seconds": round(time.time() - t0, 3)}
        self.history.append(result)
        shards = "" if s.val_av_rank_shards == 1 else f", in {s.val_av_rank_shards} shards as DPR's GPUs"
        ranked = (f"average rank {result['average_rank']:.2f} ({result['average_rank_questions']} questions, "
                  f"{result['average_rank_passages']} passages{shards})" if rank else
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
            "total_steps": self.total_steps, "skipped_steps": self.skipped_steps,
        }
        previous = self.checkpoint_dir / LAST
        with atomic_path(previous) as tmp:
            write_biencoder(self.model, self.tokenizer, tmp, {**self.meta, "step": self.step_no, "epoch": self.epoch})
            if (best := self._best_step()) not in (None, self.step_no):
                keep_best(tmp / BEST, previous if previous.is_dir() else None, best, ENCODER_FILES)
            torch.save(trainer_state, tmp / STATE_FILE)
            _write_json(tmp / VALIDATION_FILE, self.history)
            _write_json(tmp / FINGERPRINT_FILE, self.identity)

    def finish(self) -> dict:
        """Write the trained model to ``output_dir`` (rank 0, atomically) and return the summary."""
        ctx = self.ctx
        if ctx.main:
            best = self._best_step()
            with atomic_path(self.output_dir) as tmp:
                if best in (None, self.step_no):
                    write_biencoder(self.model, self.tokenizer, tmp,
                                    {**self.meta, "step": self.step_no, "epoch": self.epoch})
                else:  # the last checkpoint, written at this step, keeps the best validation's encoders
                    keep_best(tmp, self.checkpoint_dir / LAST, best, ENCODER_FILES)
                _write_json(tmp / VALIDATION_FILE, self.history)
                shutil.copy(self.log_path, tmp / TRAIN_LOG)
            which = "" if best is None else f", the encoders of step {best} (model_from: best, DPR's best validation)"
            self.say(f"wrote {self.output_dir} after {self.step_no} steps{self._skipped_note()}{which}")
        if ctx.enabled:
            dist.barrier()
        return {"steps": self.step_no, "epoch": self.epoch, "validation": self.history[-1] if self.history else None,
                "skipped_steps": self.skipped_steps}

    def _best_step(self) -> int | None:
        """Under ``model_from: best``, the step of DPR's best validation so far
        (:func:`best_validation`); else None."""
        if self.s.model_from != "best" or not self.history:
            return None
        return self.history[best_validation(self.history, self.s.val_av_rank_start_epoch)]["step"]

    def _skipped_note(self) -> str:
        """``, N skipped by the GradScaler`` under a scaler (amp fp16), else nothing."""
        if not self.scaler.is_enabled():
            return ""
        return f", {self.skipped_steps} skipped by the GradScaler (inf or NaN gradients)"

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
                        record = {"step": self.step_no, "epoch": self.epoch, "loss": value, "accuracy": accuracy,
                                  "lr": lr, "seconds": round(time.time() - t0, 4)}
                        if self.scaler.is_enabled():
                            record["skipped"] = self.last_skipped
                        self.log_fh.write(json.dumps(record) + "\n")
                        self.log_fh.flush()
                    bar.update(1)
                    bar.set_postfix(loss=f"{value:.4f}", epoch=self.epoch, refresh=False)
                    if s.log_every_steps and self.step_no % s.log_every_steps == 0:
                        self.say(f"step {self.step_no}/{self.total_steps} epoch {self.epoch}: loss "
                                 f"{np.mean(rolling):.4f} (mean of the last {len(rolling)}), lr {lr:.3g}"
                                 f"{self._skipped_note()}")
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


def _log_lines_to(path: Path, step: int, say: Callable[[str], None]) -> list[str]:
    """The lines of a resumed run's training log up to ``step``; a line that is no JSON (the last
    one, cut by a kill or a full disk) is left out with a warning, as the checkpoint does not
    depend on it."""
    kept = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                say(f"warning: {path}:{n} is not a whole JSON line (a write cut short); left out of the log")
                continue
            if isinstance(entry, dict) and entry.get("step", 0) <= step:
                kept.append(line if line.endswith("\n") else line + "\n")
    return kept


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
    tokenizer, model = build_biencoder(init, s["pooling"], s["dropout"], s["normalize"], s["scale"],
                                       s["attention_dropout"], s["token_types"])
    builder_cls(s).setup(tokenizer, model)
    save_biencoder(model, tokenizer, output_dir, {
        "method": builder_cls.method,
        "trained": False,
        "base_checkpoint": init,
        "question_max_length": s["question_max_length"],
        "passage_max_length": s["passage_max_length"],
        "question_text": s["question_text"],
        "settings": dict(s),
        "step": 0,
        "epoch": 0,
    })
    (log or _stderr_log)(f"wrote the untrained bi-encoder from {init} to {output_dir}")
