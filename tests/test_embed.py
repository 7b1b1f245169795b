import json

import numpy as np
import pytest
import torch

from dcsr.errors import InputError
from dcsr.retrieval.batching import length_sorted_batches
from dcsr.retrieval.embed import embed_corpus_shard, embed_questions
from dcsr.data.formats import Passage, write_corpus
from dcsr.models.biencoder import build_biencoder, load_biencoder, save_biencoder, tokenize_passages, tokenize_questions


def test_length_sorted_batches_cover_rows_once():
    batches = length_sorted_batches([3, 9, 1, 7, 5], 2)
    assert [b.tolist() for b in batches] == [[1, 3], [4, 0], [2]]


def test_shards_partition_the_corpus_and_keep_corpus_order(tmp_path, tiny_bert):
    tok, model = build_biencoder(str(tiny_bert))
    save_biencoder(model, tok, tmp_path / "m", {"pooling": "cls", "passage_max_length": 64, "question_max_length": 32})
    words = "alpha beta gamma delta epsilon zeta eta theta".split()
    ps = [Passage(100 + i, " ".join(words[: 1 + (i * 3) % 8]) + f" number {i}.", f"T{i}") for i in range(11)]
    write_corpus(tmp_path / "c.tsv", ps)
    ids_all, vecs_all = [], []
    for s in range(3):
        stats = embed_corpus_shard(tmp_path / "m", tmp_path / "c.tsv", s, 3, tmp_path / f"v{s}.npy",
                                   tmp_path / f"i{s}.npy", batch_size=4, progress=False)
        ids = np.load(tmp_path / f"i{s}.npy")
        assert ids.tolist() == [p.id for r, p in enumerate(ps) if r % 3 == s]
        assert stats["passages"] == len(ids)
        ids_all += ids.tolist()
        vecs_all.append(np.load(tmp_path / f"v{s}.npy"))
    assert sorted(ids_all) == [p.id for p in ps]
    # Length-sorted, padded batches give the same vectors as one passage at a time.
    tok, bi, _ = load_biencoder(tmp_path / "m")
    bi.eval()
    by_id = dict(zip(ids_all, np.concatenate(vecs_all)))
    with torch.no_grad():
        for p in ps[:4]:
            one = bi.encode_passages(**tokenize_passages(tok, [p.title], [p.text], 64)).numpy()[0]
            np.testing.assert_allclose(by_id[p.id], one, atol=1e-5)


def test_fp16_storage_and_questions(tmp_path, tiny_bert):
    tok, model = build_biencoder(str(tiny_bert))
    save_biencoder(model, tok, tmp_path / "m", {"pooling": "cls"})
    write_corpus(tmp_path / "c.tsv", [Passage(1, "some text", "t"), Passage(2, "more text", "u")])
    embed_corpus_shard(tmp_path / "m", tmp_path / "c.tsv", 0, 1, tmp_path / "v.npy", tmp_path / "i.npy",
                       fp16=True, progress=False)
    assert np.load(tmp_path / "v.npy").dtype == np.float16
    embed_questions(tmp_path / "m", ["who?", "what is it?"], tmp_path / "q.npy", progress=False)
    q = np.load(tmp_path / "q.npy")
    assert q.shape == (2, 32) and q.dtype == np.float32
    # the stored numbers are the encoders' vectors (the passages' rounded to float16), computed
    # here directly from the saved model at the default max length 256
    tok, bi, _ = load_biencoder(tmp_path / "m")
    bi.eval()
    with torch.no_grad():
        p32 = bi.encode_passages(**tokenize_passages(tok, ["t", "u"], ["some text", "more text"], 256)).numpy()
        q32 = bi.encode_questions(**tokenize_questions(tok, ["who?", "what is it?"], 256)).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "v.npy").astype(np.float32), p32, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(q, q32, atol=1e-5)


def test_question_sets_share_one_model_load_and_match_single_sets(tmp_path, tiny_bert, monkeypatch):
    import dcsr.retrieval.embed as embed

    tok, model = build_biencoder(str(tiny_bert))
    save_biencoder(model, tok, tmp_path / "m", {"pooling": "cls"})
    loads = []
    real = embed._load_for_inference
    monkeypatch.setattr(embed, "_load_for_inference", lambda *a: loads.append(a) or real(*a))
    sets = [(["who?", "what is it?"], tmp_path / "a.npy"), (["where is the castle?"], tmp_path / "b.npy")]
    stats = embed.embed_question_sets(tmp_path / "m", sets, progress=False)
    assert len(loads) == 1 and [s["questions"] for s in stats] == [2, 1]
    embed.embed_questions(tmp_path / "m", ["where is the castle?"], tmp_path / "single.npy", progress=False)
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), np.load(tmp_path / "single.npy"), rtol=1e-5, atol=1e-6)
    assert np.load(tmp_path / "a.npy").shape == (2, 32)


def test_every_npy_of_a_shard_carries_its_checksum(tmp_path, tiny_bert, caplog):
    """The vectors, ids and sentence numbers of a shard and the question vectors end with the
    checksum trailer (dcsr.integrity): np.load reads them unchanged, load_npy verifies them
    (without a warning), and a changed value is refused."""
    import pytest

    from dcsr.errors import InputError
    from dcsr.integrity import TRAILER_SIZE, verify
    from dcsr.retrieval.index import load_npy

    tok, model = build_biencoder(str(tiny_bert))
    save_biencoder(model, tok, tmp_path / "m", {"pooling": "cls"})
    write_corpus(tmp_path / "c.tsv", [Passage(1, "some text", "t"), Passage(2, "more text", "u")])
    embed_corpus_shard(tmp_path / "m", tmp_path / "c.tsv", 0, 1, tmp_path / "v.npy", tmp_path / "i.npy",
                       out_sentences=tmp_path / "s.npy", progress=False)
    embed_questions(tmp_path / "m", ["who?"], tmp_path / "q.npy", progress=False)
    for name in ("v.npy", "i.npy", "s.npy", "q.npy"):
        assert verify(tmp_path / name, "rerun") is True
        assert (tmp_path / name).read_bytes()[-TRAILER_SIZE:].startswith(b"\ndcsr-sha256 ")
    with caplog.at_level("WARNING"):
        np.testing.assert_array_equal(load_npy(tmp_path / "i.npy", ndim=1), [1, 2])
        assert load_npy(tmp_path / "v.npy", ndim=2, mmap_mode="r").shape == (2, 32)
    assert not caplog.records
    data = bytearray((tmp_path / "v.npy").read_bytes())
    data[200] ^= 1
    (tmp_path / "v.npy").write_bytes(bytes(data))
    with pytest.raises(InputError, match="v.npy: does not match the checksum written when it was made"):
        load_npy(tmp_path / "v.npy")


def test_questions_are_encoded_as_the_model_trained_on_them(tmp_path, tiny_bert):
    """``question_text: dpr`` (DPR's and DCSR's normalize_question) is saved with the model and
    applied where its questions are embedded: "what’s" is then "what's"; ``raw`` (and a model saved
    before the key) keeps the right single quote, a token of its own."""
    from dcsr.data.answers import encoder_question
    from dcsr.training.loop import export_untrained

    assert encoder_question("what’s the river’s name?", "dpr") == "what's the river's name?"
    assert encoder_question("what’s", "raw") == "what’s"
    vectors = {}
    for rule in ("raw", "dpr"):
        export_untrained({"question_text": rule}, str(tiny_bert), tmp_path / rule, log=lambda m: None)
        embed_questions(tmp_path / rule, ["what’s the river’s name?", "what's the river's name?"],
                        tmp_path / f"{rule}.npy", progress=False)
        vectors[rule] = np.load(tmp_path / f"{rule}.npy")
    np.testing.assert_array_equal(vectors["dpr"][0], vectors["dpr"][1])
    assert np.abs(vectors["raw"][0] - vectors["raw"][1]).max() > 1e-3
    np.testing.assert_array_equal(vectors["raw"][1], vectors["dpr"][1])
    # a model saved before the key encodes as written; one whose key is not a rule is named
    meta = json.loads((tmp_path / "dpr" / "dcsr.json").read_text())
    (tmp_path / "dpr" / "dcsr.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "question_text"}))
    embed_questions(tmp_path / "dpr", ["what’s the river’s name?"], tmp_path / "old.npy", progress=False)
    np.testing.assert_allclose(np.load(tmp_path / "old.npy")[0], vectors["raw"][0], atol=1e-5)  # batched alone
    (tmp_path / "dpr" / "dcsr.json").write_text(json.dumps({**meta, "question_text": "smart"}))
    with pytest.raises(InputError, match=r"dpr/dcsr.json: question_text: unknown question_text 'smart'"):
        embed_questions(tmp_path / "dpr", ["who?"], tmp_path / "bad.npy", progress=False)
    assert not (tmp_path / "bad.npy").exists()
