"""The package's modules import each other without a cycle, and its subpackages import downward
only: every ``import``/``from`` of a dcsr module, at module level or inside a function, is an
edge; the graph has no circle, and no edge goes up the order of :data:`LAYERS`."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dcsr"


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """``{module: the dcsr modules it imports}`` (module names relative to the package)."""
    modules = {p.relative_to(root).with_suffix("").as_posix().replace("/", ".") for p in root.rglob("*.py")}
    graph = {}
    for path in root.rglob("*.py"):
        name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
        package = name.rsplit(".", 1)[0] if "." in name else ""
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(filter(None, [package] if node.level == 1 else []))
                    mod = ".".join(filter(None, [base, node.module or ""]))
                    targets = [mod] if node.module else [".".join(filter(None, [base, a.name])) for a in node.names]
                    targets += [f"{mod}.{a.name}" for a in node.names]  # "from .pkg import module"
                elif node.module and node.module.startswith("dcsr."):
                    targets = [node.module[5:]] + [f"{node.module[5:]}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name[5:] for a in node.names if a.name.startswith("dcsr.")]
            edges |= {t.replace(".__init__", "") for t in targets if t in modules and t != name}
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_inside_functions(tmp_path):
    (tmp_path / "a.py").write_text("def f():\n    from .b import g\n")
    (tmp_path / "b.py").write_text("import dcsr.a\n")
    assert import_graph(tmp_path) == {"a": {"b"}, "b": {"a"}}


#: dcsr's subpackages from the bottom up; each may import only from those before it (and from
#: itself). "" is the top-level modules (errors, fsutil, yamlutil, cli, settings, drivers, ...), below all.
LAYERS = ("", "data", "models", "evaluation", "retrieval", "training", "attribution", "pipeline", "fixtures")


def package_of(module: str) -> str:
    return module.split(".")[0] if "." in module else ""


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(importer, imported)`` of every edge into a subpackage later in :data:`LAYERS`."""
    rank = {p: i for i, p in enumerate(LAYERS)}
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if rank[package_of(b)] > rank[package_of(a)])


def test_no_module_of_dcsr_imports_itself_back():
    graph = import_graph()
    # issue 17's cycle: checkpoints builds the tiny model, and tiny no longer asks checkpoints
    # for its vocabulary (the caller passes it)
    assert "models.tiny" in graph["models.checkpoints"] and "models.checkpoints" not in graph["models.tiny"]
    assert cycles(graph) == []


def test_every_module_lives_in_a_known_layer():
    assert {package_of(m) for m in import_graph()} <= set(LAYERS)
    assert sorted(p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()) == sorted(LAYERS[1:])


def test_subpackages_import_downward_only():
    assert upward_imports(import_graph()) == []


def test_the_layer_check_finds_an_upward_import():
    graph = {"data.formats": {"errors"}, "errors": set(), "models.biencoder": {"data.formats"},
             "data.subsets": {"attribution.analysis"}, "attribution.analysis": {"data.subsets"}}
    assert upward_imports(graph) == [("data.subsets", "attribution.analysis")]


#: docs/code.md: one job a module; a module past about this many lines usually holds two.
MAX_MODULE_LINES = 600


def long_modules(root: Path = SRC, limit: int = MAX_MODULE_LINES) -> list[tuple[str, int]]:
    """``(module path, lines)`` of every module of ``root`` longer than ``limit`` lines."""
    sizes = ((p.relative_to(root).as_posix(), len(p.read_text(encoding="utf-8").splitlines()))
             for p in sorted(root.rglob("*.py")))
    return [(name, n) for name, n in sizes if n > limit]


def test_every_module_of_dcsr_holds_one_job():
    """A module past 600 lines is split where its second job starts (index.py's GPU placement
    became placement.py, biencoder.py's encoder families similarity.py)."""
    assert long_modules() == []


def test_the_size_check_finds_a_long_module(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * 600)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * 601)
    assert long_modules(tmp_path) == [("pkg/long.py", 601)]
