"""In-training validation on the dev set: DPR's in-batch NLL and accuracy on dev batches built as
training batches, and the average rank of the positive among hard and other negatives
(``val_av_rank_*``), every process taking its slice of the questions."""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from dcsr.models.biencoder import BiEncoder, score
from dcsr.training.distributed import DistContext, _autocast, global_vectors, nll_loss
from dcsr.training.samples import Sample, SampleBuilder, sample_rng, validate_settings

def _split(indices: Sequence[int], ctx: DistContext) -> list[int]:
    return [int(i) for i in np.array_split(np.asarray(indices, dtype=np.int64), ctx.world)[ctx.rank]]


def _same(a: Sequence[Sample], b: Sequence[Sample]) -> bool:
    try:
        return a == b
    except ValueError:  # a builder's extra data that does not compare (arrays): encode twice
        return False


#: The passages one validation forward pass encodes at most: a dev batch of 128 questions a GPU
#: with 30 hard and 30 other negatives each (GradCache's batches; DPR's val_av_rank_* of 30) is
#: 7,808 passages, some 30 GB of activations for bert-base at 256 tokens even without gradients.
#: DPR encodes them in batches of its own (``val_av_rank_bsz``) as well. Fewer passages are one
#: pass, as before.
VAL_PASSAGES_PER_PASS = 1024


def _passes(samples: list[Sample]) -> list[list[Sample]]:
    """``samples`` in consecutive groups of at most :data:`VAL_PASSAGES_PER_PASS` passages (at
    least one sample a group)."""
    groups, size = [[]], 0
    for sample in samples:
        n = len(sample.passages)
        if groups[-1] and size + n > VAL_PASSAGES_PER_PASS:
            groups.append([])
            size = 0
        groups[-1].append(sample)
        size += n
    return groups


def _encode_local(model: BiEncoder, tokenizer, builder: SampleBuilder, samples: list[Sample],
                  ctx: DistContext, amp_dtype) -> tuple[Tensor, Tensor, Tensor]:
    h = model.hidden_size
    qs, ps, targets, rows = [], [], [], 0
    for group in _passes(samples) if samples else []:
        batch = builder.collate(tokenizer, group).to(ctx.device)
        if not batch.positive_index.numel():  # every sample skipped (DCSR: no answer sentence in reach)
            continue
        with _autocast(ctx.device, amp_dtype):
            q, p = model(batch.q, batch.p)
        qs.append(q.float())
        ps.append(p.float())
        targets.append(batch.positive_index + rows)
        rows += p.shape[0]
    if not qs:  # no dev questions here in the last, partial batch, or all of them skipped
        empty = torch.zeros((0, h), device=ctx.device)
        return empty, empty, torch.zeros((0,), dtype=torch.long, device=ctx.device)
    if len(qs) == 1:
        return qs[0], ps[0], targets[0]
    return torch.cat(qs), torch.cat(ps), torch.cat(targets)


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
      negatives each; the mean 0-based rank of each question's positive among the pooled
      passages (as DPR: 0 = ranked first; a tie ranks the positive first). DPR pools and ranks
      on each GPU apart, so on 8 GPUs among an eighth of the questions' passages:
      ``val_av_rank_shards`` cuts the questions as DPR's GPUs do (:func:`rank_shards`), whatever
      the number of processes here (1: all pooled). ``average_rank=False``
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

    nll_samples = [builder.sample(dev_records[i], sample_rng(s["seed"], -1, i), shuffle=False) for i in range(n)]
    rank_samples = [builder.sample(dev_records[i], sample_rng(s["seed"], -1, i), shuffle=False,
                                   hard_negatives=s["val_av_rank_hard_neg"],
                                   other_negatives=s["val_av_rank_other_neg"]) for i in range(n_rank)]
    # When the average rank reads the very samples of the NLL (every question, and as many
    # negatives: a dev set without negatives, or val_av_rank_* equal to the training ones),
    # one encoding serves both: the same batches give the same vectors, at half the cost.
    shared = n_rank == n and _same(rank_samples, nll_samples)
    losses, correct, scored, candidates = [], 0, 0, 0  # scored: questions a builder did not skip (DCSR's first positive may be)
    q_parts, p_parts, t_parts, offset = [], [], [], 0

    def keep_for_rank(q_all: Tensor, p_all: Tensor, targets: Tensor) -> None:
        nonlocal offset
        q_parts.append(q_all.cpu())
        p_parts.append(p_all.cpu())
        t_parts.append(targets.cpu() + offset)
        offset += p_all.shape[0]

    for start in range(0, n, global_bs):
        local = _split(range(start, min(n, start + global_bs)), ctx)
        q, p, pos = _encode_local(model, tokenizer, builder, [nll_samples[i] for i in local], ctx, amp_dtype)
        q_all, p_all, targets = global_vectors(q, p, pos, ctx)
        loss, c = nll_loss(q_all, p_all, targets)
        losses.append(float(loss))
        correct += c
        scored += q_all.shape[0]
        candidates += p_all.shape[0]
        if shared:
            keep_for_rank(q_all, p_all, targets)
        if bar:
            bar.update(q_all.shape[0] * (2 if shared else 1))

    for start in range(0, 0 if shared else n_rank, global_bs):
        local = _split(range(start, min(n_rank, start + global_bs)), ctx)
        q, p, pos = _encode_local(model, tokenizer, builder, [rank_samples[i] for i in local], ctx, amp_dtype)
        q_all, p_all, targets = global_vectors(q, p, pos, ctx)
        keep_for_rank(q_all, p_all, targets)
        if bar:
            bar.update(q_all.shape[0])
    if bar:
        bar.close()
    rank_sum, ranked = 0, 0
    if n_rank:
        q_mat, p_mat, t_vec = torch.cat(q_parts), torch.cat(p_parts), torch.cat(t_parts)
        ranked = q_mat.shape[0]
        for (q0, q1), (p0, p1) in rank_shards(t_vec, p_mat.shape[0], s["val_av_rank_shards"]):
            for i in range(q0, q1, 1024):  # [1024, P] score blocks bound the memory
                j = min(q1, i + 1024)
                sc = score(q_mat[i:j], p_mat[p0:p1])
                gold = sc.gather(1, t_vec[i:j, None] - p0)
                rank_sum += int((sc > gold).sum().item())
    model.train(was_training)
    return {
        "nll_loss": float(np.mean(losses)) if losses else float("nan"),
        "accuracy": correct / scored if scored else float("nan"),
        # what the accuracy is out of: the passages (DCSR: sentences) a dev batch scores, per question
        "candidates_per_question": candidates / scored if scored else float("nan"),
        "average_rank": (rank_sum / ranked if ranked else float("nan")) if average_rank else None,
        "questions": n,
        "average_rank_questions": n_rank,
        "average_rank_passages": offset,
        "average_rank_shards": s["val_av_rank_shards"],
    }


def rank_shards(positives: Tensor, n_passages: int, shards: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``((first question, end), (first passage, end))`` of each shard the average rank ranks
    within: DPR's ``ShardedDataIterator`` cut of the ranked questions into ``shards`` contiguous
    parts of ``ceil(questions / shards)`` (the last shorter, empty ones left out), each with the
    passages of its own questions. ``positives``: each question's positive row, the first of its
    contiguous group of passages (as every builder's ``collate`` lays them out)."""
    n = int(positives.shape[0])
    starts = positives.tolist()
    if n and (starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:])) or starts[-1] >= n_passages):
        raise ValueError("the average rank needs each dev question's positive to be the first of its own passages")
    size = -(-n // shards) if n else 0
    out = []
    for q0 in range(0, n, size or 1):
        q1 = min(n, q0 + size)
        out.append(((q0, q1), (starts[q0], starts[q1] if q1 < n else n_passages)))
    return out
