"""The version of the code a job runs: a digest of its script and of every ``dcsr`` module the
script imports, directly or through other modules, at module level or inside a function.

Every rule passes it as a param (``code=plan.code_version("x.py")``). Snakemake reruns a job
whose params changed, so an edit to a script or to a module it reaches (answer matching, say)
reruns the jobs that ran it, and only those; its metadata, the report included, records the
version that made each output. Imports are read from the source (``ast``), not executed, by
:func:`reached_files`, which tests/test_envs.py also uses to check each rule's conda env.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = ({n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(handler.type)
              if isinstance(n, (ast.Name, ast.Attribute))} if handler.type else {"BaseException"})
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def file_imports(path: Path, package: str = "", skip_optional: bool = True) -> set[str]:
    """Absolute names of the modules ``path`` imports, anywhere in it (module level, functions),
    but, with ``skip_optional``, inside a ``try`` whose handler catches ImportError (an optional
    import); relative imports resolved against ``package``; ``importlib.import_module("x")`` /
    ``find_spec("x")`` with a literal name count as importing ``x``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
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
    return {m for m in out if m}


def _dcsr_file(src: Path, module: str) -> Path | None:
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


@functools.lru_cache(maxsize=None)
def code_version(script: str, src: str) -> str:
    """A short digest of ``script`` and the dcsr modules it reaches (``src`` holds the ``dcsr``
    package's parent folder; optional imports count too): names and contents, so a moved module
    counts too."""
    src_path = Path(src)
    h = hashlib.sha256()
    for path in sorted(reached_files(Path(script), src_path, skip_optional=False)):
        try:
            name = path.relative_to(src_path).as_posix()
        except ValueError:
            name = path.name
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]
