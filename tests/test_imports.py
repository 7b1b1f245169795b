"""The package's modules import each other without a cycle: every ``import``/``from`` of a dcsr
module, at module level or inside a function, is an edge, and the graph has no circle."""

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


def test_no_module_of_dcsr_imports_itself_back():
    graph = import_graph()
    # the one cycle of issue 17's code: checkpoints builds the tiny model, and tiny no longer
    # asks checkpoints for its vocabulary (the caller passes it)
    assert "tiny" in graph["checkpoints"] and "checkpoints" not in graph["tiny"]
    assert cycles(graph) == []
