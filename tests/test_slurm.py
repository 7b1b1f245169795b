"""The Slurm route for real: a Slurm on this machine (tests/slurm/local-cluster.sh), the pipeline
submitted through ``--profile profiles/slurm`` by snakemake-executor-plugin-slurm, GPU rules
scheduled onto two fake GPUs (and run on the CPU), training under torchrun with two processes
inside one Slurm job, and over two nodes (a second slurmd of this machine as the second node).

Needs root (the daemons run as root) and the Debian Slurm packages, which the fixture installs
with apt-get when they are missing. Elsewhere the tests are skipped, unless
DCSR_REQUIRE_SLURM=1 (CI sets it), which turns a missing cluster into a failure.
"""

import csv
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_workflow import SNAKEMAKE

pytestmark = pytest.mark.slow

CLUSTER = Path(__file__).parent / "slurm" / "local-cluster.sh"


def _unavailable(why: str):
    if os.environ.get("DCSR_REQUIRE_SLURM") == "1":
        pytest.fail(f"DCSR_REQUIRE_SLURM=1, but no test cluster: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A running Slurm (partition debug: one node; multi: two); yields the environment that
    points sbatch/squeue at it."""
    if os.geteuid() != 0:
        _unavailable("the test cluster's daemons run as root")
    r = subprocess.run(["bash", str(CLUSTER), "install"], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        _unavailable(f"cannot install Slurm: {(r.stdout + r.stderr)[-2000:]}")
    state = tmp_path_factory.mktemp("slurm")
    r = subprocess.run(["bash", str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], timeout=120)
        logs = "".join(p.read_text()[-2000:] for p in state.glob("*.log"))
        pytest.fail(f"the test cluster did not start: {r.stdout + r.stderr}\n{logs}")
    env = {**os.environ, "SLURM_CONF": str(state / "slurm.conf"), "HF_HUB_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    try:
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], timeout=120)


#: the rules the profile sends to its GPU partition (profiles/slurm/config.yaml: set-resources)
GPU_RULES = tuple(yaml.safe_load((Path(__file__).resolve().parents[1] / "profiles" / "slurm" / "config.yaml")
                                 .read_text())["set-resources"])


def submit(repo, workdir, env, *args, timeout=1200):
    """snakemake through the project's Slurm profile, with the settings a cluster without
    slurmdbd needs (squeue for status) and this test's partition, for every job (the profile's
    GPU rules too: a test's own --set-resources after these replaces them, and its rules' others
    fall back to the default)."""
    cmd = [SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir),
           "--profile", str(repo / "profiles" / "slurm"),
           "--default-resources", "slurm_partition=debug", "--slurm-no-account",
           "--set-resources", *(f"{rule}:slurm_partition=debug" for rule in GPU_RULES),
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
           "--slurm-keep-successful-logs", "--latency-wait", "5", "--jobs", "4", "--verbose", *args]
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


def slurm_jobs(env) -> list[dict]:
    """Every job the cluster still remembers (MinJobAge=3600), as ``scontrol show job`` fields
    (JobState, Comment, TresPerJob, ...)."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], env=env, capture_output=True, text=True, check=True).stdout
    return [dict(f.split("=", 1) for f in line.split() if "=" in f) for line in out.splitlines() if line.strip()]


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def small_config(repo, tmp_path, tiny_bert, **extra) -> Path:
    """config.yaml + ci.yaml cut to BM25 and one DPR on one test set (no attribution, no claims), as one
    complete config file; training asks for two GPUs (torchrun --nproc_per_node 2), embedding
    and search for one."""
    cfg = _merge(yaml.safe_load((repo / "config" / "generated.yaml").read_text()),
                 yaml.safe_load((repo / "config" / "ci.yaml").read_text()))
    cfg.pop("attribution", None)
    cfg.pop("claims", None)  # they name models and test sets cut here
    cfg["results"] = str(tmp_path / "results")
    cfg["encoders"] = {"tiny": str(tiny_bert)}
    cfg["datasets"] = {"encyclopedia": cfg["datasets"]["encyclopedia"]}
    cfg["models"] = {"dpr": {"method": "dpr", "init": "tiny", "train_on": "encyclopedia"}}
    cfg["tables"] = {"dpr_dcsr": {"title": "BM25 and DPR through Slurm", "test_sets": ["encyclopedia"], "rows": [
        {"label": "BM25", "retriever": "bm25"}, {"label": "DPR", "question": "dpr", "passage": "dpr"}]}}
    cfg["train"].update({"gpus": 2, "cpus_per_gpu": 1, "max_steps": 4})
    cfg["embed"]["gpus"] = 1
    cfg["index"]["gpus"] = 1
    # small enough for the test node (2 cores, the machine's memory less 2 GiB)
    cfg["resources"] = {"default": {"mem_mb": 1000, "runtime": 30}, "train_biencoder": {"mem_mb": 3000, "runtime": 30},
                        "embed_shard": {"mem_mb": 2000, "runtime": 30}}
    cfg = _merge(cfg, extra)
    path = tmp_path / "slurm-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_pipeline_runs_through_slurm_with_gpu_jobs_and_torchrun(slurm, repo, tmp_path, tiny_bert):
    cfg = small_config(repo, tmp_path, tiny_bert)
    r = submit(repo, tmp_path, slurm, str(tmp_path / "results" / "tables" / "dpr_dcsr.md"), "--configfile", str(cfg))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]

    # the table came out of the jobs
    rows = list(csv.DictReader(open(tmp_path / "results" / "tables" / "dpr_dcsr.csv")))
    assert {row["row"] for row in rows} == {"BM25", "DPR"}
    assert all(0.0 <= float(row["ours"]) <= 100.0 for row in rows)

    # every job went through sbatch; GPU rules asked for GPUs, in the form the plugin writes
    calls = re.findall(r"sbatch call: (.*)", out)
    assert calls, out[-3000:]
    by_rule = {}
    for call in calls:
        argv = shlex.split(call)
        rule = argv[argv.index("--comment") + 1].removeprefix("rule_").split("_wildcards_")[0]
        by_rule.setdefault(rule, []).append(call)
    for rule in ("generate_corpus", "index_bm25", "train_biencoder", "embed_shard", "search_shard",
                 "merge_runs", "evaluate_topk", "make_table"):
        assert rule in by_rule, f"{rule} was not submitted: {sorted(by_rule)}"
    gpu_flag = re.compile(r"--(gpus|gres)[= ]['\"]?(gpu:)?(\d+)")
    assert all(gpu_flag.search(c).group(3) == "2" for c in by_rule["train_biencoder"]), by_rule["train_biencoder"]
    assert all(gpu_flag.search(c).group(3) == "1" for c in by_rule["embed_shard"] + by_rule["search_shard"])
    assert not any(gpu_flag.search(c) for c in by_rule["generate_corpus"] + by_rule["make_table"])
    assert all(" --mem " in c and " -t " in c for c in calls)  # every rule's mem_mb and runtime

    # and Slurm ran them: the cluster knows as many completed jobs as there were submissions
    jobs = slurm_jobs(slurm)
    done = [j for j in jobs if j.get("JobState") == "COMPLETED"]
    assert len(done) >= len(calls), jobs
    trained = [j for j in done if j.get("Comment", "").startswith("rule_train_biencoder")]
    assert trained and all(j.get("TresPerJob") == "gres:gpu:2" for j in trained), trained

    # training ran as two DDP processes under torchrun inside its Slurm job
    train_log = (tmp_path / "results" / "logs" / "train_biencoder" / "dpr.log").read_text()
    assert "2 process(es)" in train_log, train_log[-3000:]


def test_a_failing_job_fails_the_run(slurm, repo, tmp_path, tiny_bert):
    corpus = tmp_path / "broken.tsv"
    corpus.write_text("id\ttext\ttitle\n1\tA passage about something.\tTitle\n2\tno title column here\n")
    cfg = small_config(repo, tmp_path, tiny_bert, corpora={"broken": {"path": str(corpus)}})
    r = submit(repo, tmp_path, slurm, str(tmp_path / "results" / "bm25" / "broken" / "index"), "--retries", "0",
               "--configfile", str(cfg))
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "sbatch call" in out
    assert re.search(r"Error in rule index_bm25|SLURM-job '\d+' failed", out), out[-3000:]
    log = (tmp_path / "results" / "logs" / "index_bm25" / "broken.log").read_text()
    assert f"{corpus}:3: expected 3 tab-separated fields" in log, log
    assert not (tmp_path / "results" / "bm25" / "broken" / "index").exists()


def slurm_logs(workdir: Path, rule: str) -> str:
    """The Slurm logs of ``rule``'s jobs (kept: --slurm-keep-successful-logs)."""
    return "".join(p.read_text() for p in sorted((workdir / ".snakemake" / "slurm_logs").glob(f"rule_{rule}/**/*.log")))


def jobstep_calls(workdir: Path, rule: str) -> list[str]:
    """The command lines snakemake-executor-plugin-slurm-jobstep started inside ``rule``'s Slurm
    jobs: Snakemake running the job, wrapped in an srun of its own or not (the plugin's debug line;
    submit() runs with --verbose, which the jobs get)."""
    return re.findall(r"The call for this job is: (.*)", slurm_logs(workdir, rule))


def test_training_over_two_nodes_is_one_job_whose_own_srun_starts_a_torchrun_a_node(slurm, repo, tmp_path, tiny_bert):
    """train.nodes: 2 on partition "multi" (two slurmds on this machine): one job over both nodes,
    in which the jobstep plugin runs the launcher's srun as it is (the job's mpi resource), not
    inside its own srun -n1; the srun starts a torchrun on each node, which meet at the c10d
    rendezvous and train as two DDP processes. A runtime of 10 minutes bounds a step that waits."""
    cfg = small_config(repo, tmp_path, tiny_bert, train={"gpus": 1, "nodes": 2},
                       resources={"train_biencoder": {"mem_mb": 2000, "runtime": 10}})
    r = submit(repo, tmp_path, slurm, str(tmp_path / "results" / "models" / "dpr"), "--configfile", str(cfg),
               "--set-resources", "train_biencoder:slurm_partition=multi")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]

    calls = [c for c in re.findall(r"sbatch call: (.*)", out) if "rule_train_biencoder" in c]
    assert len(calls) == 1 and re.search(r" --nodes=2\b", calls[0]) and re.search(r" --ntasks=2\b", calls[0]), calls
    assert "--gres=gpu:1" in calls[0] and "--ntasks-per-gpu" not in calls[0], calls
    run = shlex.split(calls[0])[shlex.split(calls[0]).index("--job-name") + 1]  # this run's jobs' name
    trained = [j for j in slurm_jobs(slurm) if j.get("JobName") == run and j.get("Comment", "").startswith("rule_train")]
    assert len(trained) == 1 and trained[0]["JobState"] == "COMPLETED" and trained[0]["NumNodes"] == "2", trained

    # in the job, Snakemake ran unwrapped, and its command's srun was the only one
    steps = jobstep_calls(tmp_path, "train_biencoder")
    assert steps and not any(s.lstrip().startswith("srun") for s in steps), steps
    assert "srun --nodes 2 --ntasks-per-node 1 --cpus-per-task 2" in slurm_logs(tmp_path, "train_biencoder")
    # while a one-node job is the plugin's ordinary step
    steps = jobstep_calls(tmp_path, "mine_bm25_negatives")
    assert steps and all(s.lstrip().startswith("srun -n1") for s in steps), steps

    train_log = (tmp_path / "results" / "logs" / "train_biencoder" / "dpr.log").read_text()
    assert "2 process(es)" in train_log, train_log[-3000:]
