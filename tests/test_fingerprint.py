"""What identifies a training run's start (dcsr.training.fingerprint, checkpoint_state.fingerprint): a local
checkpoint by content, a hub checkpoint with its revision, GradCache chunks when dropout is on."""

import shutil

from dcsr.training.fingerprint import hub_revision, init_identity
from dcsr.training.checkpoint_state import fingerprint
from dcsr.training.samples import validate_settings


def test_a_local_checkpoint_is_identified_by_content_not_by_path(tmp_path, tiny_bert):
    copy = tmp_path / "elsewhere" / "ckpt"
    shutil.copytree(tiny_bert, copy)
    assert init_identity(str(copy)) == init_identity(str(tiny_bert))
    assert "path" not in init_identity(str(copy))
    (copy / "config.json").write_text((copy / "config.json").read_text().replace("}", ', "x": 1}', 1))
    assert init_identity(str(copy)) != init_identity(str(tiny_bert))


def test_a_hub_checkpoint_is_identified_with_its_revision(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    repo = tmp_path / "models--org--enc"
    (repo / "snapshots" / "0123abcd").mkdir(parents=True)
    (repo / "snapshots" / "0123abcd" / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    assert hub_revision("org/enc") == "0123abcd"
    assert init_identity("org/enc") == {"hub": "org/enc", "revision": "0123abcd"}
    (repo / "refs" / "main").write_text("4567ef01")  # the owner pushed other weights
    (repo / "snapshots" / "4567ef01").mkdir()
    (repo / "snapshots" / "4567ef01" / "config.json").write_text("{}")
    assert init_identity("org/enc")["revision"] == "4567ef01"
    assert hub_revision("org/not-cached") is None  # offline, not cached: no revision known


def test_grad_cache_chunks_enter_the_fingerprint_when_dropout_is_on(tmp_path):
    data = tmp_path / "d.json"
    data.write_text("[]")

    def settings_of(dropout, chunk):
        s = validate_settings({"dropout": dropout, "grad_cache_chunk": chunk})
        return fingerprint(s, "dpr", data, data, "tiny", {}, 1)["settings"]

    assert settings_of(0.0, 0) == settings_of(0.0, 4)  # no dropout: chunks give the same model
    assert settings_of(0.1, 4)["grad_cache_chunk"] == 4 and "grad_cache_chunk" not in settings_of(0.1, 0)
    assert settings_of(None, 4) != settings_of(None, 8)  # None: the checkpoint's own dropout, on in BERT


def test_hashing_a_user_file_writes_no_cache_beside_it(tmp_path, monkeypatch):
    """The digest cache lives under results: (<results>/.cache/digests/, keyed by the resolved
    path, size and mtime), never beside a user's input file or model folder; with no results
    folder known (a script run by hand) no cache is written at all."""
    from dcsr.fsutil import RESULTS_ENV
    from dcsr.training.fingerprint import dir_sha256, file_sha256

    user = tmp_path / "user"
    (user / "ckpt").mkdir(parents=True)
    (user / "train.json").write_text("[]")
    (user / "ckpt" / "config.json").write_text("{}")
    results = tmp_path / "results"
    before = sorted(p.name for p in user.rglob("*"))

    monkeypatch.delenv(RESULTS_ENV, raising=False)
    file_sha256(user / "train.json"), dir_sha256(user / "ckpt")
    assert sorted(p.name for p in user.rglob("*")) == before
    assert not results.exists()

    monkeypatch.setenv(RESULTS_ENV, str(results))
    digest = file_sha256(user / "train.json")
    tree = dir_sha256(user / "ckpt")
    assert sorted(p.name for p in user.rglob("*")) == before  # nothing beside the user's files
    caches = sorted((results / ".cache" / "digests").iterdir())
    assert len(caches) == 2 and all(p.suffix == ".json" for p in caches)
    # the cached digest is the one used next time; a changed file is hashed again
    assert file_sha256(user / "train.json") == digest and dir_sha256(user / "ckpt") == tree
    (user / "train.json").write_text("[{}]")
    assert file_sha256(user / "train.json") != digest
    assert sorted((results / ".cache" / "digests").iterdir()) == caches
