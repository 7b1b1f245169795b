"""The corpus embedding backends (``embed.backend``) for DPR's passage vectors and DCSR's sentence
vectors: openvino (the passage encoder run by OpenVINO's CPU plugin at the compute precision),
torch-cast (torch with the passage encoder's weights in the compute precision), and auto."""

import importlib.util

import numpy as np
import pytest
import torch

from dcsr.data.formats import Passage, write_corpus
from dcsr.data.sentences import split_corpus
from dcsr.errors import InputError
from dcsr.models.biencoder import build_biencoder, load_biencoder, save_biencoder, tokenize_passages
from dcsr.models.precision import cpu_bf16
from dcsr.retrieval.embed import cast_passage_encoder, embed_corpus_shard, resolve_backend

needs_openvino = pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed")

WORDS = "river city north bridge tower market harbour castle garden station".split()


def _cos(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture()
def corpus(tmp_path):
    ps = [Passage(10 + i, f"The {WORDS[i % 10]} is old. " + " ".join(WORDS[i % 10:] + WORDS[: i % 10])[: 12 + 7 * (i % 6)]
                  + f". Number {i}.", f"T{i}") for i in range(12)]
    write_corpus(tmp_path / "c.tsv", ps)
    split_corpus(tmp_path / "c.tsv", tmp_path / "s.tsv", progress=False)
    return tmp_path / "c.tsv", ps


@pytest.fixture()
def dpr_model(tmp_path, tiny_bert):
    tok, model = build_biencoder(str(tiny_bert), "mean")
    save_biencoder(model, tok, tmp_path / "m", {"pooling": "mean", "passage_max_length": 64, "question_max_length": 32})
    return tmp_path / "m"


@pytest.fixture()
def dcsr_model(tmp_path, tiny_bert):
    from dcsr.training.loop import export_untrained
    from dcsr.training.methods import builder_class

    export_untrained({"passage_max_length": 64, "question_max_length": 16, "max_sentences": 2},
                     str(tiny_bert), tmp_path / "dcsr", log=lambda m: None, builder_cls=builder_class("dcsr"))
    return tmp_path / "dcsr"


def _embed(model, corpus, out, shards, backend, precision="fp32", **kw):
    """Every shard's vectors, with their (passage id, sentence number) keys, in key order."""
    keys, vecs = [], []
    for s in range(shards):
        tag = f"{backend}{precision}{shards}-{s}"
        stats = embed_corpus_shard(model, corpus, s, shards, out / f"v{tag}.npy", out / f"i{tag}.npy", batch_size=5,
                                   progress=False, backend=backend, precision=precision,
                                   out_sentences=out / f"n{tag}.npy", **kw)
        assert stats["backend"] == backend and stats["precision"] == precision
        keys += zip(np.load(out / f"i{tag}.npy").tolist(), np.load(out / f"n{tag}.npy").tolist())
        vecs.append(np.load(out / f"v{tag}.npy"))
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return [keys[i] for i in order], np.concatenate(vecs)[order]


@needs_openvino
def test_openvino_hidden_states_equal_torch(dpr_model, corpus, one_thread):
    """The converted model computes what the encoder computes, at fp32, on a padded batch."""
    from dcsr.models.openvino_encoder import openvino_encoder

    _, ps = corpus
    tok, bi, _ = load_biencoder(dpr_model)
    bi.eval()
    batch = tokenize_passages(tok, [p.title for p in ps[:4]], [p.text for p in ps[:4]], 64)
    assert batch["attention_mask"].min() == 0  # padded: the mask reaches the converted model
    with torch.no_grad():
        want = bi.passage_model(**batch).last_hidden_state
    twin = openvino_encoder(bi.passage_model, "fp32", threads=1)
    got = twin(**batch).last_hidden_state
    assert got.dtype == torch.float32 and got.shape == want.shape
    mask = batch["attention_mask"].bool()
    np.testing.assert_allclose(got[mask].numpy(), want[mask].numpy(), atol=1e-4)
    # token types left out are zeros, as Hugging Face fills them
    no_types = {k: v for k, v in batch.items() if k != "token_type_ids"}
    with torch.no_grad():
        want0 = bi.passage_model(**no_types).last_hidden_state
    np.testing.assert_allclose(twin(**no_types).last_hidden_state[mask].numpy(), want0[mask].numpy(), atol=1e-4)
    assert twin.config.hidden_size == bi.hidden_size


@needs_openvino
@pytest.mark.parametrize("which", ["dpr", "dcsr"])
def test_openvino_shards_equal_torch_shards(tmp_path, corpus, dpr_model, dcsr_model, which, one_thread):
    """Passage vectors (DPR) and sentence vectors (DCSR, pooled at their markers) from OpenVINO
    match torch's in every shard."""
    model = dpr_model if which == "dpr" else dcsr_model
    extra = {"sentences": tmp_path / "s.tsv"} if which == "dcsr" else {}
    c, ps = corpus
    keys_t, torch_vecs = _embed(model, c, tmp_path, 1, "torch", **extra)
    keys_o, ov_vecs = _embed(model, c, tmp_path, 3, "openvino", **extra)
    assert keys_t == keys_o
    if which == "dpr":
        assert keys_t == [(p.id, -1) for p in ps]
    else:
        assert keys_t == [(p.id, s) for p in ps for s in (0, 1)]
    np.testing.assert_allclose(ov_vecs, torch_vecs, atol=2e-4)


@needs_openvino
@pytest.mark.skipif(cpu_bf16() is None, reason="bf16 needs a CPU with AMX or AVX-512 BF16")
def test_openvino_bf16_is_close_to_fp32(tmp_path, corpus, dpr_model, one_thread):
    c, _ = corpus
    _, fp32 = _embed(dpr_model, c, tmp_path, 1, "openvino")
    _, bf16 = _embed(dpr_model, c, tmp_path, 1, "openvino", precision="bf16")
    assert not np.array_equal(fp32, bf16)  # it computed in bf16
    assert _cos(fp32, bf16).min() > 0.999


@needs_openvino
def test_openvino_refuses_fp16_and_a_gpu(tmp_path, dpr_model):
    from dcsr.models.openvino_encoder import openvino_encoder

    _, bi, _ = load_biencoder(dpr_model)
    with pytest.raises(InputError, match="embed.precision: the openvino backend computes in fp32 or bf16, not fp16"):
        openvino_encoder(bi.passage_model, "fp16")
    if not torch.cuda.is_available():
        pytest.skip("the GPU refusal needs a GPU to load the model onto")
    with pytest.raises(InputError, match="embed.backend: openvino runs on the CPU"):
        embed_corpus_shard(dpr_model, tmp_path / "c.tsv", 0, 1, tmp_path / "v.npy", tmp_path / "i.npy",
                           backend="openvino", device="cuda")


@pytest.mark.parametrize("flag, device, precision, expected", [
    ("avx512_bf16", "cpu", "bf16", "openvino"),  # AVX-512 BF16 without AMX (Zen 4): measured faster
    ("amx_bf16", "cpu", "bf16", "torch"),        # AMX: not measured, torch
    ("avx512_bf16", "cpu", "fp32", "torch"),     # fp32 forced: not measured, torch
    (None, "cpu", "fp32", "torch"),              # no bf16 instructions
    ("avx512_bf16", "cuda", "bf16", "torch"),    # GPUs run torch
])
def test_auto_backend_is_openvino_only_where_it_was_measured_faster(monkeypatch, flag, device, precision, expected):
    import dcsr.retrieval.embed as embed

    monkeypatch.setattr(embed, "cpu_bf16", lambda: flag)
    assert embed.resolve_backend("auto", device, precision) == expected
    assert embed.resolve_backend("onnx-int8", device, precision) == "onnx-int8"  # a named backend is kept
    with pytest.raises(InputError, match="embed.backend: unknown backend 'tensorrt'"):
        embed.resolve_backend("tensorrt", device, precision)


@needs_openvino
def test_auto_backend_runs_and_records_what_it_resolved_to(tmp_path, corpus, dpr_model, one_thread):
    """On this machine: auto at bf16 (when the CPU has bf16) or fp32, and the stats name the
    runtime that ran, whose vectors equal that backend's when named."""
    c, _ = corpus
    precision = "bf16" if cpu_bf16() else "fp32"
    ran = resolve_backend("auto", "cpu", precision)
    stats = embed_corpus_shard(dpr_model, c, 0, 1, tmp_path / "va.npy", tmp_path / "ia.npy", batch_size=5,
                               progress=False, backend="auto", precision="auto")
    assert stats["backend"] == ran and stats["precision"] == precision
    _, named = _embed(dpr_model, c, tmp_path, 1, ran, precision=precision)
    np.testing.assert_allclose(np.load(tmp_path / "va.npy"), named, atol=1e-6)


def test_torch_cast_is_torch_where_there_is_nothing_to_cast():
    assert resolve_backend("torch-cast", "cpu", "fp32") == "torch"
    assert resolve_backend("torch-cast", "cuda", "fp32") == "torch"
    assert resolve_backend("torch-cast", "cuda", "bf16") == "torch-cast"
    assert resolve_backend("torch-cast", "cuda", "fp16") == "torch-cast"
    assert resolve_backend("torch-cast", "cpu", "bf16") == "torch-cast"


def test_cast_passage_encoder_casts_the_passage_encoder_and_turns_autocast_off(dpr_model):
    _, bi, _ = load_biencoder(dpr_model)
    assert bi.question_model is not bi.passage_model
    assert cast_passage_encoder(bi, "bf16") == "fp32"  # the precision to run under: no autocast
    assert {p.dtype for p in bi.passage_model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in bi.question_model.parameters()} == {torch.float32}
    with pytest.raises(ValueError, match="torch-cast computes in bf16 or fp16, not 'fp32'"):
        cast_passage_encoder(bi, "fp32")


@pytest.mark.parametrize("which", ["dpr", "dcsr"])
def test_torch_cast_shards_are_bf16_twins_of_autocast_shards(tmp_path, corpus, dpr_model, dcsr_model, which,
                                                              one_thread):
    """With its weights in bf16 the passage encoder runs another computation than bf16 autocast
    (layer norms and residual adds in bf16), sharded or not, for DPR's passage vectors and DCSR's
    sentence vectors; every vector stays within bf16 rounding of fp32's."""
    model = dpr_model if which == "dpr" else dcsr_model
    extra = {"sentences": tmp_path / "s.tsv"} if which == "dcsr" else {}
    c, _ = corpus
    keys_f, fp32 = _embed(model, c, tmp_path, 1, "torch", **extra)
    keys_a, autocast = _embed(model, c, tmp_path, 1, "torch", precision="bf16", **extra)
    keys_c, cast = _embed(model, c, tmp_path, 3, "torch-cast", precision="bf16", **extra)
    assert keys_c == keys_a == keys_f
    assert not np.array_equal(cast, autocast) and not np.array_equal(cast, fp32)
    assert _cos(cast, fp32).min() > 0.999 and _cos(autocast, fp32).min() > 0.999
    assert np.abs(cast - fp32).max() < 0.05

