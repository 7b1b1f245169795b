"""What Slurm is asked to run for a training job, through the executor plugins' own code: the
``sbatch`` line of snakemake-executor-plugin-slurm and the job step of its jobstep plugin, which
runs inside the allocation. The job's resources and shell command come from a real dry run.

The jobstep plugin wraps a job's command in ``srun -n1 ...`` unless the job has an ``mpi``
resource. A multi-node training job starts its own ``srun`` (one torchrun per node): wrapped, that
``srun`` would be a step inside a step, which since Slurm 20.11 waits for resources the outer
step holds, until the time limit. No cluster is needed here; tests/test_slurm.py runs jobs."""

import re
import types

import pytest
import yaml
from snakemake.iocontainers import ResourceList

import snakemake_executor_plugin_slurm_jobstep as jobstep
from snakemake_executor_plugin_slurm.submit_string import get_submit_command
from snakemake_executor_plugin_slurm.utils import set_gres_string
from test_workflow import snakemake


def dry_run_job(repo, workdir, model, train: dict) -> tuple[dict, int, str]:
    """(resources, threads, shell command) of ``model``'s training job in a dry run of the
    default config with ``train`` merged into its ``train:`` section."""
    over = workdir / "train.yaml"
    over.write_text(yaml.safe_dump({"train": train}))
    r = snakemake(repo, workdir, "-n", "-p", "--cores", "64", f"results/models/{model}",
                  "--configfile", str(repo / "config" / "config.yaml"), str(over))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    block = re.search(rf"rule train_biencoder:\n(?:    .*\n)*?    wildcards: model={re.escape(model)}\n(?:    .*\n)*"
                      r"Shell command: (.*)", out)
    assert block, out[-3000:]
    fields = dict(re.findall(r"    (\w+): (.*)", block.group(0)))
    resources = {}
    for item in fields["resources"].split(", "):
        key, value = item.split("=", 1)
        resources[key] = int(value) if value.isdigit() else value
    return resources, int(fields.get("threads", 1)), block.group(1)


class Job:
    """What the plugins read of a Snakemake job."""

    name = "train_biencoder"

    def __init__(self, resources: dict, threads: int):
        self.resources, self.threads = ResourceList(fromdict=resources), threads

    def is_group(self):
        return False


def jobstep_call(job, command, monkeypatch) -> tuple[str, dict]:
    """(command line, environment) that the jobstep plugin starts inside the Slurm job for
    ``job``. Its ``format_job_exec`` (Snakemake running the one job, whose shell command then runs
    in that same process and environment) is stood in for by the job's shell command."""
    started = []

    class Popen:
        def __init__(self, call, **kwargs):
            started.append((call, kwargs["env"]))
            self.stdin = None

        def wait(self):
            return 0

    monkeypatch.setattr(jobstep.subprocess, "Popen", Popen)
    # what sbatch gives the batch script of a 2-node job
    for key, value in {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node[1-2]", "SLURM_NNODES": "2",
                       "SLURM_NTASKS": "2", "SLURM_CPUS_PER_TASK": "8", "SLURMD_NODENAME": "node1"}.items():
        monkeypatch.setenv(key, value)
    settings = types.SimpleNamespace(pass_command_as_script=False, array_execs="")
    executor = types.SimpleNamespace(
        workflow=types.SimpleNamespace(executor_settings=settings), gpu_job=None, job_array_task=False,
        logger=types.SimpleNamespace(debug=lambda *a, **k: None, error=lambda *a, **k: None),
        format_job_exec=lambda j: command, report_job_submission=lambda info: None,
        report_job_success=lambda info: None, report_job_error=lambda info: None)
    jobstep.Executor.run_job(executor, job)
    assert len(started) == 1
    return started[0]


def sbatch_line(job) -> str:
    params = {"run_uuid": "uuid", "slurm_logfile": "log", "comment_str": "rule_train_biencoder", "account": "",
              "partition": "", "workdir": "."}
    return get_submit_command(job, params) + set_gres_string(job)


def test_a_multi_node_training_job_starts_its_own_srun_unwrapped(repo, tmp_path, monkeypatch):
    resources, threads, command = dry_run_job(repo, tmp_path, "dpr-a", {"gpus": 4, "nodes": 2})
    job = Job(resources, threads)

    # inside it, the job's command runs as it is: the one srun is the launcher's, not nested in another
    call, env = jobstep_call(job, command, monkeypatch)
    assert call == command, call
    assert len(re.findall(r"(?:^|[\s;(|&])srun\s", call)) == 1, call
    srun = call[call.index("srun "):call.index(" torchrun ")]
    assert "--overlap" not in srun, srun
    assert re.search(r"--nodes[= ]2\b", srun) and re.search(r"--ntasks-per-node[= ]1\b", srun), srun
    assert re.search(rf"--cpus-per-task[= ]{threads}\b", srun), srun  # a step's default is one CPU a task
    assert "--nnodes 2 --nproc_per_node 4" in call
    # every variable the command reads is in the environment the plugin leaves it (it drops
    # SLURM_* but the job's id)
    read = set(re.findall(r"\$\{?(\w+)", call))
    assert read and read <= set(env), sorted(read - set(env))

    # the allocation: 2 nodes, one task each (one torchrun per node) with the job's threads, 4 GPUs each
    sbatch = sbatch_line(job)
    assert re.search(r" --nodes=2\b", sbatch) and re.search(r" --ntasks=2\b", sbatch), sbatch
    assert f" --cpus-per-task={threads}" in sbatch and " --gres=gpu:4" in sbatch, sbatch
    assert "--ntasks-per-gpu" not in sbatch and "--gpus=" not in sbatch, sbatch


def test_a_one_node_training_job_is_the_plugins_ordinary_step(repo, tmp_path, monkeypatch):
    resources, threads, command = dry_run_job(repo, tmp_path, "dpr-a", {"gpus": 2})
    job = Job(resources, threads)
    assert "mpi" not in resources and resources["gpu"] == 2
    sbatch = sbatch_line(job)
    assert " --gpus=2" in sbatch and " --ntasks=" not in sbatch and "--nodes=1" in sbatch, sbatch
    call, _ = jobstep_call(job, command, monkeypatch)
    assert call.startswith("srun -n1 ") and " --gpus=2 " in call and call.rstrip().endswith(command), call
    assert len(re.findall(r"(?:^|\s)srun\s", call)) == 1, call


@pytest.mark.parametrize("nodes", [2, 3])
def test_the_launcher_reads_only_what_the_batch_script_keeps(nodes):
    from test_plan import load

    from dcsr.pipeline.plan import Plan

    config = load("config.yaml")
    config["train"].update(gpus=1, nodes=nodes)
    launcher = Plan(config).train_launcher("dpr-a")
    assert set(re.findall(r"\$\{?(\w+)", launcher)) <= {"SLURM_JOB_ID"}, launcher
