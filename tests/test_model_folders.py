"""Model folders named by the config (encoders:) are checked at DAG build for what loading them
would run: a remote-code model (config.json's auto_map) and pickle weights (pytorch_model.bin
without safetensors) are refused, naming the folder (docs/bad-inputs.md, hostile config)."""

import json

import pytest

from dcsr.errors import InputError
from dcsr.models.checkpoints import check_encoder


def _folder(tmp_path, config: dict, weights: dict):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", **config}))
    for name, data in weights.items():
        (folder / name).write_bytes(data)
    return folder


def test_a_remote_code_model_is_refused_at_dag_build(tmp_path):
    folder = _folder(tmp_path, {"auto_map": {"AutoModel": "modeling_evil.EvilModel"}}, {"model.safetensors": b"x"})
    with pytest.raises(InputError) as e:
        check_encoder(str(folder), "config: encoders.x")
    assert str(e.value) == (f"config: encoders.x: {str(folder)!r}: its config.json has auto_map (AutoModel: "
                            "modeling_evil.EvilModel), code of the model folder that loading would run (a remote-code "
                            "model); this workflow never runs a model's own code: give a checkpoint of an architecture "
                            "transformers ships")


def test_pickle_only_weights_are_refused_at_dag_build(tmp_path):
    folder = _folder(tmp_path, {}, {"pytorch_model.bin": b"\x80\x02pickle"})
    with pytest.raises(InputError) as e:
        check_encoder(str(folder), "config: encoders.x")
    assert str(e.value) == (f"config: encoders.x: {str(folder)!r}: holds pickle weights only (pytorch_model.bin), "
                            "and unpickling a file can run code: convert them to safetensors where you trust the file "
                            "(AutoModel.from_pretrained(folder).save_pretrained(folder, safe_serialization=True))")


def test_safetensors_beside_a_pickle_and_a_plain_folder_pass(tmp_path):
    folder = _folder(tmp_path, {}, {"model.safetensors": b"x", "pytorch_model.bin": b"y", "vocab.txt": b"[UNK]\n"})
    check_encoder(str(folder), "k")
