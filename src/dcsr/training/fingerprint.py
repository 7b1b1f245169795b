"""Content identities of inputs, so that state reused across runs (a training checkpoint) is
reused only when everything that determines it is unchanged.

A file's SHA-256 is cached under the results folder, ``<results>/.cache/digests/<sha256 of
the resolved path>.json`` (keyed by the resolved path, size and modification time), so that a
21M-passage training or sentence file is read once, not at every start. A directory (a local
checkpoint) is hashed file by file, its files' digests in one such cache. Nothing is written
beside a user's own files or model folders: the results folder is the one ``rules/common.smk``
exports to every job (:data:`dcsr.fsutil.RESULTS_ENV`); without it (a script run by hand) no
cache is written or read, and where the cache cannot be written the hash is computed and not
cached.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any, Mapping

from dcsr.errors import InputError
from dcsr.fsutil import RESULTS_ENV, atomic_open
from dcsr.integrity import sha256_of


def _stamp(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _read_cache(cache: Path | None, resolved: str) -> dict:
    if cache is None:
        return {}
    try:
        value = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) and value.get("path") == resolved else {}


def _write_cache(cache: Path | None, value: dict) -> None:
    if cache is None:
        return
    try:
        with atomic_open(cache, encoding="utf-8") as fh:
            fh.write(json.dumps(value, sort_keys=True))
    except (OSError, InputError):  # a read-only results folder, a link out of it: no cache, the hash is still right
        pass


def cache_path(path: str | os.PathLike, kind: str = "file") -> Path | None:
    """Where the digests of ``path`` (a ``file`` or a ``dir``) are cached: under the results
    folder (:data:`RESULTS_ENV`), named by the SHA-256 of the kind and the resolved path; None
    where no results folder is known."""
    results = os.environ.get(RESULTS_ENV)
    if not results:
        return None
    key = hashlib.sha256(f"{kind}\0{os.path.realpath(path)}".encode("utf-8", "surrogateescape")).hexdigest()
    return Path(results) / ".cache" / "digests" / f"{key}.json"


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file, from its cache when its size and mtime are unchanged."""
    path = Path(path)
    resolved = os.path.realpath(path)
    stamp = _stamp(path)
    cache = cache_path(path, "file")
    cached = _read_cache(cache, resolved)
    if cached.get("stamp") == stamp and isinstance(cached.get("sha256"), str):
        return cached["sha256"]
    digest = sha256_of(path)
    if _stamp(path) == stamp:  # unchanged while it was read
        _write_cache(cache, {"path": resolved, "stamp": stamp, "sha256": digest})
    return digest


def dir_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a directory tree: of its files' relative paths and contents (hidden
    files left out), each file's hash cached (one cache for the directory)."""
    path = Path(path)
    resolved = os.path.realpath(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    cache = cache_path(path, "dir")
    cached = _read_cache(cache, resolved).get("files", {})
    cached = cached if isinstance(cached, dict) else {}
    entries, h = {}, hashlib.sha256()
    for f in files:
        rel = f.relative_to(path).as_posix()
        stamp = _stamp(f)
        old = cached.get(rel)
        fresh = isinstance(old, dict) and old.get("stamp") == stamp and isinstance(old.get("sha256"), str)
        digest = old["sha256"] if fresh else sha256_of(f)
        entries[rel] = {"stamp": stamp, "sha256": digest}
        h.update(f"{rel}\0{digest}\n".encode())
    if entries != cached:
        _write_cache(cache, {"path": resolved, "files": entries})
    return h.hexdigest()


def package_version(module: str) -> str | None:
    """The installed version of the distribution that provides ``module``."""
    for dist in importlib.metadata.packages_distributions().get(module.split(".")[0], []):
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def init_identity(init: str | Mapping[str, str]) -> dict:
    """What a training run starts from: a package's name and version (``pkg:NAME``), the tiny
    model's seed, a local checkpoint's content hash (not its path), or a model hub id with its
    revision (:func:`hub_revision`). A pair ``{question: CKPT, passage: CKPT}`` is
    ``{"question": identity, "passage": identity}`` (a pair of one checkpoint is that checkpoint's)."""
    from dcsr.models.checkpoints import init_pair, is_builtin_tiny, tiny_recipe

    if not isinstance(init, str):
        question, passage = init_pair(init)
        if question == passage:
            return init_identity(question)
        return {"question": init_identity(question), "passage": init_identity(passage)}
    if init.startswith("pkg:"):
        return {"package": init[4:], "version": package_version(init[4:])}
    if is_builtin_tiny(init):
        return {"tiny": init, "recipe": tiny_recipe()}
    path = Path(init).expanduser()
    if path.is_dir():  # by content: the same checkpoint elsewhere (another clone, a moved folder) resumes
        return {"sha256": dir_sha256(path)}
    return {"hub": init, "revision": hub_revision(init)}


def hub_revision(name: str) -> str | None:
    """The commit of a model hub checkpoint: the snapshot in the local Hugging Face cache (what
    ``from_pretrained`` loads offline), else the hub's current one, else None (no cache, no
    network). A hub name alone could stand for other weights after the owner pushes new ones."""
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(name, "config.json")
        if isinstance(cached, str):
            return Path(cached).parent.name  # .../snapshots/<commit>/config.json
    except Exception:  # noqa: BLE001 - a malformed name or cache: no revision known
        pass
    try:
        from huggingface_hub import model_info

        return model_info(name, timeout=10).sha
    except Exception:  # noqa: BLE001 - offline (HF_HUB_OFFLINE) or unreachable
        return None


def describe_change(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str:
    """Which inputs differ between two fingerprints, in words: ``training data changed
    (sha256 1a2b3c4d5e6f -> 5e6f7a8b9c0d); settings.learning_rate 0.001 -> 0.002``."""
    if not old:
        return "it has no fingerprint (written by an older version of dcsr)"
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict) and key == "settings":
            for k in sorted(set(a) | set(b)):
                if a.get(k) != b.get(k):
                    out.append(f"settings.{k} {a.get(k)!r} -> {b.get(k)!r}")
        elif isinstance(a, dict) and isinstance(b, dict) and "sha256" in a and "sha256" in b:
            out.append(f"{key} changed (sha256 {a['sha256'][:12]} -> {b['sha256'][:12]})")
        else:
            out.append(f"{key} {a!r} -> {b!r}")
    return "; ".join(out) or "no difference"


def file_identity(path: str | os.PathLike | None) -> dict | None:
    """``{"sha256": ...}`` of an input file, its content only (None for an absent input)."""
    if path is None:
        return None
    return {"sha256": file_sha256(path)}
