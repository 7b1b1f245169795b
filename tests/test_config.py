import copy

import pytest
import yaml

from dcsr.pipeline.config import check_config
from dcsr.errors import InputError


@pytest.fixture()
def cfg(repo):
    return yaml.safe_load((repo / "config" / "generated.yaml").read_text())


def test_default_config_passes_schema_and_checks(cfg, repo):
    from snakemake.utils import validate

    validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))
    check_config(cfg)


def test_wrong_type_is_reported_with_its_key(cfg):
    from dcsr.settings import check_sections

    cfg["embed"]["shards"] = "two"
    with pytest.raises(InputError) as e:
        check_sections(cfg)
    assert str(e.value) == "config: embed.shards: expected int, found 'two'"


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["datasets"]["encyclopedia"].update(corpus="nope"), "datasets.encyclopedia.corpus"),
        (lambda c: c["models"]["dpr"].update(init="bert"), "models.dpr.init"),
        (lambda c: c["models"]["dpr"].update(train_on="nq"), "models.dpr.train_on"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][2].update(question="nope"), "tables.dpr_dcsr.rows.2.question"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(question={"encyclopedia": "nope"}, passage={"encyclopedia": "dpr"}),
         "tables.dpr_dcsr.rows.3.question.encyclopedia"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(question={"squad": "dpr"}, passage={"squad": "dpr"}),
         "tables.dpr_dcsr.rows.3.question"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(question={"encyclopedia": "dpr"}), "tables.dpr_dcsr.rows.3"),
        (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(datasets={"encyclopedia": "nope"}),
         "tables.dpr_dcsr.rows.3.datasets.encyclopedia"),
    ],
)
def test_cross_reference_errors_name_the_key(cfg, mutate, key):
    mutate(cfg)
    with pytest.raises(InputError, match=f"config: {key.replace('.', '[.]')}"):
        check_config(cfg)


MIXED = ("pairs question encoder 'dpr' (method dpr) with passage encoder 'dcsr' (method dcsr); a question encoder "
         "searches the index of a passage encoder of its own method")


@pytest.mark.parametrize("mutate, key, message", [
    (lambda c: c["tables"]["hybrid"]["rows"][1].update(passage="dcsr"), "tables.hybrid.rows.1", MIXED),
    (lambda c: c["tables"]["dpr_dcsr"]["rows"][3].update(passage={"encyclopedia": "dcsr", "trivia": "dpr-trivia",
                                                                   "chat": "dpr-chat"}), "tables.dpr_dcsr.rows.3", MIXED),
    (lambda c: c["claims"][0].update(method={"question": "dpr", "passage": "dcsr"}), "claims.0.method", MIXED),
])
def test_a_question_encoder_of_one_method_on_the_other_methods_index_is_refused(cfg, mutate, key, message):
    """A DPR question vector searched against DCSR's sentence index (HasAns follows the passage
    model) is a pairing neither paper makes; the run mixed the two methods without a word."""
    mutate(cfg)
    with pytest.raises(InputError) as e:
        check_config(cfg)
    assert str(e.value) == f"config: {key}: {message}"


def _validate(cfg, repo):
    from snakemake.utils import validate

    validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))


@pytest.mark.parametrize(
    "mutate, key, problem",
    [
        (lambda c: c["corpora"].update(sub={"subset": {"of": "nope", "first": 5}}), "corpora.sub.subset.of", "nope"),
        (lambda c: c["corpora"].update(a={"subset": {"of": "b", "first": 5}}, b={"subset": {"of": "a", "fraction": 0.5}}),
         "corpora.a.subset.of", "circle"),
        (lambda c: c["datasets"].update(v={"corpus": "demo", "like": "nope"}), "datasets.v.like", "nope"),
        (lambda c: c["datasets"].update(v={"corpus": "demo", "like": "v"}), "datasets.v.like", "circle"),
        (lambda c: c["models"]["dpr"].update(train_on=["encyclopedia", "nq"]), "models.dpr.train_on.1", "nq"),
        (lambda c: (c["datasets"]["trivia"].update(match="regex"),
                    c["models"].update(multi={"method": "dcsr", "init": "minilm", "train_on": ["encyclopedia", "trivia"]})),
         "models.multi.train_on", "mixes answer matching"),
        (lambda c: (c["datasets"].update(v={"corpus": "demo", "like": "chat", "match": "regex"}),
                    c["models"].update(multi={"method": "dcsr", "init": "minilm", "train_on": ["encyclopedia", "v"]})),
         "models.multi.train_on", "v: regex"),
        (lambda c: (c["corpora"].update(half={"subset": {"of": "demo", "fraction": 0.5}}),
                    c["datasets"].update(v={"corpus": "half", "like": "chat"}),
                    c["models"].update(multi={"method": "dcsr", "init": "minilm", "train_on": ["encyclopedia", "v"]})),
         "models.multi.train_on", "sentence table of one corpus"),
        (lambda c: c["models"].update(multi={"method": "dpr", "init": "minilm", "train_on": ["encyclopedia", "trivia"],
                                             "train_fraction": 0.5}), "models.multi.train_fraction", "single"),
        (lambda c: c["models"]["dpr"].update(train_on=["encyclopedia", "trivia"]),
         "attribution.families.DPR.encyclopedia", "several datasets"),
        (lambda c: c["models"].update(multi={"method": "dpr", "init": "minilm", "train_on": ["encyclopedia", "trivia"],
                                             "dev_on": ["trivia", "chat"]}), "models.multi.dev_on.1",
         "'chat', which the model does not train on"),
        (lambda c: c["models"]["dpr"].update(dev_on="trivia"), "models.dpr.dev_on", "does not train on"),
        (lambda c: c["models"].update(plain={"method": "dpr", "init": "minilm", "dev_on": "trivia"}),
         "models.plain.dev_on", "train_on: none"),
        (lambda c: c["datasets"]["trivia"].update(bad_patterns="never_found"), "datasets.trivia.bad_patterns",
         "matched as string"),
        (lambda c: c["datasets"].update(v={"corpus": "demo", "like": "chat", "bad_patterns": "refuse"}),
         "datasets.v.bad_patterns", "matched as string"),
    ],
)
def test_variant_and_multi_errors_name_the_key(cfg, repo, mutate, key, problem):
    mutate(cfg)
    _validate(cfg, repo)  # the schema accepts them: the cross-check finds the fault
    with pytest.raises(InputError, match=f"config: {key.replace('.', '[.]')}: .*{problem}"):
        check_config(cfg)


def test_a_dpr_multi_mixes_answer_matching_as_dprs_multiset(cfg):
    """DPR's multiset trains on NQ, TriviaQA, WQ and CuratedTREC, whose answers are patterns: DPR's
    training reads no answers, so only DCSR (which labels sentences with them) needs one matching."""
    cfg["datasets"]["trivia"].update(match="regex")
    cfg["models"].update(multi={"method": "dpr", "init": "minilm", "train_on": ["encyclopedia", "trivia"]})
    check_config(cfg)


def test_variants_inherit_match_paper_name_and_questions(cfg, repo):
    from dcsr.pipeline.config import dataset_match, dataset_questions, variant_root, variant_settings

    cfg["datasets"]["trivia"].update(match="regex", paper_name="Trivia", bad_patterns="never_found")
    cfg["datasets"].update(v={"corpus": "demo", "like": "trivia", "questions": "dev"},
                           w={"corpus": "demo", "like": "v", "paper_name": "Own", "bad_patterns": "refuse"})
    _validate(cfg, repo)
    check_config(cfg)
    assert variant_root(cfg, "w") == "trivia"
    assert dataset_match(cfg, "w") == "regex" and dataset_questions(cfg, "w") == "dev"
    assert dataset_questions(cfg, "trivia") == "test"
    assert variant_settings(cfg) == {"v": {"match": "regex", "bad_patterns": "never_found", "paper_name": "Trivia"},
                                     "w": {"match": "regex", "bad_patterns": "refuse", "paper_name": "Own"}}
    # a variant that matches its answers as strings takes no bad_patterns from a regex dataset
    cfg["datasets"]["s"] = {"corpus": "demo", "like": "trivia", "match": "string"}
    check_config(cfg)
    assert variant_settings(cfg)["s"] == {"match": "string", "paper_name": "Trivia"}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda c: c["corpora"].update(s={"subset": {"of": "demo", "first": 5, "fraction": 0.5}}),
        lambda c: c["corpora"].update(s={"subset": {"of": "demo"}}),
        lambda c: c["corpora"].update(s={"subset": {"of": "demo", "first": 5, "seed": 1}}),
        lambda c: c["corpora"].update(s={"subset": {"of": "demo", "fraction": 1.5}}),
        lambda c: c["datasets"].update(v={"corpus": "demo", "questions": "dev", "generated": "chat"}),
        lambda c: c["datasets"].update(v={"corpus": "demo", "like": "chat", "generated": "chat"}),
        lambda c: c["models"]["dpr"].update(train_on=[]),
    ],
)
def test_schema_refuses_malformed_subsets_variants_and_lists(cfg, repo, mutate):
    from snakemake.exceptions import WorkflowError

    mutate(cfg)
    with pytest.raises(WorkflowError):
        _validate(cfg, repo)


def test_shards_follow_the_corpus_size_where_the_config_knows_it():
    from dcsr.pipeline.config import corpus_shards, corpus_size

    cfg = {
        "corpora": {
            "wiki": {"path": "psgs_w100.tsv.gz", "passages": 21015324},
            "sample": {"subset": {"of": "wiki", "fraction": 0.05, "seed": 1}},
            "first": {"subset": {"of": "wiki", "first": 100000}},
            "first-of-sample": {"subset": {"of": "sample", "first": 2000000}},
            "unknown": {"path": "other.tsv"},
            "unknown-sample": {"subset": {"of": "unknown", "fraction": 0.5}},
        },
        "embed": {"shards": 7, "passages_per_shard": 500000},
    }
    assert corpus_size(cfg, "sample") == 1050766  # 0.05 x 21,015,324 = 1,050,766.2
    assert corpus_size(cfg, "first-of-sample") == 1050766  # capped by its parent
    assert corpus_size(cfg, "unknown-sample") is None
    assert [corpus_shards(cfg, c) for c in cfg["corpora"]] == [43, 3, 1, 3, 7, 7]
    del cfg["embed"]["passages_per_shard"]
    assert corpus_shards(cfg, "wiki") == 7


@pytest.mark.parametrize("change, key, message", [
    ({"evaluate": {"ks": [1, 5, 20, 100]}, "search": {"k": 20}}, "search.k",
     "is 20, but the tables read top-100 (evaluate.ks)"),
    ({"evaluate": {"ks": [1, 5, 20, 100]}, "bm25": {"k": 50}}, "bm25.k", "is 50, but the tables read top-100"),
    ({"evaluate": {"ks": [1, 5]}, "search": {"k": 5}}, "search.k",
     "is 5, but the tables read hits to rank 10 (the pooled measures' cutoff; evaluate.ks goes to 5)"),
    ({"mining": {"depth": 10, "negatives": 30}}, "mining.negatives", "is 30, more than the 10 hits mined"),
    ({"bm25": {"depth": 2, "negatives": 3}}, "bm25.negatives", "is 3, more than the 2 hits mined"),
])
def test_a_depth_read_deeper_than_the_runs_hold_is_refused_naming_both_keys(cfg, change, key, message):
    """Top-100 of a run of 20 hits would repeat top-20 in the table, silently (it did)."""
    for section, values in change.items():
        cfg.setdefault(section, {}).update(values)
    with pytest.raises(InputError) as e:
        check_config(cfg)
    assert str(e.value).startswith(f"config: {key}: {message}"), str(e.value)
    assert ("evaluate.ks" if key.endswith(".k") else "depth") in str(e.value)


def test_the_runs_are_judged_and_pooled_to_the_pooled_measures_cutoff():
    from dcsr.evaluation.trec_eval import judged_depth

    assert judged_depth([1, 5]) == 10 and judged_depth([1, 5, 20, 100]) == 100


def test_dev_questions_that_are_test_questions_are_refused(tmp_path, caplog):
    """A user's own <dataset>.dev replaces the generated split: a setting chosen on it would be
    chosen on the test set if they overlap. The dataset's own split only warns."""
    from dcsr.data.variants import check_dev_disjoint

    test = tmp_path / "test.tsv"
    test.write_text("who wrote hamlet?\t['Shakespeare']\nwhat is two plus two?\t['4']\n")
    dev = tmp_path / "dev.tsv"
    dev.write_text("Who  wrote Hamlet?\t['Shakespeare']\nwhere is paris?\t['France']\n")
    with pytest.raises(InputError) as e:
        check_dev_disjoint(dev, test)
    assert str(e.value).startswith(f"{dev}: 1 of its 2 dev questions are test questions of {test}")
    assert check_dev_disjoint(dev, test, refuse=False) == 2 and "also test questions" in caplog.text
    dev.write_text("where is paris?\t['France']\n")
    assert check_dev_disjoint(dev, test) == 1


def test_only_the_generated_dev_split_is_the_datasets_own(repo):
    from dcsr.pipeline.config import dev_variants

    cfg = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    variants = dev_variants(cfg)
    assert variants and all(v["dev_of"] == name[:-len(".dev")] for name, v in variants.items())
