"""The version of the code a job runs: a digest of its script and of every ``dcsr`` module the
script imports, directly or through other modules, at module level or inside a function, and
the versions of the installed packages that change the numbers the job computes.

Every rule passes it as a param (``code=plan.code_version("x.py")``). Snakemake reruns a job
whose params changed, so an edit to a script or to a module it reaches (answer matching, say)
reruns the jobs that ran it, and only those; its metadata, the report included, records the
version that made each output. Imports are read from the source (``ast``), not executed, by
:func:`reached_files`, which tests/test_envs.py also uses to check each rule's conda env.

What is digested is the code's meaning, not its text: each file's syntax tree without its
docstrings (of the module, its classes and functions; comments are not in the tree), so a
reflowed docstring or a new comment plans nothing (at 21M passages a docstring in
dcsr.retrieval.embed would re-embed the corpus and redo everything after it), while any
change to what runs, a constant included, plans its jobs again.

A job's numbers also follow the libraries it runs: :data:`NUMBER_PACKAGES` says, script by
script, which of torch, transformers, tokenizers, faiss, openvino, onnxruntime, pyserini, regex
(answer matching), ir_measures, scipy, statsmodels and blingfire compute what it writes, and the version of each (as the Python that runs Snakemake has it
installed) is part of the version, as is that of each ``pkg:`` model package the config's
models start from, for the scripts that read it (:data:`PKG`). Under ``--use-conda`` a job
runs in the env of its rule (``envs/*.yaml``, versions pinned there), which Snakemake's own
``software-env`` rerun trigger follows.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
from pathlib import Path
from typing import Iterable

from dcsr.models.checkpoints import VOCAB_OF_TINY, init_pair, is_builtin_tiny


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = ({n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(handler.type)
              if isinstance(n, (ast.Name, ast.Attribute))} if handler.type else {"BaseException"})
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def file_imports(path: Path, package: str = "", skip_optional: bool = True) -> set[str]:
    """Absolute names of the modules ``path`` imports, anywhere in it (module level, functions),
    but, with ``skip_optional``, inside a ``try`` whose handler catches ImportError (an optional
    import); relative imports resolved against ``package``; ``importlib.import_module("x")`` /
    ``find_spec("x")`` with a literal name count as importing ``x``. Read once per process
    while the file is unchanged (every rule's version reads the same modules)."""
    return set(_file_imports(Path(path), package, skip_optional, _stamp(Path(path))))


@functools.lru_cache(maxsize=None)
def _tree(path: Path, stamp: tuple[int, int]) -> ast.Module:
    """The syntax tree of ``path`` as it is at ``stamp``, parsed once per process for both its
    imports and its digest (never changed: :func:`_dump` skips docstrings as it goes)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.lru_cache(maxsize=None)
def _file_imports(path: Path, package: str, skip_optional: bool, stamp: tuple[int, int]) -> frozenset[str]:
    tree = _tree(path, stamp)
    optional = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) and any(map(_catches_import_error, t.handlers))
                for stmt in t.body for n in ast.walk(stmt)} if skip_optional else set()
    out = set()
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                base = ".".join([*parts, *([node.module] if node.module else [])])
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "find_spec") and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            out.add(node.args[0].value)
    return frozenset(m for m in out if m)


@functools.lru_cache(maxsize=None)
def _dcsr_file(src: Path, module: str) -> Path | None:
    """The file that importing ``module`` runs under ``src``, looked up once per process (every
    script's walk asks for the same modules)."""
    p = src.joinpath(*module.split("."))
    for f in (p / "__init__.py", p.with_suffix(".py")):
        if f.is_file():
            return f
    return None


def reached_files(script: Path, src: Path, skip_optional: bool = True) -> dict[Path, set[str]]:
    """``{file: its imports}`` of ``script`` and of every ``dcsr`` module under ``src`` it reaches,
    transitively (importing ``dcsr.a.b`` runs ``dcsr/__init__``, ``dcsr/a/__init__`` and ``dcsr/a/b``)."""
    seen, todo = {}, [(Path(script), "")]
    while todo:
        path, package = todo.pop()
        if path in seen:
            continue
        seen[path] = file_imports(path, package, skip_optional)
        for m in seen[path]:
            parts = m.split(".")
            if parts[0] != "dcsr":
                continue
            for i in range(1, len(parts) + 1):
                if f := _dcsr_file(src, ".".join(parts[:i])):
                    todo.append((f, ".".join(parts[:i]) if f.name == "__init__.py" else ".".join(parts[: i - 1])))
    return seen


#: In :data:`NUMBER_PACKAGES`: the ``pkg:`` model packages the config's models start from.
PKG = "pkg:"

_ENCODE = ("torch", "transformers", "tokenizers")
_MATCH = "regex"  # DPR's answer matching: the tokenizer's classes (dcsr.data.answers)
#: The packages whose versions change what a script writes (import names; ``pkg:``: :data:`PKG`).
#: Chosen script by script from what its job runs, not from every module it reaches: a BM25
#: search reaches dcsr.models through dcsr.retrieval.mining, but no tensor of it goes through torch.
NUMBER_PACKAGES: dict[str, tuple[str, ...]] = {
    # the untrained export and training read the init checkpoint (a pkg: model's weights)
    "export_encoder.py": (*_ENCODE, PKG),
    "train_biencoder.py": (*_ENCODE, PKG, _MATCH),  # a DCSR positive: a sentence with an answer
    "export_model.py": _ENCODE,
    # Pyserini's index (faiss writes it) and a DPR model's question encoder
    "export_pyserini.py": (*_ENCODE, "faiss"),
    # embedding passages: torch, or the OpenVINO or ONNX Runtime twin of the encoder (embed.backend);
    # questions (and mining's) always in torch
    "embed_shard.py": (*_ENCODE, "openvino", "onnxruntime"),
    "embed_questions.py": _ENCODE,
    "index_shard.py": ("faiss",),
    # faiss, or exact search in torch (index.gpu: torch)
    "search_shard.py": ("faiss", "torch"),
    "mine_dense_negatives.py": (*_ENCODE, "faiss", _MATCH),
    # BM25: Lucene, in the Anserini jar pyserini ships
    "index_bm25.py": ("pyserini",),
    "search_bm25.py": ("pyserini",),
    "mine_bm25_negatives.py": ("pyserini", _MATCH),
    # scoring: DPR's answer matching (its tokenizer's Unicode classes are the regex module's) and
    # the standard measures (ir_measures)
    "merge_runs.py": (_MATCH, "ir_measures"),
    "evaluate_topk.py": (_MATCH, "ir_measures"),
    "fuse_runs.py": (_MATCH, "ir_measures"),
    "choose_temperature.py": (_MATCH, "ir_measures"),
    "choose_fusion_weight.py": (_MATCH, "ir_measures"),
    "pool_qrels.py": (_MATCH,),
    "prepare_squad.py": (_MATCH,),
    "make_appendix_b.py": (_MATCH,),  # answers counted per passage
    "generate_demo_data.py": (_MATCH,),  # passages and sentences picked by their answers
    # the tables' pooled measures and Wilson intervals; the ledger's tests and Holm's adjustment
    "make_table.py": ("ir_measures", "scipy"),
    "make_claims.py": ("scipy", "statsmodels"),
    # the corpus's sentence table under the default splitter
    "split_sentences.py": ("blingfire",),
}


_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _field(node: ast.AST, name: str):
    """``node``'s field ``name``, without the docstring that opens the body of a module, class
    or function."""
    value = getattr(node, name, None)
    if name == "body" and isinstance(node, _DOCUMENTED) and value:
        first = value[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            return value[1:]
    return value


#: The settings' help: ``_s(types, default, help, ...)`` in ``dcsr/settings.py`` (its third
#: argument, or ``help=``), the one line that config/README.md and the errors print of a setting.
#: It computes nothing, so it is left out of that file's digest, like a docstring: a clarified
#: help reruns no job (it reran every job that imports the settings).
SETTINGS_FILE, HELP_CALL = ("dcsr", "settings.py"), "_s"


def _without_help(node: ast.Call) -> ast.Call:
    """A copy of a settings call ``_s(...)`` whose help is the empty string."""
    args = [*node.args[:2], ast.Constant(""), *node.args[3:]] if len(node.args) >= 3 else node.args
    return ast.Call(func=node.func, args=args, keywords=[k for k in node.keywords if k.arg != "help"])


def _dump(node, skip_help: bool = False) -> str:
    """``ast.dump(node, include_attributes=False)`` without docstrings (and, with ``skip_help``,
    without the settings' help: :data:`HELP_CALL`), and with empty and None fields left out (as
    Python 3.13's ``show_empty=False``) on every Python, so that a field a newer Python adds to
    the tree (3.12's ``type_params=[]``) changes no version."""
    if isinstance(node, ast.AST):
        if skip_help and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == HELP_CALL:
            node = _without_help(node)
        fields = ((name, _field(node, name)) for name in node._fields)
        return f"{type(node).__name__}(" + ", ".join(
            f"{name}={_dump(value, skip_help)}" for name, value in fields if value is not None and value != []) + ")"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(item, skip_help) for item in node) + "]"
    return repr(node)


def source_digest(path: Path) -> bytes:
    """SHA-256 of the meaning of the Python file ``path``: its syntax tree without docstrings
    or comments (line numbers, layout and quoting left out too; in ``dcsr/settings.py`` without
    the settings' help, :data:`HELP_CALL`); once per unchanged file."""
    return _source_digest(Path(path), _stamp(Path(path)))


@functools.lru_cache(maxsize=None)
def _source_digest(path: Path, stamp: tuple[int, int]) -> bytes:
    skip_help = (path.parent.name, path.name) == SETTINGS_FILE
    return hashlib.sha256(_dump(_tree(path, stamp), skip_help).encode()).digest()


@functools.lru_cache(maxsize=None)
def source_version(script: str, src: str) -> str:
    """A short digest of ``script`` and the dcsr modules it reaches (``src`` holds the ``dcsr``
    package's parent folder; optional imports count too): names and meanings (:func:`source_digest`),
    so a moved module counts too."""
    src_path = Path(src)
    h = hashlib.sha256()
    for path in sorted(reached_files(Path(script), src_path, skip_optional=False)):
        try:
            name = path.relative_to(src_path).as_posix()
        except ValueError:
            name = path.name
        h.update(name.encode() + b"\0" + source_digest(path) + b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@functools.lru_cache(maxsize=None)
def package_version(module: str) -> str:
    """``<distribution>==<version>`` of the installed distribution that provides the import
    name ``module`` (``faiss``: ``faiss-cpu==1.15.1``), or ``<module>==absent``."""
    for dist in sorted(_distributions().get(module, [])):
        try:
            return f"{dist}=={importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{module}==absent"


def pkg_modules(config: dict) -> tuple[str, ...]:
    """The modules of the ``pkg:<module>`` checkpoints that the models of a completed config
    start from (``models.<m>.init``, through ``encoders``); a ``tiny`` model's vocabulary is one."""
    checkpoints = set()
    for model in config.get("models", {}).values():
        for name in init_pair(model["init"]):
            checkpoints.add(config.get("encoders", {}).get(name, name))
    checkpoints = {VOCAB_OF_TINY if is_builtin_tiny(c) else c for c in checkpoints}
    return tuple(sorted(c[len(PKG):] for c in checkpoints if c.startswith(PKG)))


def number_packages(script: str, pkg_modules: Iterable[str] = ()) -> list[str]:
    """The import names whose versions :func:`code_version` adds for ``script`` (a file name):
    :data:`NUMBER_PACKAGES`, with :data:`PKG` standing for ``pkg_modules``."""
    names = []
    for name in NUMBER_PACKAGES.get(Path(script).name, ()):
        names.extend(sorted(set(pkg_modules)) if name == PKG else [name])
    return names


def code_version(script: str, src: str, pkg_modules: Iterable[str] = ()) -> str:
    """What a rule's ``code`` param holds: :func:`source_version` of ``script``, then, for a
    script of :data:`NUMBER_PACKAGES`, the version of each package that changes its numbers
    (``pkg_modules``: the modules of the ``pkg:`` models the config's models start from), as
    ``<digest> torch==2.13.0 transformers==5.24.0 ...``."""
    return " ".join([source_version(script, src), *map(package_version, number_packages(script, pkg_modules))])
