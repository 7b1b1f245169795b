"""The CUDA suite, `pytest -m cuda tests/` (benchmarks/gpu/kit.sh cuda): what only a run on a GPU
shows of training and embedding: GradCache equal to one pass in fp32, bf16 and fp16; fp16's
GradScaler skipping the steps whose gradients overflow, and the count of them; a resumed run equal
to an uninterrupted one (CUDA's RNG state in the checkpoint); NCCL at world size 1 through DDP,
barrier and all_gather; two processes on one GPU (gloo) equal to one process at double the batch,
with and without GradCache; question and passage vectors on CUDA equal to the CPU's.

Every test takes ``where``. Its ``cuda`` case carries the ``cuda`` marker and is skipped ("needs a
CUDA device") on a machine without one, unless ``DCSR_CUDA_SUITE_ON_CPU=1``: then it runs on the
CPU, with gloo for NCCL and bf16 for fp16 (fp16 autocast and its GradScaler are CUDA-only in the
trainer), so that the suite's own code paths run before they ever reach a GPU:

    DCSR_CUDA_SUITE_ON_CPU=1 pytest -m cuda tests/test_cuda.py

The tests that are fast and say something on a CPU too have a ``cpu`` twin in the ordinary suite.
The tolerances on a GPU were estimates from the arithmetic (bf16 keeps 8 bits of mantissa, fp16
11) until the first run on a GPU (an H200, 2026-11-28: 10 passed) printed every difference it
measured (``-s``); GRAD_TOL is now set from those readings.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from dcsr.training.distributed import DistContext
from test_train import data  # noqa: F401  (the fixture: 32 training and 16 dev records)

# cuBLAS's deterministic workspace, read when its handle is made: before any test touches CUDA
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

ON_CPU = os.environ.get("DCSR_CUDA_SUITE_ON_CPU") == "1"
NEEDS_CUDA = pytest.mark.skipif(not (ON_CPU or torch.cuda.is_available()), reason="needs a CUDA device")
CUDA = pytest.param("cuda", id="cuda", marks=[pytest.mark.cuda, NEEDS_CUDA])
CPU = pytest.param("cpu", id="cpu")
CUDA_ONLY = pytest.mark.parametrize("where", [CUDA])
WITH_CPU_TWIN = pytest.mark.parametrize("where", [CUDA, CPU])

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one intra-op thread

#: Relative error (of the whole gradient, or of the whole update, as one vector) allowed between
#: GradCache and one pass. Each chunk is computed at another batch shape, so the kernels round
#: otherwise: fp32 the order of a few sums, bf16 / fp16 a few units of the last place (2**-8,
#: 2**-11) through the layers. A defect of GradCache (a chunk's rows or pooling keys misplaced, a
#: gradient lost) is an error of order 1. Read, gradient / update: on an H200 on 2026-11-28
#: (benchmarks/gpu/device-runs/2026-11-28-h200/cuda-measured.txt) fp32 2.9e-5 / 5.3e-5 (TF32 off),
#: bf16 1.3e-4 / 2.5e-4, fp16 1.6e-5 / 8.1e-5; on a Zen 1 fp32 2.5e-7, bf16 1.4e-4 / 2.6e-4. The
#: tolerances are 10x to 20x the largest reading (they were 1e-3, 5e-2, 2e-2: 200x for bf16); TF32,
#: should anything turn it on, would fail fp32's (about 1e-3).
GRAD_TOL = {"off": 5e-4, "bf16": 5e-3, "fp16": 1e-3}


def device_of(where: str) -> torch.device:
    if where == "cuda" and not ON_CPU:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def amp_on(amp: str, device: torch.device) -> str:
    """The ``amp`` setting a test of ``amp`` runs under on ``device``: fp16 is bf16 on a CPU."""
    return "bf16" if amp == "fp16" and device.type == "cpu" else amp


def backend_of(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def report(name: str, **values) -> None:
    """One line a GPU run's log keeps (pytest -s): what a test measured, for the next tolerances."""
    print(f"[cuda-suite] {name}: " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                             for k, v in values.items()))


def _on(device: torch.device, monkeypatch) -> None:
    """train() in this process computes on ``device`` (it would take CUDA whenever there is one)."""
    from dcsr.training import loop

    monkeypatch.setattr(loop, "setup_distributed", lambda: (DistContext(device=device), False))


def _trainer(tmp_path, tiny_bert, data, device, settings, name):
    from dcsr.training.loop import Trainer
    from dcsr.training.samples import SampleBuilder, validate_settings

    train_json, dev_json = data
    t = Trainer(validate_settings(settings), train_json, dev_json, str(tiny_bert), tmp_path / f"{name}-out",
                tmp_path / f"{name}-ck", lambda m: None, SampleBuilder, DistContext(device=device))
    t.setup()
    t.resume()
    t.log_fh.close()
    return t


def _flat(tensors: dict) -> torch.Tensor:
    return torch.cat([tensors[k].detach().float().flatten().cpu() for k in sorted(tensors)])


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _params(model) -> dict:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


# ---------------------------------------------------------------------- GradCache per precision


def _one_step(tmp_path, tiny_bert, data, device, amp, chunk):
    """One Trainer step on the first batch: ``(loss, gradients as the optimizer saw them, update)``."""
    from test_train import SMALL

    settings = {**SMALL, "batch_size": 8, "amp": amp, "grad_cache_chunk": chunk, "adam_eps": 1.0,
                "max_steps": 1, "val_av_rank_max_qs": 4, "val_max_qs": 4}
    t = _trainer(tmp_path, tiny_bert, data, device, settings, f"{amp}-{chunk}")
    if t.scaler.is_enabled():
        # a first scale that cannot overflow here: a skipped step has no gradient to compare
        t.scaler = torch.amp.GradScaler(device.type, init_scale=2.0 ** 10)
    seen = {}
    step = t.optimizer.step

    def spy(*args, **kwargs):
        seen.update({k: p.grad.detach().float().clone() for k, p in t.model.named_parameters() if p.grad is not None})
        return step(*args, **kwargs)

    t.optimizer.step = spy
    before = _params(t.model)
    batch = next(iter(t.epoch_batches()))
    loss, _, _ = t.step(batch)
    assert seen, "the optimizer did not step (the scaler found an overflow)"
    after = _params(t.model)
    return loss, seen, {k: after[k] - before[k] for k in before}


@pytest.mark.parametrize("where, amp", [pytest.param(*CUDA.values, amp, id=f"cuda-{amp}", marks=CUDA.marks)
                                        for amp in ("off", "bf16", "fp16")]
                         + [pytest.param("cpu", amp, id=f"cpu-{amp}") for amp in ("off", "bf16")])
def test_grad_cache_equals_one_pass(tmp_path, tiny_bert, data, where, amp):
    """A Trainer step with grad_cache_chunk 2 (a batch of 8 in four chunks) gives one pass's loss,
    gradients and update, at each precision: the rounding of bf16 / fp16 apart (GRAD_TOL)."""
    device = device_of(where)
    amp = amp_on(amp, device)
    loss1, grads1, update1 = _one_step(tmp_path, tiny_bert, data, device, amp, 0)
    loss2, grads2, update2 = _one_step(tmp_path, tiny_bert, data, device, amp, 2)
    g_err, u_err = _relative(_flat(grads2), _flat(grads1)), _relative(_flat(update2), _flat(update1))
    report(f"grad cache {amp} on {device}", loss_one_pass=loss1, loss_grad_cache=loss2, grad_rel_err=g_err,
           update_rel_err=u_err)
    assert grads1.keys() == grads2.keys() and len(grads1) > 10
    assert loss2 == pytest.approx(loss1, rel=GRAD_TOL[amp], abs=GRAD_TOL[amp])
    assert g_err <= GRAD_TOL[amp] and u_err <= GRAD_TOL[amp]
    assert _flat(update1).abs().max() > 0  # the step moved the weights


# ---------------------------------------------------------------------- fp16 and its GradScaler


@WITH_CPU_TWIN
def test_fp16_grad_scaler_skips_overflowing_steps_and_counts_them(tmp_path, tiny_bert, data, where):
    """fp16 with a GradScaler started at a scale that overflows fp16's gradients: the first steps
    are skipped (no weight moves, the scale halves) until the scale fits, then every step moves
    the weights; the skipped steps are counted by the scale's halvings (it grows only after 2000
    good steps). On a CPU: bf16 with a GradScaler started at 2**127 (the scaled fp32 loss is inf)."""
    device = device_of(where)
    amp = amp_on("fp16", device)
    from test_train import SMALL

    t = _trainer(tmp_path, tiny_bert, data, device, {**SMALL, "batch_size": 8, "amp": amp, "max_steps": 64}, "scaler")
    assert t.scaler.is_enabled() == (amp == "fp16")
    init = 2.0 ** 40 if device.type == "cuda" else 2.0 ** 127
    t.scaler = torch.amp.GradScaler(device.type, init_scale=init)
    batch = next(iter(t.epoch_batches()))
    skipped, steps, losses = 0, 48 if device.type == "cuda" else 8, []
    for _ in range(steps):
        before, scale = _params(t.model), t.scaler.get_scale()
        loss, _, _ = t.step(batch)
        losses.append(loss)
        moved = any(not torch.equal(before[k], p) for k, p in t.model.named_parameters())
        if t.scaler.get_scale() < scale:
            skipped += 1
            assert not moved, "a skipped step moved the weights"
        else:
            assert moved, "a step that was not skipped left the weights"
    report(f"grad scaler {amp} on {device}", init_scale=init, skipped=skipped, steps=steps,
           final_scale=t.scaler.get_scale())
    assert 1 <= skipped < steps
    assert skipped == round(math.log2(init / t.scaler.get_scale()))
    assert all(math.isfinite(x) for x in losses)
    assert t.step_no == steps  # the trainer counts a skipped step as a step (its schedule moves on)


# ---------------------------------------------------------------------- resume


class _Crash(Exception):
    pass


@WITH_CPU_TWIN
def test_resume_equals_an_uninterrupted_run(tmp_path, tiny_bert, data, where, monkeypatch):
    """Stopped by an error at step 5 and run again, training resumes from the checkpoint of step 3
    and ends with the weights of a run never stopped, dropout on (its RNG, CUDA's on a GPU, is in
    the checkpoint); resumed without the RNG states (a control) it does not."""
    from dcsr.models.biencoder import load_biencoder
    from dcsr.training import loop
    from dcsr.training.loop import Trainer, train

    from test_train import SMALL

    device = device_of(where)
    _on(device, monkeypatch)
    train_json, dev_json = data
    # Adam's epsilon at 1: an update Lipschitz in the gradient (a gradient that is zero but for
    # rounding moves no weight by lr), at a learning rate at which the control's masks show
    settings = {**SMALL, "epochs": 100, "max_steps": 8, "checkpoint_every_steps": 3, "dropout": 0.1,
                "adam_eps": 1.0, "learning_rate": 1e-2, "amp": "off", "val_av_rank_max_qs": 4, "val_max_qs": 4}
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "ref", tmp_path / "ck-ref", log=lambda m: None)
        step = Trainer.step

        def resumed(name, rng=True):
            def crashing(self, batch):
                if self.step_no == 5:
                    raise _Crash
                return step(self, batch)

            with monkeypatch.context() as m:
                m.setattr(Trainer, "step", crashing)
                with pytest.raises(_Crash):
                    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / name, tmp_path / f"ck-{name}",
                          log=lambda m: None)
            messages = []
            with monkeypatch.context() as m:
                if not rng:
                    m.setattr(loop, "_set_rng_state", lambda state: None)
                train(settings, train_json, dev_json, str(tiny_bert), tmp_path / name, tmp_path / f"ck-{name}",
                      log=messages.append)
            assert any(x.startswith("resuming from step 3") for x in messages), messages
            return tmp_path / name

        weights = {}
        for name, rng in (("resumed", True), ("control", False)):
            out = resumed(name, rng)
            weights[name] = load_biencoder(out)[1].state_dict()
        weights["ref"] = load_biencoder(tmp_path / "ref")[1].state_dict()
    finally:
        torch.use_deterministic_algorithms(deterministic)
    diff = {n: max((weights[n][k].float() - weights["ref"][k].float()).abs().max().item() for k in weights["ref"])
            for n in ("resumed", "control")}
    report(f"resume on {device}", resumed_max_abs_diff=diff["resumed"], control_max_abs_diff=diff["control"])
    assert diff["resumed"] <= 1e-6
    assert diff["control"] > 100 * max(diff["resumed"], 1e-7), "the control resumed like the real one: no teeth"


# ---------------------------------------------------------------------- NCCL at world size 1


@WITH_CPU_TWIN
def test_nccl_at_world_size_one(tmp_path, tiny_bert, where):
    """NCCL (gloo on a CPU) in a group of one: barrier, all_gather, all_gather_object (the
    checkpoint's RNG states), all_reduce MAX (GradCache's chunk count); DDP's gradients equal the
    bare model's, and GradCache through DDP (no_sync, the collective chunk count) equals GradCache
    on the bare model."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from dcsr.training import gradcache
    from dcsr.training.distributed import nll_loss

    from test_gradcache import _setup

    device = device_of(where)
    model, batch = _setup(tiny_bert, "dpr", 0.0)
    model.to(device)
    batch = batch.to(device)

    def grads():
        return {k: v.grad.detach().clone() for k, v in model.named_parameters() if v.grad is not None}

    def loss_fn(q, p):
        loss, _ = nll_loss(q, p, batch.positive_index)
        return loss, loss.detach()

    model.zero_grad(set_to_none=True)
    q, p = model(batch.q, batch.p)
    nll_loss(q, p, batch.positive_index)[0].backward()
    bare = grads()
    model.zero_grad(set_to_none=True)
    gradcache.grad_cache_step(model, batch.q, batch.p, 3, loss_fn)
    bare_gc = grads()

    dist.init_process_group(backend_of(device), init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        assert dist.get_backend() == backend_of(device)
        dist.barrier(**({"device_ids": [device.index]} if device.type == "cuda" else {}))
        x = torch.arange(5.0, device=device)
        out = [torch.empty_like(x)]
        dist.all_gather(out, x)
        assert torch.equal(out[0], x)
        objs = [None]
        dist.all_gather_object(objs, {"rank": 0})
        assert objs == [{"rank": 0}]
        assert gradcache._most_chunks(3, device) == 3
        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        model.zero_grad(set_to_none=True)
        q, p = ddp(batch.q, batch.p)
        nll_loss(q, p, batch.positive_index)[0].backward()
        through_ddp = grads()
        model.zero_grad(set_to_none=True)
        gradcache.grad_cache_step(ddp, batch.q, batch.p, 3, loss_fn, encoder=model)
        ddp_gc = grads()
    finally:
        dist.destroy_process_group()
    errs = {"ddp": _relative(_flat(through_ddp), _flat(bare)), "ddp_grad_cache": _relative(_flat(ddp_gc), _flat(bare_gc)),
            "grad_cache_vs_one_pass": _relative(_flat(bare_gc), _flat(bare))}
    report(f"{backend_of(device)} world size 1 on {device}", **errs)
    assert through_ddp.keys() == bare.keys() == ddp_gc.keys()
    assert errs["ddp"] <= 1e-6 and errs["ddp_grad_cache"] <= 1e-6 and errs["grad_cache_vs_one_pass"] <= GRAD_TOL["off"]


# ---------------------------------------------------------------------- two processes on one GPU

DRIVER = '''
"""torchrun's process: train() on DCSR_TEST_DEVICE (every process on the same GPU) over gloo.
dcsr.training.distributed.setup_distributed takes NCCL and GPU LOCAL_RANK on CUDA: two
processes cannot share one GPU under it."""
import json, os, sys
import torch
import torch.distributed as dist
from dcsr.training import loop
from dcsr.training.distributed import DistContext


def setup():
    rank, world, local = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    device = torch.device(os.environ["DCSR_TEST_DEVICE"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("gloo")
    return DistContext(rank, world, local, device), True


loop.setup_distributed = setup
a = json.loads(sys.argv[1])
loop.train(a["settings"], a["train"], a["dev"], a["init"], a["output"], a["checkpoints"])
'''


@pytest.mark.parametrize("chunk", [0, 3])
@CUDA_ONLY
def test_two_processes_on_one_gpu_match_one_at_double_batch(tmp_path, repo, tiny_bert, data, where, chunk,
                                                           monkeypatch):
    """torchrun --nproc_per_node 2, both processes on the one GPU, gloo: batch 4 each (GradCache
    chunks of 3, or none) trains like one process with batch 8 in one pass: the same losses. (On
    a CPU: tests/test_train.py and tests/test_gradcache.py, through the trainer's own set-up.)"""
    from dcsr.training.loop import train

    from test_train import SMALL, _env, _log

    device = device_of(where)
    train_json, dev_json = data
    settings = {**SMALL, "max_steps": 3, "amp": "off", "val_av_rank_max_qs": 4, "val_max_qs": 4}
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    args = {"settings": {**settings, "grad_cache_chunk": chunk}, "train": str(train_json), "dev": str(dev_json),
            "init": str(tiny_bert), "output": str(tmp_path / "two"), "checkpoints": str(tmp_path / "ck2")}
    env = {**_env(), "DCSR_TEST_DEVICE": str(device), "PYTHONPATH": os.pathsep.join(
        [str(repo / "src")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(driver), json.dumps(args)], env=env, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "2 process(es) on " + str(device) in two.stderr, two.stderr[-3000:]
    _on(device, monkeypatch)
    train({**settings, "batch_size": 8}, train_json, dev_json, str(tiny_bert), tmp_path / "one", tmp_path / "ck1",
          log=lambda m: None)
    loss_two = [r["loss"] for r in _log(tmp_path / "two" / "train_log.jsonl")]
    loss_one = [r["loss"] for r in _log(tmp_path / "one" / "train_log.jsonl")]
    report(f"two processes on {device}, chunk {chunk}", max_loss_diff=max(abs(a - b) for a, b in zip(loss_two, loss_one)))
    assert len(loss_two) == 3 and loss_two == pytest.approx(loss_one, abs=1e-4)
    assert len(set(round(x, 4) for x in loss_one)) > 1  # the model did change


# ---------------------------------------------------------------------- embedding


@pytest.mark.parametrize("method", ["dpr", "dcsr"])
@CUDA_ONLY
def test_embedding_on_cuda_equals_the_cpu(tmp_path, tiny_bert, where, method):
    """Question vectors (DCSR: marked questions) of embed_question_sets on CUDA equal the CPU's in
    fp32, and agree at a cosine of 0.99 under auto (bf16 on a GPU that has it); passage vectors of
    encode_texts likewise."""
    import numpy as np

    from dcsr.models.biencoder import load_biencoder
    from dcsr.retrieval.embed import embed_question_sets, encode_texts
    from dcsr.training.loop import export_untrained
    from dcsr.training.methods import builder_class

    device = device_of(where)
    model_dir = tmp_path / "model"
    export_untrained({"question_max_length": 32, "passage_max_length": 64}, str(tiny_bert), model_dir,
                     log=lambda m: None, builder_cls=builder_class(method))
    questions = ["who wrote the novel about the river?", "when was the castle built", "what is it",
                 "where does the long and winding road through the old forest lead to in the end?"] * 3

    def questions_on(dev, precision):
        out = tmp_path / f"q-{dev}-{precision}.npy"
        embed_question_sets(model_dir, [(questions, out)], batch_size=5, device=str(dev), progress=False,
                            precision=precision)
        return np.load(out)

    def cosine(a, b):
        return float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())

    cpu = questions_on("cpu", "fp32")
    here = questions_on(device, "fp32")
    auto = questions_on(device, "auto")
    tok, model, _ = load_biencoder(model_dir, device="cpu")
    model.eval()
    titles, texts = ["River", "Castle"] * 3, ["The river flows north. It is long.", "A castle on a hill."] * 3
    p_cpu = encode_texts(model, tok, texts, titles, "passage", 64, 4, torch.device("cpu"), precision="fp32",
                         progress=False)
    model.to(device)
    p_here = encode_texts(model, tok, texts, titles, "passage", 64, 4, device, precision="fp32", progress=False)
    report(f"embedding {method} on {device}", q_fp32_max_abs=float(np.abs(here - cpu).max()),
           q_auto_min_cos=cosine(auto, cpu), p_fp32_max_abs=float(np.abs(p_here - p_cpu).max()))
    assert here.shape == cpu.shape == (len(questions), cpu.shape[1])
    # fp32 on both (1e-3: room for TF32, should anything turn it on); auto is bf16 on a GPU
    assert np.allclose(here, cpu, atol=1e-3, rtol=1e-3) and cosine(here, cpu) > 0.9999
    assert cosine(auto, cpu) > 0.99
    assert np.allclose(p_here, p_cpu, atol=1e-3, rtol=1e-3)
