"""The Slurm route for real: a single-node Slurm on this machine (tests/slurm/local-cluster.sh),
the pipeline submitted through ``--profile profiles/slurm`` by snakemake-executor-plugin-slurm,
GPU rules scheduled onto two fake GPUs (and run on the CPU), training under torchrun with two
processes inside one Slurm job.

Needs root (the daemons run as root) and the Debian Slurm packages, which the fixture installs
with apt-get when they are missing. Elsewhere the tests are skipped, unless
DCSR_REQUIRE_SLURM=1 (CI sets it), which turns a missing cluster into a failure.
"""

import csv
import os
import re
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
    """A running single-node Slurm; yields the environment that points sbatch/squeue at it."""
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


def submit(repo, workdir, env, *args, timeout=1200):
    """snakemake through the project's Slurm profile, with the settings a cluster without
    slurmdbd needs (squeue for status) and this test's partition."""
    cmd = [SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(workdir),
           "--profile", str(repo / "profiles" / "slurm"),
           "--default-resources", "slurm_partition=debug", "--slurm-no-account",
           "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
           "--slurm-keep-successful-logs", "--latency-wait", "5", "--jobs", "4", "--verbose", *args]
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout)


def slurm_jobs(env) -> list[dict]:
    """Every job the cluster still remembers (MinJobAge=300): name, comment, TRES, state."""
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%k|%b|%T|%C"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return [dict(zip(("id", "comment", "tres", "state", "cpus"), line.split("|"))) for line in out.splitlines()]


def overlay(tmp_path, tiny_bert, **extra) -> Path:
    """config.yaml + ci.yaml, cut to BM25 and DPR, with GPU rules asking for GPUs: two for
    training (torchrun --nproc_per_node 2), one for embedding and search."""
    over = {
        "results": str(tmp_path / "results"),
        "encoders": {"tiny": str(tiny_bert)},
        "tables": {"dpr_dcsr": {"test_sets": ["encyclopedia"], "rows": [
            {"label": "BM25", "retriever": "bm25"},
            {"label": "DPR", "question": "dpr", "passage": "dpr"}]}},
        "train": {"gpus": 2, "max_steps": 4},
        "embed": {"gpus": 1},
        "index": {"gpus": 1},
        **extra,
    }
    path = tmp_path / "slurm-overlay.yaml"
    path.write_text(yaml.safe_dump(over))
    return path


def test_pipeline_runs_through_slurm_with_gpu_jobs_and_torchrun(slurm, repo, tmp_path, tiny_bert):
    over = overlay(tmp_path, tiny_bert)
    r = submit(repo, tmp_path, slurm, str(tmp_path / "results" / "tables" / "dpr_dcsr.md"),
               "--configfile", str(repo / "config" / "config.yaml"), str(repo / "config" / "ci.yaml"), str(over))
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
        rule = re.search(r"--comment '?rule_([a-z0-9_]+?)(?:_wildcards_[^' ]*)?'? ", call)
        assert rule, call
        by_rule.setdefault(rule.group(1), []).append(call)
    for rule in ("generate_corpus", "index_bm25", "train_biencoder", "embed_shard", "search_shard",
                 "merge_runs", "evaluate_topk", "make_table"):
        assert rule in by_rule, f"{rule} was not submitted: {sorted(by_rule)}"
    gpu_flag = re.compile(r"--(gpus|gres)[= ]['\"]?(gpu:)?(\d+)")
    assert all(gpu_flag.search(c).group(3) == "2" for c in by_rule["train_biencoder"]), by_rule["train_biencoder"]
    assert all(gpu_flag.search(c).group(3) == "1" for c in by_rule["embed_shard"] + by_rule["search_shard"])
    assert not any(gpu_flag.search(c) for c in by_rule["generate_corpus"] + by_rule["make_table"])
    assert all("--mem" in c and "--time" in c for c in calls)

    # and Slurm ran them: the cluster knows as many completed jobs as there were submissions
    jobs = slurm_jobs(slurm)
    done = [j for j in jobs if j["state"] == "COMPLETED"]
    assert len(done) >= len(calls), jobs
    assert any("gpu" in j["tres"] for j in done), jobs

    # training ran as two DDP processes under torchrun inside its Slurm job
    train_log = (tmp_path / "results" / "logs" / "train_biencoder" / "dpr.log").read_text()
    assert "2 process(es)" in train_log, train_log[-3000:]


def test_a_failing_job_fails_the_run(slurm, repo, tmp_path, tiny_bert):
    corpus = tmp_path / "broken.tsv"
    corpus.write_text("id\ttext\ttitle\n1\tA passage about something.\tTitle\n2\tno title column here\n")
    over = overlay(tmp_path, tiny_bert, corpora={"broken": {"path": str(corpus)}})
    r = submit(repo, tmp_path, slurm, str(tmp_path / "results" / "bm25" / "broken" / "index"), "--retries", "0",
               "--configfile", str(repo / "config" / "config.yaml"), str(repo / "config" / "ci.yaml"), str(over))
    out = r.stdout + r.stderr
    assert r.returncode != 0, out[-3000:]
    assert "sbatch call" in out
    assert re.search(r"Error in rule index_bm25|SLURM-job '\d+' failed", out), out[-3000:]
    assert f"{corpus}, line 3" in out or f"{corpus}:3" in out, out[-4000:]
    assert not (tmp_path / "results" / "bm25" / "broken" / "index").exists()
