import copy

import pytest
import yaml

from dcsr.config import check_config
from dcsr.errors import InputError


@pytest.fixture()
def cfg(repo):
    return yaml.safe_load((repo / "config" / "config.yaml").read_text())


def test_default_config_passes_schema_and_checks(cfg, repo):
    from snakemake.utils import validate

    validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))
    check_config(cfg)


def test_wrong_type_is_reported_with_its_key(cfg, repo):
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    cfg["embed"]["shards"] = "two"
    with pytest.raises(WorkflowError) as e:
        validate(cfg, str(repo / "config" / "schema.yaml"))
    assert "'two' is not of type 'integer'" in str(e.value)
    assert "shards" in str(e.value)


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["datasets"]["encyclopedia"].update(corpus="nope"), "datasets.encyclopedia.corpus"),
        (lambda c: c["models"]["dpr"].update(init="bert"), "models.dpr.init"),
        (lambda c: c["models"]["dpr"].update(train_on="nq"), "models.dpr.train_on"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][2].update(question="nope"), "tables.dpr_dcsr.rows.2.question"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(question={"encyclopedia": "nope"}, passage={"encyclopedia": "dpr"}),
         "tables.dpr_dcsr.rows.3.question.encyclopedia"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(question={"trivia": "dpr"}, passage={"trivia": "dpr"}),
         "tables.dpr_dcsr.rows.3.question.trivia"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(question={"encyclopedia": "dpr"}), "tables.dpr_dcsr.rows.3"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(datasets={"encyclopedia": "nope"}),
         "tables.dpr_dcsr.rows.3.datasets.encyclopedia"),
    ],
)
def test_cross_reference_errors_name_the_key(cfg, mutate, key):
    mutate(cfg)
    with pytest.raises(InputError, match=f"config: {key.replace('.', '[.]')}"):
        check_config(cfg)
