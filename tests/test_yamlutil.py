"""Strict YAML: a duplicated key (or YAML that does not parse) is an error naming file and line,
in every project file, and in Snakemake's config files before anything runs. And one Snakemake floor."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from dcsr.errors import InputError
from dcsr.yamlutil import strict_load
from test_workflow import snakemake

REPO = Path(__file__).resolve().parents[1]
PROJECT_YAML = sorted(p.relative_to(REPO).as_posix() for p in [
    *REPO.glob("config/**/*.yaml"), *REPO.glob("config/**/*.yml"), *REPO.glob("profiles/*/config.yaml"),
    *REPO.glob("envs/*.yaml")])


def test_the_project_has_yaml_files_to_check():
    assert {"config/generated.yaml", "config/paper_numbers.yaml", "profiles/slurm/config.yaml", "envs/cpu.yaml"} <= set(PROJECT_YAML)


@pytest.mark.parametrize("name", PROJECT_YAML)
def test_every_project_yaml_file_loads_strictly(name):
    assert strict_load(REPO / name) is not None


def test_a_duplicate_key_names_file_line_and_key(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("a: 1\ndcsr_appendix_b:\n  rows: {}\nb:\n  c: 1\ndcsr_appendix_b:\n  rows: {}\n")
    with pytest.raises(InputError) as e:
        strict_load(f)
    assert str(e.value) == f"{f}:6: duplicate key 'dcsr_appendix_b' (first at line 2)"
    # nested and flow mappings too; ``where`` names text
    with pytest.raises(InputError) as e:
        strict_load("top:\n  inner: {k: 1, k: 2}\n", where="config/x.yaml")
    assert str(e.value) == "config/x.yaml:2: duplicate key 'k' (first at line 2)"
    with pytest.raises(InputError) as e:
        strict_load(str(f))  # a str naming a file is read as the file
    assert e.value.where == f"{f}:6"


def test_merge_keys_and_equal_keys_of_different_mappings_are_fine():
    text = "base: &b {x: 1, y: 2}\none:\n  <<: *b\n  y: 3\ntwo:\n  x: 1\n"
    assert strict_load(text) == {"base": {"x": 1, "y": 2}, "one": {"x": 1, "y": 3}, "two": {"x": 1}}
    assert strict_load("") is None


def test_malformed_yaml_names_file_and_line(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(InputError) as e:
        strict_load(f)
    assert re.fullmatch(rf"{re.escape(str(f))}:3: malformed YAML: .+", str(e.value)), str(e.value)
    with pytest.raises(InputError) as e:
        strict_load("a: 1\n  b: 2\n", where="c.yaml")
    assert str(e.value) == "c.yaml:2: malformed YAML: mapping values are not allowed here"
    with pytest.raises(InputError) as e:
        strict_load(tmp_path / "missing.yaml")
    assert str(e.value) == f"{tmp_path / 'missing.yaml'}: no such file"


def test_the_strict_loader_is_cheap_to_import():
    code = "import sys, dcsr.yamlutil; print(sorted(m for m in ('torch', 'numpy', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_paper_numbers_appendix_b_has_the_statistics_the_code_reads():
    from dcsr.evaluation.stats import APPENDIX_B, APPENDIX_B_STATISTICS

    entry = strict_load(REPO / "config" / "paper_numbers.yaml")[APPENDIX_B]
    assert entry["source"].startswith("DCSR paper, Appendix B")
    assert entry["rows"] == {"SQuAD": {"questions": 7921, "title_shared": 7624, "title_shared_pct": 96.25,
                                       "passage_shared": 6973, "passage_shared_pct": 88.03}}
    assert set(entry["rows"]["SQuAD"]) <= set(APPENDIX_B_STATISTICS)


def test_a_dry_run_with_a_duplicate_key_fails_naming_file_line_and_key(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text("results: results-a\nembed:\n  batch_size: 8\nresults: results-b\n")
    r = snakemake(REPO, tmp_path, "-n", "--configfile", str(REPO / "config" / "generated.yaml"), "dup.yaml", timeout=300)
    assert r.returncode != 0
    assert f"{dup}:4: duplicate key 'results' (first at line 1)" in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    assert not (tmp_path / "results-a").exists() and not (tmp_path / "results-b").exists()


def test_the_snakefile_and_pyproject_ask_for_the_same_snakemake():
    floor = re.search(r'^min_version\("([^"]+)"\)', (REPO / "Snakefile").read_text(), re.M)
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    pinned = [re.fullmatch(r"snakemake\s*>=\s*([\w.]+)", d.strip()) for d in deps if re.match(r"snakemake\s*[<>=!~]", d)]
    assert floor and len(pinned) == 1 and pinned[0], (floor, deps)
    assert Version(floor.group(1)) == Version(pinned[0].group(1))
    from importlib.metadata import version

    assert Version(version("snakemake")) >= Version(floor.group(1))


BOMB = ('a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)))


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    """'Billion laughs': 9 aliases of 9 aliases ... stand for 9^9 strings. PyYAML builds them as
    shared lists in a blink, but every walk of the config (the schema, the checks) hung on them."""
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    start = time.perf_counter()
    with pytest.raises(InputError) as e:
        strict_load(path)
    assert str(e.value) == (f"{path}: its aliases (*name) expand to more than 1,000,000 YAML nodes (an alias bomb, "
                            "'billion laughs'); a config is a few thousand: write it without them")
    assert time.perf_counter() - start < 5
    # a chain of aliases, each one list deeper, nests the document as deep as it is long
    chain = "l0: &l0 [1]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, 3000))
    with pytest.raises(InputError, match="nest the document more than 64 levels deep"):
        strict_load(chain, where="chain.yaml")
    # aliases as configs use them still load
    assert strict_load("a: &a {x: 1}\nb: *a\nc: [*a, *a]\n") == {"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 1}]}


def test_yaml_nested_too_deep_is_one_line_not_a_recursion_error(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("notes:\n  x: " + "[" * 600 + "]" * 600 + "\n")
    with pytest.raises(InputError) as e:
        strict_load(path)
    assert str(e.value) == f"{path}:2: YAML nested more than 64 levels deep; a config nests a few levels: flatten it"


def test_a_yte_template_is_refused(tmp_path):
    """Snakemake runs a config's YTE '?' expressions when it reads the file, before the Snakefile:
    that is outside our reach (docs/bad-inputs.md); our own loaders and the Snakefile's re-read
    refuse such a file, so no run goes on from it."""
    path = tmp_path / "over.yaml"
    path.write_text("__use_yte__: true\nresults: ?str(1 + 1)\n")
    with pytest.raises(InputError) as e:
        strict_load(path)
    assert str(e.value) == (f"{path}: asks for YTE templating (__use_yte__), whose '?' expressions are Python run "
                            "while the file is read; this workflow takes plain YAML only: write the values out")


def test_a_dry_run_on_an_alias_bomb_stops_in_seconds(tmp_path):
    """Snakemake's own reading of --configfile gets through the bomb (shared lists); the Snakefile's
    strict re-read stops it before the schema check would walk 9^9 strings."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("notes:\n" + "".join("  " + line for line in BOMB.splitlines(True)))
    r = snakemake(REPO, tmp_path, "-n", "--configfile", str(REPO / "config" / "generated.yaml"), str(bomb), timeout=120)
    assert r.returncode != 0
    assert f"{bomb}: its aliases (*name) expand to more than 1,000,000 YAML nodes" in r.stdout + r.stderr
