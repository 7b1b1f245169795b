"""The pooling and similarity of an encoder family (:func:`family_similarity`).

DPR and BERT checkpoints use the dot product of [CLS] vectors; a sentence-transformers model
whose modules mean-pool and normalize (MiniLM) uses ``scale`` x cosine, with the scale its
authors train at (:data:`ST_SCALE`). Read from the checkpoint's own files (``config.json``,
``modules.json`` and its Pooling config), so deciding it loads no model and imports no torch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping

from dcsr.errors import InputError
from dcsr.models.checkpoints import (checkpoint_dir, resolve_checkpoint, st_module_kind, st_module_path,
                                      st_modules)


#: sentence-transformers trains with MultipleNegativesRankingLoss, whose default scale is 20
#: (scores are 20 x cosine); a normalized family without an explicit ``scale`` gets it.
ST_SCALE = 20.0
#: sentence-transformers' legacy pooling flags (v2-v5 configs) and the mode each stands for
_ST_LEGACY_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                    "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                    "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


def _st_pooling_modes(cfg: Mapping) -> list[str]:
    """The pooling modes of a sentence-transformers Pooling config: ``pooling_mode`` (v6: a
    mode or a list of modes), else the legacy ``pooling_mode_*`` flags that are set."""
    if "pooling_mode" in cfg:
        mode = cfg["pooling_mode"]
        return [str(m) for m in mode] if isinstance(mode, (list, tuple)) else [str(mode)]
    return [mode for key, mode in _ST_LEGACY_MODES.items() if cfg.get(key)]


def _model_type(path: Path) -> str | None:
    """``model_type`` of a local checkpoint's config.json (None for a hub id or without one)."""
    found = checkpoint_dir(path) if path.is_dir() else None
    if found is None:
        return None
    try:
        return json.loads((found / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, json.JSONDecodeError, AttributeError):
        return None


def family_similarity(init: str, pooling: str = "auto", normalize: bool | None = None,
                      scale: float | None = None) -> dict:
    """The pooling and similarity of a bi-encoder started from checkpoint ``init``.

    ``pooling: auto`` reads the init's own modules: a sentence-transformers model
    (``modules.json`` with a Pooling module, whose ``config.json`` says mean or CLS) gives its
    pooling, and a Normalize module gives ``normalize: true``; any other checkpoint (DPR,
    BERT) gives CLS and the dot product. ``normalize`` and ``scale`` left at ``None`` follow
    the family: scale 20 (:data:`ST_SCALE`) for normalized vectors, 1 otherwise. Explicit
    values override. Returns ``{"pooling", "normalize", "scale", "source"}``, where ``source``
    says where the pooling and normalization came from (it goes into the model's metadata).
    """
    found = {"pooling": "cls", "normalize": False}
    source = "not a sentence-transformers model: CLS and the dot product (DPR)"
    path = Path(os.path.expanduser(resolve_checkpoint(init)))
    if _model_type(path) == "dpr":
        source = "a DPR encoder (model_type dpr): CLS and the dot product, as its pooler_output"
    modules = st_modules(path)
    if modules:
        kinds = {st_module_kind(m): m for m in modules}
        if "Pooling" in kinds:
            pooling_module = dict(kinds["Pooling"], path=kinds["Pooling"].get("path") or "1_Pooling")
            cfg_file = st_module_path(path, pooling_module, str(path / "modules.json")) / "config.json"
            try:
                cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as e:
                raise InputError(str(cfg_file), f"cannot read the sentence-transformers pooling config: {e}")
            modes = _st_pooling_modes(cfg)
            if modes not in (["mean"], ["cls"]):
                raise InputError(str(cfg_file), f"pooling {modes} is not supported (mean or CLS tokens); "
                                                "set train.pooling explicitly")
            found["pooling"] = modes[0]
            found["normalize"] = "Normalize" in kinds
            source = (f"sentence-transformers modules (modules.json): {found['pooling']} pooling"
                      + (", Normalize" if found["normalize"] else ""))
    out = {"pooling": found["pooling"] if pooling == "auto" else pooling,
           "normalize": found["normalize"] if normalize is None else bool(normalize)}
    out["scale"] = float(scale) if scale is not None else (ST_SCALE if out["normalize"] else 1.0)
    overridden = [k for k, v in (("pooling", pooling != "auto"), ("normalize", normalize is not None),
                                 ("scale", scale is not None)) if v]
    out["source"] = source + (f"; set in the config: {', '.join(overridden)}" if overridden else "")
    return out


def pair_similarity(question_init: str, passage_init: str, pooling: str = "auto", normalize: bool | None = None,
                    scale: float | None = None) -> dict:
    """:func:`family_similarity` of a bi-encoder whose question and passage encoders start
    from two checkpoints: both must resolve to the same pooling and similarity (a
    sentence-transformers question encoder beside a DPR passage encoder is an
    :class:`InputError` unless the config sets them)."""
    q = family_similarity(question_init, pooling, normalize, scale)
    if passage_init == question_init:
        return q
    p = family_similarity(passage_init, pooling, normalize, scale)
    keys = ("pooling", "normalize", "scale")
    if any(q[k] != p[k] for k in keys):
        differ = ", ".join(f"{k} {q[k]!r} vs {p[k]!r}" for k in keys if q[k] != p[k])
        raise InputError("init", f"the question init {question_init!r} ({q['source']}) and the passage init "
                                 f"{passage_init!r} ({p['source']}) differ in {differ}; one bi-encoder has one "
                                 "similarity: set train.pooling, train.normalize and train.scale explicitly")
    out = dict(q)
    if q["source"] != p["source"]:
        out["source"] = f"question: {q['source']}; passage: {p['source']}"
    return out
