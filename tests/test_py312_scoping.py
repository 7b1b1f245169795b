"""No function lets a list, set or dict comprehension bind a name that the function reads as a
global elsewhere.

Python 3.12 inlines those comprehensions into their function (PEP 709), and 3.12.0 to 3.12.3
(Ubuntu 24.04's Python, and the GPU image's) then compile the name as the function's local
everywhere in it: a sibling comprehension that reads the global raises UnboundLocalError
(CPython gh-118513, fixed in 3.12.4; a variant with enclosing names, gh-156664, is still open).
The GPU kit's DAG found one on 2026-11-28: ``write_coverage`` bound ``_f`` in
``{d for d, _f, _s in stats}`` and then called the module's ``_f`` in the next comprehension.
This machine's 3.11 runs such code, so only a scan of the source finds it here.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ["src", "workflow/scripts", "benchmarks", "tests"]
INLINED = (ast.ListComp, ast.SetComp, ast.DictComp)  # generator expressions keep their own frame
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def shadowed_globals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, int, int]]:
    """``(name, line read, line bound)`` for each read, in ``fn``'s own scope, of a name that a
    comprehension inlined into ``fn`` binds and that ``fn`` itself never binds (so it means a
    global or an enclosing name there)."""
    a = fn.args
    local = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
    bound, reads = {}, []

    def visit(node, inside: frozenset):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, SCOPES):
                if not isinstance(child, ast.Lambda):
                    local.add(child.name)
                continue
            if isinstance(child, INLINED):
                names = {n.id for g in child.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
                for name in names:
                    bound.setdefault(name, child.lineno)
                visit(child, inside | names)
                continue
            if isinstance(child, ast.Name) and child.id not in inside:
                if isinstance(child.ctx, ast.Load):
                    reads.append((child.id, child.lineno))
                else:
                    local.add(child.id)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                local.update((alias.asname or alias.name).split(".")[0] for alias in child.names)
            visit(child, inside)

    visit(fn, frozenset())
    return [(name, line, bound[name]) for name, line in reads if name in bound and name not in local]


def findings(source: str, filename: str = "<test>") -> list[str]:
    tree = ast.parse(source, filename)
    return [f"{filename}:{line}: {name} is read as a global, and a comprehension on line {at} binds it"
            for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            for name, line, at in shadowed_globals(fn)]


@pytest.mark.parametrize("source", [
    # CPython gh-118513's own example
    "import sys\ndef f():\n    _ = [sys for sys in []]\n    [sys.stdout.write('ok') for _ in [1]]\n",
    # the pattern write_coverage had
    "def _f(v):\n    return str(v)\n"
    "def g(stats):\n    seen = {d for d, _f, _s in stats}\n    return seen, [_f(s) for d, _f2, s in stats]\n",
    # a dict comprehension, and a read outside any comprehension
    "def h(rows):\n    m = {len: 1 for len in rows}\n    return len(m)\n",
])
def test_the_scan_finds_a_comprehension_that_shadows_a_global(source):
    assert findings(source)


@pytest.mark.parametrize("source", [
    "def f(xs):\n    return [x for x in xs], [x * 2 for x in xs]\n",          # each comprehension its own
    "def f(x):\n    return [x for x in x]\n",                                   # a parameter is a local
    "def f():\n    y = 1\n    return [y for y in range(3)], y\n",               # so is an assignment
    "import sys\ndef f():\n    return list(sys for sys in []), sys.argv\n",     # a generator is not inlined
    "def f(xs):\n    g = lambda: [x for x in xs]\n    return g, [len(x) for x in xs]\n",
])
def test_the_scan_passes_what_3_12_runs(source):
    assert findings(source) == []


def test_no_function_of_ours_reads_a_global_that_a_comprehension_binds():
    found = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += findings(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == [], "\n".join(found)
