# The glue between Snakemake and the plan: the config checked against its schema, the plan
# (dcsr.pipeline.plan) that the rules ask their inputs and arguments of, the path patterns,
# the shell prefix, and the wildcards' shapes.
import json
import os
import sys

import yaml

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from dcsr.attribution.analysis import fraction_of  # noqa: E402
from dcsr.errors import InputError  # noqa: E402
from dcsr.evaluation.trec_eval import judged_depth  # noqa: E402
from dcsr.fsutil import RESULTS_ENV, ResultsLocked, check_no_link_out, lock_results  # noqa: E402
from dcsr.pipeline.config import dev_datasets, json_arg, train_datasets  # noqa: E402
from dcsr.fixtures.synth import DOMAINS  # noqa: E402
from dcsr.pipeline.checks import (check_generated_domains, check_integers, check_names, check_results_folder,  # noqa: E402
                                  check_table_rows)
from dcsr.pipeline.gpus import gpus_here_for_jobs as _gpus_here  # noqa: E402
from dcsr.pipeline.job_shell import job_shell_prefix, running_python  # noqa: E402
from dcsr.pipeline.plan import Plan  # noqa: E402


try:
    check_names(config)  # one line for a bad name, before the schema's longer message
    check_table_rows(config)  # before the schema gives every row a fusion
except InputError as e:
    raise WorkflowError(str(e))
validate(config, schema="../config/schema.yaml")
try:
    # what the schema cannot say: integers written as floats (13.0 passes JSON Schema)
    check_integers(config, yaml.safe_load((Path(workflow.basedir) / "config" / "schema.yaml").read_text()))
    check_generated_domains(config, DOMAINS)
    # the config's meaning (dcsr.pipeline.plan): datasets, models, runs, tables, paths, inputs
    plan = Plan(config, basedir=workflow.basedir)
    # results: a folder this user can write (or make), and a non-ASCII path only under a UTF-8 locale
    check_results_folder(plan.results)
except InputError as e:
    raise WorkflowError(str(e))

# the path patterns of dcsr.pipeline.paths (CORPUS_TSV, MODEL_DIR, ...), by name
globals().update(vars(plan.paths))
SCRIPTS = str(Path(workflow.basedir) / "workflow" / "scripts")

# Scripts import the dcsr package from src/, whichever environment runs them. Without
# --use-conda, jobs run with the Python that runs Snakemake (the project's venv), even when
# that venv is not activated (the shell prefix: dcsr.pipeline.job_shell).
from snakemake.settings.types import DeploymentMethod  # noqa: E402

USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
# Every job knows the results folder, so that no write of dcsr.fsutil.atomic_path follows a link
# planted under it to a folder outside it; the rest of the prefix: dcsr.pipeline.job_shell.
os.environ[RESULTS_ENV] = os.path.abspath(plan.results)
shell.prefix(job_shell_prefix(Path(workflow.basedir) / "src", os.environ[RESULTS_ENV],
                              None if USE_CONDA else running_python().parent))


# GPUs (dcsr.pipeline.gpus). A GPU rule's `gpu` resource is its config's count, or 1 where that
# is 0 and the job, run on this machine, will find a GPU here; its command starts through
# `python -m dcsr.pipeline.gpus {resources.gpu}`, which gives it GPUs of its own. This machine is
# looked at only when Snakemake runs the jobs here (local or dry run): on a cluster the config's
# counts are what Slurm is asked for, in the main process and again in each job's. The count is
# handed to the jobs started here (DCSR_GPUS_HERE), so that a GPU job does not count again.
def gpus_here():
    return _gpus_here() if workflow.local_exec else {}


def train_resource(key):
    return lambda wc: plan.train_resources(wc.model, gpus_here())[key]


# One run at a time writes a results folder, whichever directory it was started from (Snakemake
# locks only its working directory); the lock is the process's until it ends.
_RESULTS_LOCK = []


onstart:
    try:
        _RESULTS_LOCK.append(lock_results(plan.results))
        # before Snakemake deletes, makes or writes anything under it (dcsr.fsutil)
        check_no_link_out(plan.results)
    except (ResultsLocked, InputError) as e:
        raise WorkflowError(str(e))


wildcard_constraints:
    corpus=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    dataset=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    model=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    qmodel=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    pmodel=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    shard=r"\d+",
    table=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    percent=r"\d+(\.\d+)?",
    family=r"[A-Za-z0-9][A-Za-z0-9_.-]*",
    fusion=r"linear|rrf",


# "bm25" names BM25's (question, passage) pair, never a dense model: the dense rules
# exclude it (both names are always followed by "/" in the path patterns below).
DENSE_MODEL = r"(?!bm25/)[A-Za-z0-9][A-Za-z0-9_.-]*"

ATTRIBUTION_REPORT = f"{SCRIPTS}/attribution_report.py"
PAPER_NUMBERS = str(Path(workflow.basedir) / "config" / "paper_numbers.yaml")
log_path, bench_path = plan.log, plan.bench
