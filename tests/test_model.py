"""The bi-encoder: pooling, tokenization, save/load."""

import json

import pytest
import torch

from dcsr.errors import InputError
from dcsr.model import (BiEncoder, build_biencoder, load_biencoder, save_biencoder, tokenize_passages,
                        tokenize_questions)


@pytest.fixture(scope="module")
def tok_model(tiny_bert):
    torch.manual_seed(0)
    tokenizer, model = build_biencoder(str(tiny_bert), pooling="cls")
    model.eval()
    return tokenizer, model


QUESTIONS = ["who wrote the novel?", "where is the longest river in the world located today?"]


def test_cls_pooling_is_first_hidden_state(tok_model):
    tokenizer, model = tok_model
    batch = tokenize_questions(tokenizer, QUESTIONS, 32)
    with torch.no_grad():
        vecs = model.encode_questions(**batch)
        hidden = model.question_model(**batch).last_hidden_state
    assert vecs.shape == (2, model.hidden_size)
    torch.testing.assert_close(vecs, hidden[:, 0])


def test_mean_pooling_respects_the_mask(tok_model):
    tokenizer, cls_model = tok_model
    model = BiEncoder(cls_model.question_model, cls_model.passage_model, pooling="mean").eval()
    batch = tokenize_questions(tokenizer, QUESTIONS, 32)
    mask = batch["attention_mask"]
    assert mask[0].sum() < mask[1].sum()  # the first question is padded
    with torch.no_grad():
        vecs = model.encode_questions(**batch)
        hidden = model.question_model(**batch).last_hidden_state
        alone = model.encode_questions(**tokenize_questions(tokenizer, QUESTIONS[:1], 32))
    n = int(mask[0].sum())
    torch.testing.assert_close(vecs[0], hidden[0, :n].mean(dim=0))
    # Padding does not leak into the mean: encoding the short question alone gives the same vector.
    torch.testing.assert_close(vecs[0], alone[0], atol=1e-5, rtol=1e-5)


def test_pool_positions_gather_one_vector_per_position(tok_model):
    tokenizer, model = tok_model
    batch = dict(tokenize_passages(tokenizer, ["a", "b"], ["one two three four", "five six"], 32))
    length = batch["input_ids"].shape[1]
    batch["pool_positions"] = torch.tensor([1, 3, length + 2])  # flat indices b * L + t
    with torch.no_grad():
        vecs = model.encode_passages(**batch)
        hidden = model.passage_model(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
                                     ).last_hidden_state
        p_vecs = model(tokenize_questions(tokenizer, QUESTIONS, 16), batch)[1]
    assert vecs.shape == (3, model.hidden_size)
    torch.testing.assert_close(vecs, torch.stack([hidden[0, 1], hidden[0, 3], hidden[1, 2]]))
    torch.testing.assert_close(p_vecs, vecs)


def test_forward_shapes(tok_model):
    tokenizer, model = tok_model
    q = tokenize_questions(tokenizer, QUESTIONS, 16)
    p = tokenize_passages(tokenizer, ["t1", "t2", "t3"], ["x y", "z", "w v u"], 16)
    with torch.no_grad():
        qv, pv = model(q, p)
    assert qv.shape == (2, model.hidden_size) and pv.shape == (3, model.hidden_size)


def test_passages_are_title_text_pairs(tok_model):
    tokenizer, _ = tok_model
    enc = tokenize_passages(tokenizer, ["Paris", ""], ["capital of france", "no title here"], 32)
    ids = enc["input_ids"][0][enc["attention_mask"][0].bool()].tolist()
    assert tokenizer.decode(ids) == "[CLS] paris [SEP] capital of france [SEP]"
    types = enc["token_type_ids"][0][enc["attention_mask"][0].bool()].tolist()
    assert types == [0, 0, 0, 1, 1, 1, 1]  # title is segment A, text segment B
    # As DPR, a passage without a title is its text alone.
    ids = enc["input_ids"][1][enc["attention_mask"][1].bool()].tolist()
    assert tokenizer.decode(ids) == "[CLS] no title here [SEP]"
    short = tokenize_passages(tokenizer, ["Paris"], ["capital of france " * 20], 10)
    assert short["input_ids"].shape[1] == 10


def test_save_load_round_trip(tok_model, tmp_path):
    tokenizer, model = tok_model
    out = tmp_path / "enc"
    save_biencoder(model, tokenizer, out, {"method": "dpr", "base_checkpoint": "tiny", "step": 7,
                                           "question_max_length": 16, "passage_max_length": 32})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["enc"]  # no temporary left behind
    assert (out / "question_encoder" / "config.json").is_file()
    assert (out / "passage_encoder" / "tokenizer.json").is_file() or (out / "passage_encoder" / "vocab.txt").is_file()
    meta = json.loads((out / "dcsr.json").read_text())
    assert meta["pooling"] == "cls" and meta["step"] == 7 and meta["method"] == "dpr"

    tok2, model2, meta2 = load_biencoder(out)
    assert meta2 == meta and model2.pooling == "cls"
    q = tokenize_questions(tokenizer, QUESTIONS, 16)
    p = tokenize_passages(tokenizer, ["a", "b"], ["some text", "other text"], 16)
    assert tokenize_questions(tok2, QUESTIONS, 16)["input_ids"].tolist() == q["input_ids"].tolist()
    with torch.no_grad():
        a, b = model(q, p)
        a2, b2 = model2(q, p)
    assert torch.equal(a, a2) and torch.equal(b, b2)

    # Saving again replaces the directory as a whole.
    save_biencoder(model, tokenizer, out, {"method": "dpr", "step": 8})
    assert json.loads((out / "dcsr.json").read_text())["step"] == 8


def test_load_rejects_a_plain_checkpoint(tiny_bert):
    with pytest.raises(InputError, match="dcsr.json"):
        load_biencoder(tiny_bert)


def test_unknown_pooling_is_an_input_error(tok_model):
    _, model = tok_model
    with pytest.raises(InputError, match="pooling"):
        BiEncoder(model.question_model, model.passage_model, pooling="max")


def test_tiny_encoder_name_builds_a_cached_checkpoint_once(tmp_path, monkeypatch):
    from dcsr.checkpoints import resolve_checkpoint
    from dcsr.model import load_encoder

    from dcsr.checkpoints import tiny_recipe

    monkeypatch.setenv("DCSR_CACHE", str(tmp_path))
    recipe = tiny_recipe()
    seed3, seed0 = tmp_path / f"tiny-bert-seed3-{recipe}", tmp_path / f"tiny-bert-seed0-{recipe}"
    path = resolve_checkpoint("tiny:3")
    assert path == str(seed3) and (seed3 / "vocab.txt").is_file()
    mtime = (seed3 / "config.json").stat().st_mtime_ns
    assert resolve_checkpoint("tiny:3") == path  # reused, not rebuilt
    assert (seed3 / "config.json").stat().st_mtime_ns == mtime
    assert resolve_checkpoint("tiny") == str(seed0)
    assert load_encoder("tiny:3").config.hidden_size == 32
    assert sorted(p.name for p in tmp_path.iterdir()) == [seed0.name, seed3.name]  # no temporaries left
    # a model cached under another recipe (another torch, another vocabulary) is not reused
    monkeypatch.setattr("dcsr.checkpoints.TINY_RECIPE", 2)
    assert resolve_checkpoint("tiny:3") != path and tiny_recipe() != recipe
