"""A shard is tokenized a chunk of passages at a time (dcsr.retrieval.embed.TOKENIZE_CHUNK), so
that an embedding job's memory does not hold every passage's token lists at once (the 1M-passage
rehearsal, benchmarks/rehearsal/rehearsal.md). Chunking must not change a vector, its order or its ids."""

import numpy as np
import pytest
import torch

import dcsr.retrieval.embed as embed
from dcsr.models.biencoder import build_biencoder

TITLES = ["a", "b", "c", "d", "e", "f", "g"]
TEXTS = ["one. two.", "", "three. four. five.", "a much longer sentence here. and one more.", "six.",
         "seven eight nine ten. eleven.", "twelve."]
SPANS = [[(0, 4), (5, 9)], [], [(0, 6), (7, 12), (13, 18)], [(0, 28), (29, 42)], [(0, 4)], [(0, 21), (22, 29)],
         [(0, 7)]]


@pytest.fixture(scope="module")
def model(tiny_bert):
    tok, m = build_biencoder(str(tiny_bert))
    m.eval()
    return tok, m


@pytest.mark.parametrize("chunk", [1, 2, 3])
def test_sentence_vectors_are_the_same_whatever_the_chunk(model, monkeypatch, one_thread, chunk):
    tok, m = model
    whole = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 10, 2, torch.device("cpu"), progress=False)
    monkeypatch.setattr(embed, "TOKENIZE_CHUNK", chunk)
    parts = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 10, 2, torch.device("cpu"), progress=False)
    assert parts[1].tolist() == whole[1].tolist() == [0, 0, 2, 2, 2, 3, 3, 4, 5, 5, 6]
    assert parts[2].tolist() == whole[2].tolist()
    np.testing.assert_allclose(parts[0], whole[0], atol=1e-5)
    # a cap that drops sentences leaves no unfilled row behind
    capped = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 1, 2, torch.device("cpu"), progress=False)
    assert capped[1].tolist() == [0, 2, 3, 4, 5, 6] and np.abs(capped[0]).sum(axis=1).min() > 0


@pytest.mark.parametrize("side", ["passage", "question", "marked_question"])
def test_text_vectors_are_the_same_whatever_the_chunk(model, monkeypatch, one_thread, side):
    tok, m = model
    texts = [t or "empty" for t in TEXTS]
    whole = embed.encode_texts(m, tok, texts, TITLES, side, 32, 2, torch.device("cpu"), progress=False)
    monkeypatch.setattr(embed, "TOKENIZE_CHUNK", 3)
    parts = embed.encode_texts(m, tok, texts, TITLES, side, 32, 2, torch.device("cpu"), progress=False)
    assert parts.shape == whole.shape == (len(texts), m.hidden_size)
    np.testing.assert_allclose(parts, whole, atol=1e-5)


def test_a_tokenizer_that_pads_on_the_left_encodes_as_one_on_the_right(tiny_bert, tmp_path, one_thread):
    """A tokenizer saved with padding_side "left" (decoder models') would put CLS pooling on a pad
    token of the shorter rows: load_tokenizer pads on the right, and encode_texts pads its
    batches on the right whatever tokenizer it is given."""
    from dcsr.models.biencoder import load_tokenizer

    tok, m = build_biencoder(str(tiny_bert))
    m.eval()
    right = embed.encode_texts(m, tok, TEXTS[2:5], TITLES[2:5], "passage", 32, 3, torch.device("cpu"), progress=False)
    tok.padding_side = "left"
    left = embed.encode_texts(m, tok, TEXTS[2:5], TITLES[2:5], "passage", 32, 3, torch.device("cpu"), progress=False)
    np.testing.assert_allclose(left, right, atol=1e-6)
    import shutil

    shutil.copytree(tiny_bert, tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    assert load_tokenizer(str(tmp_path / "m")).padding_side == "right"
