# The glue between Snakemake and the plan: the config checked against its schema, the plan
# (dcsr.pipeline.plan) that the rules ask their inputs and arguments of, the path patterns,
# the shell prefix, and the wildcards' shapes.
import json
import shlex
import sys

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from dcsr.attribution.analysis import fraction_of  # noqa: E402
from dcsr.errors import InputError  # noqa: E402
from dcsr.pipeline.config import train_datasets  # noqa: E402
from dcsr.pipeline.plan import Plan  # noqa: E402


validate(config, schema="../config/schema.yaml")
try:
    # the config's meaning (dcsr.pipeline.plan): datasets, models, runs, tables, paths, inputs
    plan = Plan(config, basedir=workflow.basedir)
except InputError as e:
    raise WorkflowError(str(e))

# the path patterns of dcsr.pipeline.paths (CORPUS_TSV, MODEL_DIR, ...), by name
globals().update(vars(plan.paths))
SCRIPTS = str(Path(workflow.basedir) / "workflow" / "scripts")

# Scripts import the dcsr package from src/, whichever environment runs them. Without
# --use-conda, jobs run with the Python that runs Snakemake (the project's venv), even when
# that venv is not activated.
from snakemake.settings.types import DeploymentMethod  # noqa: E402

USE_CONDA = DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
_path = "" if USE_CONDA else f"export PATH={Path(sys.executable).parent}:$PATH; "
shell.prefix(f"set -euo pipefail; {_path}export PYTHONPATH={Path(workflow.basedir) / 'src'}:${{{{PYTHONPATH:-}}}}; ")


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
