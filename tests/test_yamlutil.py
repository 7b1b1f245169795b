"""Strict YAML: a duplicated key (or YAML that does not parse) is an error naming file and line,
in every project file, and in Snakemake's config files before anything runs. And one Snakemake floor."""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.version import Version

from dcsr.errors import InputError
from dcsr.yamlutil import strict_load

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")
PROJECT_YAML = sorted(p.relative_to(REPO).as_posix() for p in [
    *REPO.glob("config/**/*.yaml"), *REPO.glob("config/**/*.yml"), *REPO.glob("profiles/*/config.yaml"),
    *REPO.glob("envs/*.yaml")])


def snakemake(repo, workdir, *args, timeout=300):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir), *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )


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
    r = snakemake(REPO, tmp_path, "-n", "--configfile", str(REPO / "config" / "generated.yaml"), "dup.yaml")
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
