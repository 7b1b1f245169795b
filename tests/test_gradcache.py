"""GradCache (dcsr.training.gradcache): chunked encoding gives the full batch's loss and gradients."""

import contextlib
import json

import pytest
import torch

from dcsr.models.biencoder import build_biencoder, load_biencoder
from dcsr.training import gradcache
from dcsr.training.gradcache import chunk_bounds, chunk_rows, grad_cache_step
from dcsr.training.distributed import nll_loss
from dcsr.training.loop import train
from dcsr.training.samples import sample_rng, SampleBuilder, validate_settings
from dcsr.training.sentence_samples import SentenceSampleBuilder

from test_train import SMALL, _log, make_records, train_in_two_processes

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one intra-op thread

# float32 throughout (no autocast). GradCache against the same chunks encoded in one graph (the
# same dropout masks): the same operations but the order of a few sums.
TOL = {"atol": 1e-6, "rtol": 1e-5}
# GradCache against one unchunked pass: each embedding row's gradient is then summed over all
# the batch's tokens at once rather than chunk by chunk (seen: 4e-6 on entries of 0.04), and
# DCSR's mean pooling takes prefix sums over the whole flat batch (2.7e-6 on vectors of 1.6)
ONE_PASS = {"atol": 1e-5, "rtol": 1e-4}


def _dcsr_records(n):
    """DCSR records: a 3-sentence gold passage with the answer in one sentence, 1-2 BM25
    passages; the rows per question vary, so the passage chunks cut across questions."""
    words = ["apple", "river", "castle", "engine", "forest", "guitar", "harbor", "island", "jungle", "kitten"]
    out = []
    for i in range(n):
        w, other = words[i % len(words)], words[(i + 3) % len(words)]
        hard = [{"title": other, "text": f"The {other} is old. It is far away.", "passage_id": str(100 + i)}]
        if i in (1, 2, 3):
            hard.append({"title": "misc", "text": f"Nothing here. The {words[(i + 5) % 10]} sleeps.",
                         "passage_id": str(200 + i)})
        out.append({"question": f"where is the {w}?", "answers": [w],
                    "positive_ctxs": [{"title": w, "text": f"It is a place. The {w} is here. It is nice.",
                                       "passage_id": str(i)}],
                    "negative_ctxs": [], "hard_negative_ctxs": hard})
    return out


def _setup(tiny_bert, method, dropout, pooling="cls", n=8):
    torch.manual_seed(0)
    tokenizer, model = build_biencoder(str(tiny_bert), pooling, dropout)
    settings = {"hard_negatives": 1, "question_max_length": 16, "passage_max_length": 32}
    if method == "dpr":
        builder = SampleBuilder(validate_settings(settings))
        records = make_records(12)[:n]
    else:
        # bm25_2: two sentences of two BM25 passages, or of one when a question has only one
        builder = SentenceSampleBuilder(validate_settings({**settings, "sampling": "bm25_2"},
                                                          SentenceSampleBuilder.SETTINGS), tokenizer=tokenizer)
        builder.setup(tokenizer, model)
        records = _dcsr_records(n)
    batch = builder.build(tokenizer, records, [sample_rng(3, 0, i) for i in range(n)])
    model.train()  # from_pretrained leaves the encoders in eval mode; training has dropout on
    return model, batch


def _grads(model):
    return {k: (v.grad.clone() if v.grad is not None else None) for k, v in model.named_parameters()}


def _reference(model, batch, chunk, seed):
    """Loss and gradients of the whole batch in one graph. With dropout, each chunk is encoded
    in turn from ``seed`` (as GradCache's first pass draws its masks); without, in one pass."""
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    if chunk is None:
        q, p = model(batch.q, batch.p)
    else:
        qs, ps, q_order, p_order = [], [], [], []
        for (qa, qb), (pa, pb) in chunk_bounds(batch.q["input_ids"].shape[0], batch.p["input_ids"].shape[0], chunk):
            (qc, qi), (pc, pi) = chunk_rows(batch.q, qa, qb), chunk_rows(batch.p, pa, pb)
            qv, pv = model(qc, pc)
            qs.append(qv)
            ps.append(pv)
            q_order.append(qi)
            p_order.append(pi)
        # the chunks' vectors come in the batch's order, so concatenating them is the batch
        assert torch.cat(p_order).tolist() == list(range(sum(x.shape[0] for x in ps)))
        q, p = torch.cat(qs), torch.cat(ps)
    loss, _ = nll_loss(q, p, batch.positive_index)
    loss.backward()
    return loss.detach(), _grads(model)


def _grad_cache(model, batch, chunk, seed):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)

    def loss_fn(q, p):
        loss, _ = nll_loss(q, p, batch.positive_index)
        return loss, loss.detach()

    loss = grad_cache_step(model, batch.q, batch.p, chunk, loss_fn)
    return loss, _grads(model)


def _assert_same(a, b, tol=TOL):
    loss_a, grads_a = a
    loss_b, grads_b = b
    assert torch.allclose(loss_a, loss_b, **tol), (loss_a, loss_b)
    assert grads_a.keys() == grads_b.keys()
    assert sum(g is not None for g in grads_a.values()) > 0
    for name in grads_a:
        if grads_a[name] is None:
            assert grads_b[name] is None or not grads_b[name].any(), name
            continue
        assert torch.allclose(grads_a[name], grads_b[name], **tol), (
            name, (grads_a[name] - grads_b[name]).abs().max())


@pytest.mark.parametrize("method, pooling", [("dpr", "cls"), ("dpr", "mean"), ("dcsr", "cls"), ("dcsr", "mean")])
def test_chunks_give_the_full_batch_loss_and_gradients(tiny_bert, monkeypatch, method, pooling):
    """Batch of 8, chunks of 2: GradCache's loss and every parameter gradient are the one-graph
    computation's, with dropout (the same masks, from the chunks' RNG states) and without."""
    model, batch = _setup(tiny_bert, method, 0.1, pooling)
    if method == "dcsr":
        n_p = batch.p["input_ids"].shape[0]
        # 19 passage rows for 8 questions, 2 or 3 each: chunks of rows in proportion cut across questions
        assert batch.q["input_ids"].shape[0] == 8 and n_p > 16 and n_p % 8
    _assert_same(_grad_cache(model, batch, 2, seed=5), _reference(model, batch, 2, seed=5))
    # the masks matter: another seed gives another loss, and pass 3 without the RNG states of
    # pass 1 (what RandContext is for) other gradients
    assert not torch.allclose(_grad_cache(model, batch, 2, seed=6)[0], _reference(model, batch, 2, seed=5)[0])
    with monkeypatch.context() as m:
        m.setattr(gradcache, "RandContext", lambda device=None: contextlib.nullcontext())
        loss, grads = _grad_cache(model, batch, 2, seed=5)
    _, ref = _reference(model, batch, 2, seed=5)
    assert any(g is not None and not torch.allclose(g, ref[k], **TOL) for k, g in grads.items())

    plain, _ = _setup(tiny_bert, method, 0.0, pooling)  # no dropout: the reference is one unchunked pass
    for chunk in (2, 3, 8):
        _assert_same(_grad_cache(plain, batch, chunk, seed=0), _reference(plain, batch, None, seed=0), ONE_PASS)


def test_chunked_dcsr_passages_pool_the_same_vectors(tiny_bert):
    """Chunks of a DCSR passage batch, their pooling keys re-based, pool exactly the vectors of
    the whole batch, in its order."""
    for pooling in ("cls", "mean"):
        model, batch = _setup(tiny_bert, "dcsr", 0.0, pooling)
        model.eval()
        p, rows = batch.p, batch.p["input_ids"].shape[0]
        length = p["input_ids"].shape[1]
        with torch.no_grad():
            whole = model.encode_passages(**p)
            assert whole.shape[0] == p["pool_positions"].shape[0] > rows
            for size in (1, 2, 3, 5, rows):
                parts, order = [], []
                for start in range(0, rows, size):
                    chunk, index = chunk_rows(p, start, min(rows, start + size))
                    assert chunk["input_ids"].shape == (min(rows, start + size) - start, length)
                    positions = chunk["pool_positions"]
                    assert ((positions >= 0) & (positions < chunk["input_ids"].numel())).all()
                    torch.testing.assert_close(chunk["pool_positions"] + start * length, p["pool_positions"][index])
                    torch.testing.assert_close(chunk["pool_ends"] + start * length, p["pool_ends"][index])
                    torch.testing.assert_close(chunk["sentence_owner"] + start, p["sentence_owner"][index])
                    torch.testing.assert_close(chunk["sentence_index"], p["sentence_index"][index])
                    parts.append(model.encode_passages(**chunk))
                    order.append(index)
                assert torch.cat(order).tolist() == list(range(whole.shape[0]))
                assert torch.allclose(torch.cat(parts), whole, **(TOL if pooling == "cls" else ONE_PASS))
    # questions (DCSR's marked questions carry pool_positions too) and an unknown key
    q_chunk, q_index = chunk_rows(batch.q, 2, 5)
    assert q_index.tolist() == [2, 3, 4] and q_chunk["pool_positions"].tolist() == [
        1, batch.q["input_ids"].shape[1] + 1, 2 * batch.q["input_ids"].shape[1] + 1]
    with pytest.raises(ValueError, match="pool_weights"):
        chunk_rows({**p, "pool_weights": torch.ones(3)}, 0, 2)


def test_chunk_bounds():
    # DPR, 2 passages per question: a chunk's passages are exactly its questions'
    assert chunk_bounds(8, 16, 3) == [((0, 3), (0, 6)), ((3, 6), (6, 12)), ((6, 8), (12, 16))]
    assert chunk_bounds(8, 19, 2) == [((0, 2), (0, 4)), ((2, 4), (4, 9)), ((4, 6), (9, 14)), ((6, 8), (14, 19))]
    assert chunk_bounds(4, 8, 4) == chunk_bounds(4, 8, 100) == [((0, 4), (0, 8))]
    with pytest.raises(ValueError):
        chunk_bounds(8, 16, 0)


def test_training_with_grad_cache_gives_the_same_weights(tmp_path, tiny_bert):
    """Two steps of train() with grad_cache_chunk give the weights of train() without it (dropout
    0, float32), and the same checkpoint fingerprint: a run may resume under another chunk.

    The tolerance follows from the arithmetic, not from one CPU. The two runs' gradients agree
    to ONE_PASS (the sums' order differs; checked on every parameter by the test above). With
    Adam's epsilon at 1 the update lr * m / (sqrt(v) + eps) is Lipschitz in the gradient: a
    gradient that moves by at most d (elementwise, |g| <= G after clipping) moves the update by
    at most lr * d * (1/eps + G/eps**2) = lr * d * (1 + G). (At DPR's eps of 1e-8 the update is
    lr * sign(g) for most entries, and a gradient that is zero in exact arithmetic, such as an
    attention key bias's, turns rounding noise into a move of lr, whatever the CPU: no bound
    below lr exists there.) Each step also rounds the weight once in each run."""
    train_json, dev_json = tmp_path / "train.json", tmp_path / "dev.json"
    train_json.write_text(json.dumps(make_records(32)))
    dev_json.write_text(json.dumps(make_records(16)))
    steps = 2
    settings = {**SMALL, "max_steps": steps, "amp": "off", "val_av_rank_max_qs": 4, "val_max_qs": 4,
                "adam_eps": 1.0, "max_grad_norm": 2.0}
    weights, logs = {}, {}
    for chunk in (0, 2):
        out = tmp_path / f"out{chunk}"
        train({**settings, "grad_cache_chunk": chunk}, train_json, dev_json, str(tiny_bert), out,
              tmp_path / f"ck{chunk}", log=lambda m: None)
        _, model, meta = load_biencoder(out)
        assert meta["settings"]["grad_cache_chunk"] == chunk
        weights[chunk] = model.state_dict()
        logs[chunk] = [json.loads(line) for line in open(out / "train_log.jsonl", encoding="utf-8")]
    assert [r["step"] for r in logs[2]] == [1, 2]
    # the loss of a step is GradCache's against one pass, as in the test above (ONE_PASS)
    assert [r["loss"] for r in logs[2]] == pytest.approx([r["loss"] for r in logs[0]],
                                                         abs=ONE_PASS["atol"], rel=ONE_PASS["rtol"])
    assert [r["accuracy"] for r in logs[2]] == [r["accuracy"] for r in logs[0]]
    _, base_model = build_biencoder(str(tiny_bert))
    base = base_model.state_dict()
    grad_bound = settings["max_grad_norm"]  # clipping bounds every entry of the gradient
    d = ONE_PASS["atol"] + ONE_PASS["rtol"] * grad_bound
    eps = settings["adam_eps"]
    tol = {"atol": steps * settings["learning_rate"] * d * (1 / eps + grad_bound / eps ** 2),
           "rtol": steps * 2 * 2.0 ** -24}  # one float32 rounding of each weight per step and run
    moved = max((weights[0][k] - base[k]).abs().max().item() for k in base)
    # the bound is far below how far training moved the weights, so a wrong gradient shows
    assert moved > 10 * tol["atol"], (moved, tol)
    for k in weights[0]:
        assert torch.allclose(weights[2][k], weights[0][k], **tol), (k, (weights[2][k] - weights[0][k]).abs().max())
    fingerprints = [json.loads((tmp_path / f"ck{c}" / "last" / "fingerprint.json").read_text()) for c in (0, 2)]
    assert fingerprints[0]["settings"] == fingerprints[1]["settings"]
    assert "grad_cache_chunk" not in fingerprints[0]["settings"]


def test_two_processes_with_grad_cache_match_one(tmp_path, repo, tiny_bert):
    """Under DDP (torchrun, gloo on CPU): chunks of 3 of each process's 4 questions (the
    processes' vectors gathered for the loss, all but the last chunk's backward under
    no_sync) train like one process with the whole batch of 8 in one pass."""
    train_json, dev_json = tmp_path / "train.json", tmp_path / "dev.json"
    train_json.write_text(json.dumps(make_records(32)))
    dev_json.write_text(json.dumps(make_records(16)))
    settings = {**SMALL, "max_steps": 3, "amp": "off", "val_av_rank_max_qs": 4, "val_max_qs": 4}
    train_in_two_processes(repo, tiny_bert, train_json, dev_json, tmp_path / "two", tmp_path / "ck2",
                           {**settings, "grad_cache_chunk": 3})
    train({**settings, "batch_size": 8}, train_json, dev_json, str(tiny_bert), tmp_path / "one", tmp_path / "ck1",
          log=lambda m: None)
    loss_two = [r["loss"] for r in _log(tmp_path / "two" / "train_log.jsonl")]
    loss_one = [r["loss"] for r in _log(tmp_path / "one" / "train_log.jsonl")]
    assert len(loss_two) == 3 and loss_two == pytest.approx(loss_one, abs=1e-5)
    assert len(set(round(x, 4) for x in loss_one)) > 1  # the model did change


def test_a_process_with_fewer_chunks_keeps_step_with_the_others(tmp_path, tiny_bert, monkeypatch):
    """Under DDP every forward is a collective, so a process with fewer chunks than another
    encodes stand-ins (its first rows, zero gradient, RNG untouched) to run as many: its
    gradients, loss and RNG are those of its own chunks alone (a one-process group here, told
    that another process has two chunks more)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    model, batch = _setup(tiny_bert, "dcsr", 0.1)
    expected = _grad_cache(model, batch, 3, seed=5)
    after = torch.get_rng_state()
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        ddp = DistributedDataParallel(model)
        forwards = []
        monkeypatch.setattr(gradcache, "_most_chunks", lambda mine, device: mine + 2)
        ddp.register_forward_hook(lambda module, args, out: forwards.append(torch.is_grad_enabled()))
        model.zero_grad(set_to_none=True)
        torch.manual_seed(5)

        def loss_fn(q, p):
            loss, _ = nll_loss(q, p, batch.positive_index)
            return loss, loss.detach()

        loss = grad_cache_step(ddp, batch.q, batch.p, 3, loss_fn, encoder=model)
        assert forwards == [True] * (3 + 2)  # 8 questions: 3 chunks, and 2 stand-ins
        assert torch.equal(torch.get_rng_state(), after)
        _assert_same((loss, _grads(model)), expected)
    finally:
        dist.destroy_process_group()
