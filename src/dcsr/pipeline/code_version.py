"""The version of the code a job runs: a digest of its script and of every ``dcsr`` module the
script imports, directly or through other modules, at module level or inside a function.

Every rule passes it as a param (``code=plan.code_version("x.py")``). Snakemake reruns a job
whose params changed, so an edit to a script or to a module it reaches (answer matching, say)
reruns the jobs that ran it, and only those; its metadata, the report included, records the
version that made each output. Imports are read from the source (``ast``), not executed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path


def _module_file(src: Path, name: str) -> Path | None:
    """The file of dcsr module ``name`` (``dcsr.data.runs``) under ``src``, or None."""
    parts = name.split(".")
    as_file = src.joinpath(*parts).with_suffix(".py")
    if as_file.is_file():
        return as_file
    as_package = src.joinpath(*parts, "__init__.py")
    return as_package if as_package.is_file() else None


def _package_of(src: Path, path: Path) -> str:
    rel = path.relative_to(src).with_suffix("").parts
    return ".".join(rel[:-1]) if rel[-1] != "__init__" else ".".join(rel[:-1])


def imported_modules(src: Path, path: Path) -> set[Path]:
    """The files of the dcsr modules that ``path`` imports (and the packages they sit in)."""
    out: set[Path] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: only inside the package
                try:
                    package = _package_of(src, path).split(".")
                except ValueError:
                    continue
                base = package[:len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names = [module] + [f"{module}.{a.name}" for a in node.names]  # "from pkg import module"
        for name in names:
            if not (name == "dcsr" or name.startswith("dcsr.")):
                continue
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
                found = _module_file(src, ".".join(parts[:i]))
                if found:
                    out.add(found)
    return out


def reached_files(script: Path, src: Path) -> list[Path]:
    """``script`` and every dcsr module file it reaches through imports, sorted."""
    seen: set[Path] = set()
    todo = [script]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(imported_modules(src, path) - seen)
    return sorted(seen)


@functools.lru_cache(maxsize=None)
def code_version(script: str, src: str) -> str:
    """A short digest of ``script`` and the dcsr modules it reaches (``src`` holds the ``dcsr``
    package's parent folder): names and contents, so a moved module counts too."""
    src_path = Path(src)
    h = hashlib.sha256()
    for path in reached_files(Path(script), src_path):
        try:
            name = path.relative_to(src_path).as_posix()
        except ValueError:
            name = path.name
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]
