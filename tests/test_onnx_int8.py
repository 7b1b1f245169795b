"""The onnx-int8 embedding backend: ONNX Runtime with int8 weights, one passage per call."""

import numpy as np
import pytest
import torch

from dcsr.data.formats import Passage, write_corpus
from dcsr.errors import InputError
from dcsr.models.biencoder import build_biencoder, load_biencoder, save_biencoder, tokenize_passages
from dcsr.retrieval.embed import embed_corpus_shard

pytest.importorskip("onnxruntime")


def _cos(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture()
def model_and_corpus(tmp_path, tiny_bert):
    tok, model = build_biencoder(str(tiny_bert), "mean")
    save_biencoder(model, tok, tmp_path / "m", {"pooling": "mean", "passage_max_length": 64, "question_max_length": 32})
    words = "river city north bridge tower market harbour castle garden station".split()
    ps = [Passage(10 + i, " ".join(words[i % 10 :] + words[: i % 10])[: 12 + 7 * (i % 6)] + f" no {i}.", f"T{i}")
          for i in range(12)]
    write_corpus(tmp_path / "c.tsv", ps)
    return tmp_path / "m", tmp_path / "c.tsv", ps


def _embed(model, corpus, out, shards, backend, **kw):
    ids, vecs = [], []
    for s in range(shards):
        stats = embed_corpus_shard(model, corpus, s, shards, out / f"v{backend}{shards}-{s}.npy",
                                   out / f"i{backend}{shards}-{s}.npy", batch_size=5, progress=False, backend=backend,
                                   **kw)
        assert stats["backend"] == backend
        ids += np.load(out / f"i{backend}{shards}-{s}.npy").tolist()
        vecs.append(np.load(out / f"v{backend}{shards}-{s}.npy"))
    order = np.argsort(ids)
    return np.asarray(ids)[order], np.concatenate(vecs)[order]


def test_int8_vectors_are_close_to_fp32_and_do_not_depend_on_the_shard(tmp_path, model_and_corpus, one_thread):
    model, corpus, ps = model_and_corpus
    ids32, fp32 = _embed(model, corpus, tmp_path, 1, "torch")
    ids8, int8 = _embed(model, corpus, tmp_path, 1, "onnx-int8")
    ids8_3, int8_3 = _embed(model, corpus, tmp_path, 3, "onnx-int8")
    assert ids32.tolist() == ids8.tolist() == ids8_3.tolist() == [p.id for p in ps]
    assert not np.array_equal(int8, fp32)  # it ran quantized
    assert _cos(int8, fp32).min() > 0.95
    # one passage per call: the same vector in any shard, whatever its batchmates
    np.testing.assert_array_equal(int8, int8_3)


def test_int8_encoder_runs_the_exported_model(tmp_path, model_and_corpus, one_thread):
    """The ONNX twin computes what the encoder computes: with the int8 step taken out (the fp32
    export), the hidden states equal torch's."""
    from dcsr.models import onnx_int8

    model, _, ps = model_and_corpus
    tok, bi, _ = load_biencoder(model)
    bi.eval()
    batch = tokenize_passages(tok, [p.title for p in ps[:3]], [p.text for p in ps[:3]], 64)
    with torch.no_grad():
        want = bi.passage_model(**batch).last_hidden_state
    twin = onnx_int8.int8_encoder(bi.passage_model, threads=1, quantize=False)
    got = twin(**batch).last_hidden_state
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-4)
    assert twin.config.hidden_size == bi.hidden_size


def test_unknown_backend_and_gpu_are_refused(tmp_path, model_and_corpus):
    model, corpus, _ = model_and_corpus
    with pytest.raises(InputError, match="embed.backend: unknown backend .tensorrt."):
        embed_corpus_shard(model, corpus, 0, 1, tmp_path / "v.npy", tmp_path / "i.npy", backend="tensorrt")
    assert not (tmp_path / "v.npy").exists()
