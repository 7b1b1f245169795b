# dcsr: DPR / DCSR dense retrieval, from corpus to paper tables.
# Read the pipeline from the includes below, one file per stage, in data-flow order.
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")  # as pyproject.toml's snakemake>=9 (tests/test_yamlutil.py checks they agree)

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from dcsr.errors import InputError  # noqa: E402
from dcsr.yamlutil import strict_load  # noqa: E402


# The default config, unless --configfile names others: a paper config is complete on its
# own, so none of the demo's corpora, models or tables leak into it. (Overlays such as
# config/ci.yaml are given after config/config.yaml: --configfile config/config.yaml config/ci.yaml.)
if not workflow.overwrite_configfiles:

    configfile: str(Path(workflow.basedir) / "config" / "config.yaml")


# Snakemake reads config files with a YAML reader that keeps the last of two equal keys without a
# word: read each again, strictly, so that a key given twice is an error naming file and line.
for _configfile in workflow.configfiles:
    try:
        strict_load(Path(_configfile))
    except InputError as e:
        raise WorkflowError(str(e))


report: "workflow/report/workflow.rst"


include: "rules/common.smk"
include: "rules/download.smk"
include: "rules/data.smk"
include: "rules/sentences.smk"
include: "rules/bm25.smk"
include: "rules/train.smk"
include: "rules/embed.smk"
include: "rules/search.smk"
include: "rules/mining.smk"
include: "rules/evaluate.smk"
include: "rules/tables.smk"
include: "rules/attribution.smk"


# resources: names rules; a misspelled one would be taken by no job (every rule is defined by now)
from dcsr.pipeline.config import check_resource_names  # noqa: E402

try:
    check_resource_names(config, {r.name for r in workflow.rules} | {"all"})
except InputError as e:
    raise WorkflowError(str(e))


rule all:
    input:
        plan.final_outputs(),
    default_target: True
