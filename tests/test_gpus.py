"""GPUs on the machine that runs the jobs (dcsr.pipeline.gpus): a GPU rule's ``gpu`` resource
where the config asks for none but the job will find a GPU, and one GPU of its own for each job
that runs at once (a lock file a GPU, ``CUDA_VISIBLE_DEVICES``). On a machine without GPUs
nothing changes: resources stay the config's, commands run untouched."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcsr.pipeline import gpus
from dcsr.pipeline.plan import Plan
from test_plan import load
from test_workflow import SNAKEMAKE

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


# --------------------------------------------------------------------------- what a job asks for

def test_the_config_count_wins_else_one_where_the_job_finds_a_gpu():
    assert [gpus.job_gpus(0, 0), gpus.job_gpus(0, 3), gpus.job_gpus(2, 0), gpus.job_gpus(2, 8)] == [0, 1, 2, 2]


def test_gpu_rules_ask_for_a_gpu_only_where_one_is_here():
    config = load("config.yaml")
    plan = Plan(config)
    rules = ("embed_shard", "embed_questions", "mine_dense_negatives", "search_shard")
    # a CPU machine (or a cluster, where nothing here is looked at): the config's counts, 0
    assert [plan.gpu_resource(r, {}) for r in rules] == [0, 0, 0, 0]
    assert plan.train_resources("dpr-a", {})["gpu"] == 0
    # torch sees a GPU, faiss is the CPU build: the Flat index is searched in torch on CUDA too
    torch_only, faiss_only = {"torch": 2, "faiss": 0}, {"torch": 0, "faiss": 2}
    assert [plan.gpu_resource(r, torch_only) for r in rules] == [1, 1, 1, 1]
    assert plan.train_resources("dpr-a", torch_only)["gpu"] == 1  # one process, on cuda
    assert plan.gpu_resource("search_shard", faiss_only) == 1 and plan.gpu_resource("embed_shard", faiss_only) == 0
    # where the index runs, as index.gpu and the factory have it
    for mode, factory, expected in [(False, "Flat", [0, 0]), (True, "Flat", [0, 1]), ("auto", "HNSW32", [0, 1]),
                                    ("torch", "Flat", [1, 0]), ("torch", "IVF16,Flat", [0, 0])]:
        config = load("config.yaml")
        config["index"].update(gpu=mode, factory=factory)
        plan = Plan(config)
        assert [plan.index_on_gpu(h) for h in (torch_only, faiss_only)] == [bool(e) for e in expected], (mode, factory)
        assert [plan.gpu_resource("search_shard", h) for h in (torch_only, faiss_only)] == expected, (mode, factory)
    config = load("config.yaml")
    config["embed"]["gpus"] = 3
    assert Plan(config).gpu_resource("embed_shard", {}) == 3  # asked for: on any machine


def test_a_multi_node_job_asks_slurm_per_node_and_is_an_mpi_style_job():
    config = load("config.yaml")
    config["train"].update(gpus=4, nodes=2)
    assert Plan(config).train_resources("dpr-a", {"torch": 8}) == {
        "gpu": 0, "gres": "gpu:4", "nodes": 2, "mpi": "srun", "tasks": 2, "tasks_per_gpu": 0}


# --------------------------------------------------------------------------- this machine

def test_cuda_visible_devices_is_read_as_cuda_reads_it():
    assert gpus.listed_devices({}) is None
    assert gpus.listed_devices({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert gpus.listed_devices({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert gpus.listed_devices({"CUDA_VISIBLE_DEVICES": "2, 0,-1,3"}) == ["2", "0"]
    assert gpus.listed_devices({"CUDA_VISIBLE_DEVICES": "GPU-1a2b,MIG-3c"}) == ["GPU-1a2b", "MIG-3c"]


@pytest.fixture
def uncached():
    """The GPU count asked afresh in the test and forgotten after it (both are cached per process;
    taken before a test replaces one)."""
    cached = (gpus.gpus_here, gpus.gpus_here_for_jobs)
    for f in cached:
        f.cache_clear()
    yield
    for f in cached:
        f.cache_clear()


def test_without_a_gpu_driver_nothing_is_asked(monkeypatch, uncached):
    monkeypatch.setattr(gpus, "DRIVER_NODES", ("/nonexistent/nvidiactl",))
    monkeypatch.setattr(gpus.subprocess, "run", lambda *a, **k: pytest.fail("asked torch without a driver"))
    assert gpus.gpus_here() == {"torch": 0, "faiss": 0}


def test_the_count_comes_from_torch_and_faiss_in_a_child_process(monkeypatch, uncached, tmp_path):
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "some warning"\necho \'{"torch": 2, "faiss": 1}\'\n')
    fake.chmod(0o755)
    monkeypatch.setattr(gpus, "DRIVER_NODES", (str(tmp_path),))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.gpus_here(str(fake)) == {"torch": 2, "faiss": 1}
    assert gpus.gpus_here(str(tmp_path / "missing")) == {"torch": 0, "faiss": 0}  # said on stderr, not raised


def test_the_count_handed_down_is_taken_only_in_the_environment_that_counted_under_the_same_devices():
    venv = "/work/.venv"
    told = {gpus.GPUS_HERE_ENV: gpus.counts_for_jobs({"torch": 2, "faiss": 1}, venv, env={})}
    assert gpus.inherited_counts(venv, told) == {"torch": 2, "faiss": 1}
    assert gpus.inherited_counts("/conda/envs/gpu", told) is None  # a conda env's job counts for itself
    assert gpus.inherited_counts(venv, {**told, "CUDA_VISIBLE_DEVICES": "1"}) is None  # other devices
    listed = {"CUDA_VISIBLE_DEVICES": "1,3"}
    told_listed = {**listed, gpus.GPUS_HERE_ENV: gpus.counts_for_jobs({"torch": 2}, venv, env=listed)}
    assert gpus.inherited_counts(venv, told_listed) == {"torch": 2, "faiss": 0}
    assert gpus.inherited_counts(venv, {}) is None
    for bad in ("{", "[]", '{"torch": -1, "faiss": 0, "environment": "/work/.venv", "cuda_visible_devices": null}',
                '{"torch": true, "faiss": 0, "environment": "/work/.venv", "cuda_visible_devices": null}',
                '{"torch": "2", "faiss": 0, "environment": "/work/.venv", "cuda_visible_devices": null}',
                '{"faiss": 0, "environment": "/work/.venv", "cuda_visible_devices": null}'):
        assert gpus.inherited_counts(venv, {gpus.GPUS_HERE_ENV: bad}) is None, bad


def test_a_count_handed_down_is_not_asked_again(monkeypatch, uncached, tmp_path):
    monkeypatch.setattr(gpus, "DRIVER_NODES", (str(tmp_path),))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv(gpus.GPUS_HERE_ENV, gpus.counts_for_jobs({"torch": 3, "faiss": 0}))
    monkeypatch.setattr(gpus.subprocess, "run", lambda *a, **k: pytest.fail("asked torch again"))
    assert gpus.gpus_here() == {"torch": 3, "faiss": 0}


def test_the_process_that_runs_the_jobs_hands_its_count_down(monkeypatch, uncached):
    monkeypatch.setattr(gpus, "gpus_here", lambda python=None: {"torch": 2, "faiss": 1})
    monkeypatch.delenv(gpus.GPUS_HERE_ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.gpus_here_for_jobs() == {"torch": 2, "faiss": 1}
    assert gpus.inherited_counts() == {"torch": 2, "faiss": 1}


def test_a_gpu_job_started_with_the_count_pins_its_gpu_without_asking_torch(tmp_path):
    """The real wrapper on a machine with a (stand-in) GPU driver, started as a job starts it
    (the venv's ``python``, where Snakemake runs as its ``python3``): told 2 GPUs by the process
    that started it, it takes one; told nothing, it asks this machine's torch (a CPU build
    here: no GPU), and the command runs untouched."""
    code = ("import sys; from dcsr.pipeline import gpus; "
            f"gpus.DRIVER_NODES = ({str(tmp_path)!r},); gpus.run(sys.argv[1:])")
    env = {**os.environ, "PYTHONPATH": str(SRC), "DCSR_GPU_LOCK_DIR": str(tmp_path / "locks")}
    for name in ("SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES", gpus.GPUS_HERE_ENV):
        env.pop(name, None)
    python = next(p for p in (Path(sys.prefix) / "bin" / n for n in ("python", "python3")) if p.exists())
    told = {gpus.GPUS_HERE_ENV: gpus.counts_for_jobs({"torch": 2, "faiss": 0}, env={})}
    r = subprocess.run([str(python), "-c", code, "1", "--", *SHOW], env={**env, **told}, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stderr
    r = subprocess.run([str(python), "-c", code, "1", "--", *SHOW], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "unset", r.stderr


# --------------------------------------------------------------------------- one GPU a job

def test_each_holder_gets_its_own_gpus_and_a_request_is_all_or_nothing(tmp_path):
    devices = ["0", "1", "2"]
    a = gpus.try_acquire(1, devices, tmp_path)
    b = gpus.try_acquire(1, devices, tmp_path)
    assert [d for d, _ in a] == ["0"] and [d for d, _ in b] == ["1"]
    assert gpus.try_acquire(2, devices, tmp_path) is None  # one free of the two asked: holds none
    c = gpus.try_acquire(1, devices, tmp_path)
    assert [d for d, _ in c] == ["2"]  # so the one free GPU was not kept by the failed request
    os.close(a[0][1])
    assert [d for d, _ in gpus.try_acquire(1, devices, tmp_path)] == ["0"]  # released with its descriptor
    with pytest.raises(ValueError, match="needs 4 GPU"):
        gpus.acquire(4, devices, tmp_path)
    with pytest.raises(TimeoutError):
        gpus.acquire(1, devices, tmp_path, poll=0.05, timeout=0.2)


def test_with_slots_jobs_share_a_gpu_up_to_the_count_and_never_take_two_slots_of_one(tmp_path):
    devices = ["0", "1"]
    held = [gpus.try_acquire(1, devices, tmp_path, slots=3) for _ in range(6)]
    assert [[d for d, _ in h] for h in held] == [["0"], ["1"]] * 3  # spread first, then three a GPU
    assert gpus.try_acquire(1, devices, tmp_path, slots=3) is None  # the seventh waits
    os.close(held[3][0][1])
    assert [d for d, _ in gpus.try_acquire(1, devices, tmp_path, slots=3)] == ["1"]  # the freed slot
    # a two-GPU job takes one slot on each of two GPUs, or none
    fresh = tmp_path / "two"
    a = gpus.try_acquire(2, devices, fresh, slots=2)
    assert [d for d, _ in a] == ["0", "1"]
    b = gpus.try_acquire(2, devices, fresh, slots=2)
    assert [d for d, _ in b] == ["0", "1"]
    assert gpus.try_acquire(1, devices, fresh, slots=2) is None
    # one job a GPU (the default) is slot 0 alone: the lock file of before
    assert gpus._lock_name("0") == "gpu-0.lock" and gpus._lock_name("0", 2) == "gpu-0.slot2.lock"


@pytest.mark.parametrize("value, want", [(None, 1), ("", 1), ("1", 1), ("4", 4), ("0", ValueError),
                                         ("two", ValueError), ("-1", ValueError)])
def test_jobs_per_gpu_is_read_from_the_environment(value, want):
    env = {} if value is None else {gpus.JOBS_PER_GPU_ENV: value}
    if want is ValueError:
        with pytest.raises(ValueError, match=gpus.JOBS_PER_GPU_ENV):
            gpus.jobs_per_gpu(env)
    else:
        assert gpus.jobs_per_gpu(env) == want


def test_shared_gpus_start_jobs_side_by_side_and_count_the_slots(tmp_path):
    flag = tmp_path / "done"
    share = {"CUDA_VISIBLE_DEVICES": "4", gpus.JOBS_PER_GPU_ENV: "2"}
    first = [_starter(tmp_path, 1, _hold(flag), share, torch_gpus=1) for _ in range(2)]
    assert sorted(p.stdout.readline().strip() for p in first) == ["4", "4"]  # both on GPU 4 at once
    third = _starter(tmp_path, 1, SHOW, share, torch_gpus=1)
    time.sleep(1.5)
    assert third.poll() is None  # its two slots are held: it waits
    flag.touch()
    out, err = third.communicate(timeout=30)
    assert third.returncode == 0 and out.strip() == "4" and "one of 2 jobs a GPU" in err
    for p in first:
        assert p.wait(timeout=30) == 0
    count = _starter(tmp_path, "--count", [], share, torch_gpus=1)
    assert count.communicate(timeout=30)[0].strip() == "2"
    bad = _starter(tmp_path, 1, SHOW, {gpus.JOBS_PER_GPU_ENV: "0"})
    _, err = bad.communicate(timeout=30)
    assert bad.returncode == 1 and "DCSR_JOBS_PER_GPU='0'" in err


def _starter(tmp_path, n, command, env_extra=None, torch_gpus=4):
    """``python -m dcsr.pipeline.gpus n -- command`` on a machine whose torch sees ``torch_gpus``."""
    code = ("import sys; from dcsr.pipeline import gpus; "
            f"gpus.gpus_here = lambda python=None: {{'torch': {torch_gpus}, 'faiss': 0}}; gpus.run(sys.argv[1:])")
    env = {**os.environ, "PYTHONPATH": str(SRC), "DCSR_GPU_LOCK_DIR": str(tmp_path / "locks")}
    env.pop("SLURM_JOB_ID", None)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.update(env_extra or {})
    args = [str(n), "--", *command] if command else [str(n)]
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


SHOW = [sys.executable, "-c", "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES', 'unset'))"]


def _hold(flag: Path):
    """A command that prints its GPUs, then runs until ``flag`` exists."""
    return [sys.executable, "-c", "import os, pathlib, time; print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True)\n"
            f"while not pathlib.Path({str(flag)!r}).exists(): time.sleep(0.05)"]


def test_jobs_running_at_once_get_distinct_gpus_and_the_next_waits_for_one(tmp_path):
    flag = tmp_path / "done"
    first = [_starter(tmp_path, 1, _hold(flag), {"CUDA_VISIBLE_DEVICES": "4,6"}, torch_gpus=2) for _ in range(2)]
    seen = sorted(p.stdout.readline().strip() for p in first)
    assert seen == ["4", "6"]  # the listed devices, one each
    third = _starter(tmp_path, 1, SHOW, {"CUDA_VISIBLE_DEVICES": "4,6"}, torch_gpus=2)
    time.sleep(1.5)
    assert third.poll() is None  # both GPUs are held: it waits
    flag.touch()
    for p in first:
        assert p.wait(timeout=30) == 0
    out, err = third.communicate(timeout=30)
    assert third.returncode == 0 and out.strip() in {"4", "6"}, err
    assert "waiting for 1 of the GPUs 4,6" in err


def test_a_multi_gpu_job_gets_as_many(tmp_path):
    p = _starter(tmp_path, 2, SHOW)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and out.strip() == "0,1", err
    p = _starter(tmp_path, 8, SHOW)  # more than there are: all of them, said
    out, err = p.communicate(timeout=30)
    assert out.strip() == "0,1,2,3" and "asks for 8 GPUs; this machine shows 4" in err


@pytest.mark.parametrize("n, env, torch_gpus", [
    (0, {}, 4),                          # a job that asks for none
    (1, {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "2"}, 4),  # a Slurm job shown its own GPU: Slurm's binding
    (1, {}, 0),                          # a machine without GPUs
    (1, {"CUDA_VISIBLE_DEVICES": ""}, 4),  # every GPU hidden
])
def test_the_command_runs_untouched_where_there_is_nothing_to_pin(tmp_path, n, env, torch_gpus):
    p = _starter(tmp_path, n, SHOW, env, torch_gpus)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert out.strip() == env.get("CUDA_VISIBLE_DEVICES", "unset") and err == ""
    assert not (tmp_path / "locks").exists()


def test_jobs_inside_one_slurm_allocation_of_several_gpus_share_them_out(tmp_path):
    """Snakemake's local executor inside one allocation (salloc with 4 GPUs): each one-GPU job sees
    all four, so it takes one of its own, as on any machine (it used to run on GPU 0 with the
    others); a job asking for as many as it sees is Slurm's own binding, untouched."""
    p = _starter(tmp_path, 1, SHOW, {"SLURM_JOB_ID": "7"}, 4)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and out.strip() == "0" and "CUDA_VISIBLE_DEVICES=0" in err
    p = _starter(tmp_path, 4, SHOW, {"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, 4)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and out.strip() == "0,1,2,3" and err == ""


def test_the_command_keeps_its_exit_status_and_arguments(tmp_path):
    p = _starter(tmp_path, 1, [sys.executable, "-c", "import sys; print(sys.argv[1:]); sys.exit(3)", "a b", "$x"])
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 3 and out.strip() == "['a b', '$x']"


# --------------------------------------------------------------------------- the DAG

def dry_run_on(tmp_path, here: dict, *args) -> str:
    """A dry run of the default config by Snakemake in a process whose dcsr.pipeline.gpus
    sees ``here``: the DAG a machine with those GPUs builds."""
    code = ("import sys\nsys.path.insert(0, sys.argv.pop(1))\n"
            "try:\n    from dcsr.pipeline import gpus\n"
            "except ImportError:\n    pass  # a checkout from before it: sees no GPU\n"
            f"else:\n    gpus.gpus_here = lambda python=None: {here!r}\n"
            "import os\nfrom snakemake.cli import main\nsys.argv[0] = 'snakemake'\n"
            "try:\n    main()\nfinally:\n    print('handed down:', os.environ.get('DCSR_GPUS_HERE'), file=sys.stderr)")
    env = {**os.environ, "PATH": f"{Path(SNAKEMAKE).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", code, str(SRC), "--snakefile", str(REPO / "Snakefile"), "--directory",
                        str(tmp_path), "-n", "-p", "--cores", "4", *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return r.stdout + r.stderr


def gpu_of_rules(out: str) -> dict[str, set[int]]:
    """``{rule: the gpu resources of its jobs}`` of a dry run's job list."""
    found = {}
    for m in re.finditer(r"rule (\w+):\n(?:    .*\n)*?    resources: (.*)", out):
        gpu = re.search(r"\bgpu=(\d+)", m.group(2))
        found.setdefault(m.group(1), set()).add(int(gpu.group(1)) if gpu else None)
    return found


GPU_RULES = {"train_biencoder", "embed_shard", "embed_questions", "search_shard"}


def test_on_a_gpu_machine_the_gpu_jobs_take_one_each_and_start_pinned(tmp_path):
    out = dry_run_on(tmp_path, {"torch": 2, "faiss": 0})
    found = gpu_of_rules(out)
    assert GPU_RULES <= set(found), sorted(found)
    assert found["train_biencoder"] == found["embed_shard"] == found["embed_questions"] == {1}
    assert found["search_shard"] == {1}  # the demo's Flat index: searched in torch on CUDA
    assert found["make_table"] == {None} and found["index_bm25"] == {None}
    commands = re.findall(r"Shell command: (.*)", out)
    scripts = ("embed_shard.py", "embed_questions.py", "train_biencoder.py", "search_shard.py")
    gpu_jobs = [c for c in commands if any(f"/workflow/scripts/{s} " in c for s in scripts)]
    assert len(gpu_jobs) >= 4 and {c.split(" -- ")[0] for c in gpu_jobs} == {"python -m dcsr.pipeline.gpus 1"}
    # the count goes down to the jobs (DCSR_GPUS_HERE), so that none asks torch again
    handed = json.loads(re.search(r"handed down: (.*)", out).group(1))
    assert handed == {"torch": 2, "faiss": 0, "environment": sys.prefix,
                      "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def test_on_a_cpu_machine_the_dag_is_the_configs(tmp_path):
    found = gpu_of_rules(dry_run_on(tmp_path, {}))
    assert all(found[r] == {0} for r in GPU_RULES), found
