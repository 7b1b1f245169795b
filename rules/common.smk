# Config validation, the one definition of every path pattern, and the input functions
# that turn the config into file lists.
import functools
import json
import re
import shlex
import sys

from snakemake.utils import validate

sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from dcsr.attribution import fraction_of, percent_label, sweep_model_name  # noqa: E402
from dcsr.config import DEV_VARIANT, check_config, claim_pair, corpus_shards, dataset_questions, model_seeds, seed_replicas, sweep_models, temperature_dev_variants, train_datasets, variant_root, variant_settings  # noqa: E402
from dcsr.errors import InputError  # noqa: E402
from dcsr.settings import DCSR_TRAIN, LAUNCH, check_sections  # noqa: E402
from dcsr.resources import download_settings, resource_files, resource_of_file, resource_url  # noqa: E402
from dcsr.tables import table_cells  # noqa: E402


validate(config, schema="../config/schema.yaml")
try:
    # the settings sections and every model's train: (types, ranges, unknown keys), defaults filled
    check_sections(config)
    check_config(config)
    # the data-efficiency sweep's models (attribution.sweep) become ordinary trained models
    config["models"].update(sweep_models(config))
    # a model with seeds: n is trained n times (<model>.seed<k>, train.seed + k - 1)
    config["models"].update(seed_replicas(config))
    # dcsr.temperature: dev searches each dataset's dev questions too (<dataset>.dev variants)
    config["datasets"].update(temperature_dev_variants(config))
    # a variant (datasets.<name>.like) has its dataset's match and paper_name unless it sets them
    for _name, _inherited in variant_settings(config).items():
        config["datasets"][_name] = {**_inherited, **config["datasets"][_name]}
except InputError as e:
    raise WorkflowError(str(e))

R = config["results"]
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


# "bm25" names BM25's (question, passage) pair, never a dense model: the dense rules
# exclude it (both names are always followed by "/" in the path patterns below).
DENSE_MODEL = r"(?!bm25/)[A-Za-z0-9][A-Za-z0-9_.-]*"

# ------------------------------------------------------------------ path patterns
CORPUS_TSV = f"{R}/data/{{corpus}}/psgs_w100.tsv"
GENERATED_TRAIN = f"{R}/data/{{corpus}}/{{dataset}}-train.json"
GENERATED_DEV = f"{R}/data/{{corpus}}/{{dataset}}-dev.json"
GENERATED_TEST = f"{R}/data/{{corpus}}/{{dataset}}-test.qa.csv"
# a dataset's dev questions as a test set (variants with questions: dev; DCSR Table 8)
DEV_QUESTIONS = f"{R}/data/{{corpus}}/{{dataset}}-dev.qa.csv"
SENTENCES = f"{R}/sentences/{{corpus}}/sentences.tsv"
# a corpus's passages by id (dcsr.passage_store): what scoring a run and embedding a shard read
STORE_DIR = f"{R}/store/{{corpus}}"
STORE = {k: f"{STORE_DIR}/{v}" for k, v in (("passages", "passages.jsonl"), ("ids", "ids.npy"), ("offsets", "offsets.npy"))}
SENTENCE_STATS = f"{R}/sentences/{{corpus}}/stats.json"
BM25_INDEX = f"{R}/bm25/{{corpus}}/index"
MINED_TRAIN = f"{R}/bm25/negatives/{{dataset}}-train.json"
# a training set with the hard negatives a dense model (the miner, {model}) retrieves
DENSE_NEGATIVES = f"{R}/negatives/{{model}}/{{dataset}}-train.json"
SAMPLED_TRAIN = f"{R}/samples/{{dataset}}/train-{{percent}}pct.json"
# the concatenated training and dev sets of a model trained on a list of datasets (DCSR's Multi)
MERGED_TRAIN = f"{R}/train/{{model}}/train.json"
MERGED_DEV = f"{R}/train/{{model}}/dev.json"
MODEL_DIR = f"{R}/models/{{model}}"
CHECKPOINT_DIR = f"{R}/checkpoints/{{model}}"
QUERY_DIR = f"{R}/queries/{{qmodel}}"  # one job per question encoder: every test set it is searched with
QUERY_VECTORS = f"{QUERY_DIR}/{{dataset}}.npy"
SHARD_VECTORS = f"{R}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.npy"
SHARD_IDS = f"{R}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.ids.npy"
SHARD_SENTENCE_NUMBERS = f"{R}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.sents.npy"
SHARD_INDEX = f"{R}/index/{{corpus}}/{{pmodel}}/shard-{{shard}}.faiss"
# one search job per passage-encoder shard answers every question set searched against it
SHARD_HITS_DIR = f"{R}/hits/{{corpus}}/{{pmodel}}/shard-{{shard}}"
SHARD_HITS_IN_DIR = "{qmodel}/{dataset}.npz"
# BM25 is the (question, passage) "encoder pair" (bm25, bm25), so every retriever's run,
# metrics and table row share one path shape.
RUN = f"{R}/runs/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.trec"
TEMPERATURE = f"{R}/temperature/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.json"  # dcsr.temperature: dev
METRICS = f"{R}/metrics/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.json"
QUESTION_RESULTS = f"{R}/metrics/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.questions.jsonl"
TABLE_CSV = f"{R}/tables/{{table}}.csv"
TABLE_MD = f"{R}/tables/{{table}}.md"
# DCSR Table 1 (questions per gold passage of every dataset's training set) and Figure 4
# (in-batch dev accuracy after each epoch, per training dataset)
TABLE1_CSV = f"{R}/tables/table1_questions_per_passage.csv"
TABLE1_MD = f"{R}/tables/table1_questions_per_passage.md"
VALIDATION_PNG = f"{R}/figures/validation-{{dataset}}.png"
VALIDATION_CSV = f"{R}/figures/validation-{{dataset}}.csv"
# DCSR Appendix B: dev positives (and their titles) among the training positives, per dataset
APPENDIX_B = f"{R}/tables/dcsr_appendix_b"  # + .csv / .md
CLAIMS = f"{R}/claims"  # + .csv / .md: the claims ledger
# Encoder attribution (second paper): every pair's metrics in one file, then its tables and figures
PAIR_MATRIX = f"{R}/attribution/pair_matrix.csv"
ATTRIBUTION_TABLE2 = f"{R}/tables/attribution_table2"  # + .csv / .md
MARGINALS = f"{R}/tables/attribution_marginals-{{family}}"  # + .csv / .md
MARGINALS_PNG = f"{R}/figures/attribution_marginals-{{family}}.png"
PAIR_HEATMAP = f"{R}/figures/pair_matrix-{{family}}"  # + .png / .csv
SWEEP_FIGURE = f"{R}/figures/data_efficiency"  # + .png / .csv
ATTRIBUTION_TABLE4 = f"{R}/tables/attribution_table4"  # + .csv / .md
FAMILY_COMPARISON = f"{R}/tables/attribution_compare"  # + .csv / .md
ATTRIBUTION_TABLE3 = f"{R}/tables/attribution_table3"  # + .csv / .md
COVERAGE_FIGURE = f"{R}/figures/coverage"  # + .png / .csv
# DPR's files as published (rules/download.smk), outside results/: shared by every config that
# names the same downloads.dir
DOWNLOADS = download_settings(config.get("downloads", {}))
DOWNLOADED = f"{DOWNLOADS['dir']}/{{file}}"


def log_path(rule_name, name):
    return f"{R}/logs/{rule_name}/{name}.log"


def bench_path(rule_name, name):
    return f"{R}/benchmarks/{rule_name}/{name}.tsv"


# ------------------------------------------------------------------ config lookups
def dataset_cfg(dataset):
    return config["datasets"][dataset]


def corpus_of(dataset):
    return dataset_cfg(dataset)["corpus"]


def corpus_tsv(corpus):
    c = config["corpora"][corpus]
    return c["path"] if "path" in c else CORPUS_TSV.format(corpus=corpus)


def generated_datasets(corpus):
    return [d for d, ds in config["datasets"].items() if ds["corpus"] == corpus and "generated" in ds]


def subset_corpora():
    return [c for c, cc in config["corpora"].items() if "subset" in cc]


def subset_args(corpus):
    sub = config["corpora"][corpus]["subset"]
    if "first" in sub:
        return f"--first {int(sub['first'])}"
    return f"--fraction {float(sub['fraction'])!r} --seed {int(sub.get('seed', config['seed']))}"


def source_datasets():
    """The datasets with question files of their own: variants (``like``) are left out of the
    statistics of training sets, which would otherwise count the same questions twice."""
    return [d for d, ds in config["datasets"].items() if "like" not in ds]


def dev_question_datasets():
    """The datasets whose dev questions some variant searches as its test set."""
    return sorted({variant_root(config, d) for d in config["datasets"] if dataset_questions(config, d) == "dev"})


def dataset_file(dataset, split):
    """The DPR file of a dataset split: train/dev biencoder JSON or the test qas TSV. A variant
    (``like``) has the files of its dataset, its test set that dataset's dev questions with
    ``questions: dev``."""
    ds = dataset_cfg(dataset)
    if "like" in ds:
        root = variant_root(config, dataset)
        if split == "test" and dataset_questions(config, dataset) == "dev":
            return DEV_QUESTIONS.format(corpus=corpus_of(root), dataset=root)
        return dataset_file(root, split)
    if "files" in ds:
        return ds["files"][split]
    pattern = {"train": GENERATED_TRAIN, "dev": GENERATED_DEV, "test": GENERATED_TEST}[split]
    return pattern.format(corpus=ds["corpus"], dataset=dataset)


def training_file(dataset):
    """Training set as the trainer reads it: with BM25 hard negatives mined, if configured."""
    if config["bm25"]["mine_negatives"]:
        return MINED_TRAIN.format(dataset=dataset)
    return dataset_file(dataset, "train")


def trained_models():
    return [m for m, mc in config["models"].items() if "train_on" in mc]


def trains_on_several(model):
    return len(train_datasets(config["models"][model])) > 1


def training_label(model):
    """What a model is trained on, in file names: the dataset, or the datasets joined by '+'."""
    return "+".join(train_datasets(config["models"][model]))


def train_fraction(model):
    return config["models"][model].get("train_fraction", 1.0)


def model_training_file(model):
    """What a model trains on: its dataset's training set, a nested sample of it, or the
    concatenation of several datasets' training sets."""
    if trains_on_several(model):
        return MERGED_TRAIN.format(model=model)
    ds = train_datasets(config["models"][model])[0]
    if train_fraction(model) < 1.0:
        return SAMPLED_TRAIN.format(dataset=ds, percent=percent_label(train_fraction(model)))
    if "negatives_from" in config["models"][model]:  # a second round: a checkpoint's own hard negatives
        return DENSE_NEGATIVES.format(model=config["models"][model]["negatives_from"], dataset=ds)
    return training_file(ds)


def models_trained_on(label):
    """The models trained on all of ``label`` (a dataset, or datasets joined by '+': see
    ``training_label``); the sweep's fractions are left out."""
    return [m for m in trained_models() if training_label(m) == label and train_fraction(m) == 1.0]


def squad_corpora():
    return [c for c, cc in config["corpora"].items() if "squad" in cc]


def squad_article_datasets():
    """SQuAD datasets of a group of articles (squad: {articles: START:STOP})."""
    return [d for d, ds in config["datasets"].items() if isinstance(ds.get("squad"), dict)]


def squad_args(corpus):
    """prepare_squad.py's options from a corpus's `squad` block (unset ones: the script's defaults)."""
    sq = config["corpora"][corpus]["squad"]
    source = sq["source"]
    # a relative path is taken from the working directory, else from the repository (the
    # vendored resources/squad/ file, when Snakemake runs with --directory elsewhere)
    if "://" not in source and not Path(source).is_absolute() and not Path(source).exists():
        if (Path(workflow.basedir) / source).exists():
            source = str(Path(workflow.basedir) / source)
    args = ["--source", source, "--seed", config["seed"]]
    if sq.get("sha256"):
        args += ["--sha256", sq["sha256"]]
    if "passage_words" in sq:
        args += ["--passage-words", sq["passage_words"]]
    for split, size in sq.get("split", {}).items():
        args += [f"--{split}", size]
    return " ".join(shlex.quote(str(a)) for a in args)


def untrained_models():
    return [m for m, mc in config["models"].items() if "train_on" not in mc]


def one_of(names):
    """A wildcard regex matching exactly one of ``names`` (never matches when empty)."""
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def model_method(model):
    """dpr (one vector per passage) or dcsr (one vector per sentence)."""
    return config["models"][model]["method"]


def is_dcsr(model):
    return model in config["models"] and model_method(model) == "dcsr"


# DCSR's settings (config section `dcsr`) that the trainer and the embedder read from a model
def train_settings(model):
    """The settings a model's training gets: the top-level train:, a DCSR model's dcsr: sample
    building, the model's own train:, without the launch keys (dcsr.settings)."""
    settings = dict(config["train"])
    if is_dcsr(model):
        settings.update({k: v for k, v in config["dcsr"].items() if k in DCSR_TRAIN})
        if "train_on" in config["models"][model]:
            # a list of datasets shares one match type (dcsr.config checks it)
            settings["match_type"] = match_type(train_datasets(config["models"][model])[0])
    settings.update(config["models"][model].get("train", {}))
    for launch_key in LAUNCH:
        settings.pop(launch_key, None)
    return settings


def _launch(model, key):
    return int({**config["train"], **config["models"][model].get("train", {})}.get(key, LAUNCH[key].default))


def model_gpus(model):
    """GPUs per node of a model's training job."""
    return _launch(model, "gpus")


def model_nodes(model):
    nodes = _launch(model, "nodes")
    if nodes > 1 and model_gpus(model) < 1:
        raise ValueError(f"train.nodes of model {model}: training over {nodes} nodes needs train.gpus >= 1 (GPUs per node)")
    return nodes


def threads_for(rule_name, default):
    """A rule's threads: ``resources.<rule>.threads`` of the config, else ``default``."""
    return int(resources_for(rule_name, "threads", default))


def train_threads(model):
    """CPU cores of a training job: on GPUs ``cpus_per_gpu`` per GPU (data loading), at least
    2; on a CPU ``resources.train_biencoder.threads`` (default 2)."""
    if model_gpus(model) > 0:
        return max(2, model_gpus(model) * _launch(model, "cpus_per_gpu"))
    return threads_for("train_biencoder", 2)


def train_launcher(model):
    """How the training script is started: one process; ``torchrun --standalone`` over the
    GPUs of one node; or, with ``train.nodes`` > 1 under Slurm, one torchrun per node started
    by ``srun``, meeting at a c10d rendezvous on the job's first node."""
    gpus, nodes = model_gpus(model), model_nodes(model)
    if nodes > 1:
        return (
            f"srun --nodes {nodes} --ntasks-per-node 1 --kill-on-bad-exit=1 torchrun"
            f" --nnodes {nodes} --nproc_per_node {max(gpus, 1)}"
            " --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d"
            " --rdzv_endpoint $(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1):29500"
        )
    if gpus > 1:
        return f"torchrun --standalone --nproc_per_node {gpus}"
    return "python"


def train_gpu_resources(model):
    """Slurm GPU request: ``gpu`` (the plugin's ``--gpus``, per job) on one node; per node
    (``gres``, ``--gres=gpu:N``) when the job spans nodes."""
    gpus, nodes = model_gpus(model), model_nodes(model)
    if nodes > 1:
        return {"gpu": 0, "gres": f"gpu:{gpus}" if gpus else "", "nodes": nodes}
    return {"gpu": gpus, "gres": "", "nodes": 1}


def resources_for(rule_name, key, default=None):
    res = {**config.get("resources", {}).get("default", {}), **config.get("resources", {}).get(rule_name, {})}
    return res.get(key, default)


def shards(corpus):
    """Shard numbers of a corpus's embeddings, indexes and searches."""
    return range(corpus_shards(config, corpus))


def match_type(dataset):
    return dataset_cfg(dataset).get("match", "string")


# ------------------------------------------------------------------ targets
def table_runs(table):
    """(corpus, qmodel, pmodel, dataset) of every cell of a table."""
    return [(corpus_of(c.dataset), c.qmodel, c.pmodel, c.dataset) for c in table_cells(config["tables"][table])]


def table_metrics(table):
    return [METRICS.format(corpus=c, qmodel=q, pmodel=p, dataset=d) for c, q, p, d in table_runs(table)]


def final_outputs():
    out = []
    for table in config["tables"]:
        out += [TABLE_CSV.format(table=table), TABLE_MD.format(table=table)]
    for model in trained_models():
        out.append(MODEL_DIR.format(model=model))
    # the sentence table of every corpus (DCSR's index keys), with its statistics
    out += [SENTENCE_STATS.format(corpus=c) for c in config["corpora"]]
    out += [TABLE1_CSV, TABLE1_MD, f"{APPENDIX_B}.csv", f"{APPENDIX_B}.md"]
    for label in sorted({training_label(m) for m in trained_models()}):
        out += [VALIDATION_PNG.format(dataset=label), VALIDATION_CSV.format(dataset=label)]
    out += attribution_outputs()
    if config.get("claims"):
        out += [f"{CLAIMS}.csv", f"{CLAIMS}.md"]
    return out


def claim_seed_runs(claim, side):
    """(corpus, q, p, test set) of one side of a claim for each training seed: seed k pairs the
    k-th run of each model that has several (a model with one run stays itself)."""
    q, p = claim_pair(claim[side])
    if q == "bm25":
        return [(corpus_of(claim["test_set"]), q, p, claim["test_set"])]
    qs, ps = model_seeds(config, q), model_seeds(config, p)
    n = max(len(qs), len(ps))
    return [(corpus_of(claim["test_set"]), qs[k] if len(qs) > 1 else q, ps[k] if len(ps) > 1 else p, claim["test_set"])
            for k in range(n)]


def claims_spec():
    """The claims of the config with the per-question results of both sides' runs. A dense
    pair that no table or attribution pair runs is an error at DAG build."""
    out = []
    for i, claim in enumerate(config.get("claims", [])):
        item = dict(claim)
        for side in ("baseline", "method"):
            q, p = claim_pair(claim[side])
            run = (corpus_of(claim["test_set"]), q, p, claim["test_set"])
            if q != "bm25" and run not in dense_runs():
                raise WorkflowError(f"config: claims.{i}.{side}: the run {q} x {p} on {claim['test_set']} is in no "
                                    "table and no attribution pair: add it to a table's rows")
            item[side] = q if q == p else f"{q} x {p}"
            item[f"{side}_runs"] = [QUESTION_RESULTS.format(corpus=c, qmodel=sq, pmodel=sp, dataset=d)
                                    for c, sq, sp, d in claim_seed_runs(claim, side)]
        out.append(item)
    return out


# ------------------------------------------------------------------ encoder attribution
def attribution():
    return config.get("attribution", {})


def sweep_series():
    """``{dataset: [(fraction, model), ...]}`` of the sweep, 1.0 = the family's own model."""
    a = attribution()
    if not a.get("sweep"):
        return {}
    family = a["families"][a["sweep"]["family"]]
    out = {}
    for ds in a["sweep"]["datasets"]:
        series = {f: sweep_model_name(family[ds], f) for f in a["sweep"]["fractions"] if f != 1.0}
        series[1.0] = family[ds]
        out[ds] = sorted(series.items())
    return out


def attribution_cells():
    """(question model, passage model, test set) of every pair the analysis reads: each family's
    K x K pairs on every test set, BM25, and the sweep's encoders against the 100% ones (its
    dataset's test set both ways, and its passage encoders with every in-domain question encoder)."""
    a = attribution()
    tests = a["test_sets"]
    cells = []
    for family in a["families"].values():
        cells += [(q, p, t) for q in family.values() for p in family.values() for t in tests]
    if a.get("bm25", True):
        cells += [("bm25", "bm25", t) for t in tests]
    if a.get("sweep"):
        family = a["families"][a["sweep"]["family"]]
        for ds, series in sweep_series().items():
            for _f, m in series:
                cells += [(m, p, ds) for p in family.values()] + [(q, m, ds) for q in family.values()]
                cells += [(family[t], m, t) for t in tests if t in family]
    return list(dict.fromkeys(cells))


def attribution_spec():
    a = attribution()
    spec = {
        "test_sets": a["test_sets"],
        "metrics": a.get("metrics", ["top20", "top100"]),
        "families": a["families"],
        "paper_names": {d: ds.get("paper_name") for d, ds in config["datasets"].items()},
        "bm25": a.get("bm25", True),
    }
    if a.get("sweep"):
        spec["sweep_family"] = a["sweep"]["family"]
        spec["sweeps"] = [{"dataset": d, "models": s} for d, s in sweep_series().items()]
    if a.get("compare"):
        spec["compare"] = [a["compare"]["baseline"], a["compare"]["method"]]
    return spec


def attribution_spec_arg(wc):
    return shlex.quote(json.dumps(attribution_spec()))


ATTRIBUTION_REPORT = f"{SCRIPTS}/attribution_report.py"
PAPER_NUMBERS = str(Path(workflow.basedir) / "config" / "paper_numbers.yaml")


def attribution_stats_entries():
    """(dataset, fraction, training file) for Table 3 and Figure 4."""
    a = attribution()
    datasets = [d for d in dict.fromkeys(d for fam in a["families"].values() for d in fam) if d in source_datasets()]
    entries = [(d, 1.0, training_file(d)) for d in datasets]
    for ds, series in sweep_series().items():
        entries += [(ds, f, model_training_file(m)) for f, m in series if f != 1.0 and ds in datasets]
    return entries


def attribution_outputs():
    a = attribution()
    if not a:
        return []
    out = [PAIR_MATRIX, f"{ATTRIBUTION_TABLE2}.csv", f"{ATTRIBUTION_TABLE2}.md",
           f"{ATTRIBUTION_TABLE3}.csv", f"{ATTRIBUTION_TABLE3}.md", f"{COVERAGE_FIGURE}.png", f"{COVERAGE_FIGURE}.csv"]
    for family in a["families"]:
        out += [f"{MARGINALS.format(family=family)}.{e}" for e in ("csv", "md")]
        out += [MARGINALS_PNG.format(family=family)]
        out += [f"{PAIR_HEATMAP.format(family=family)}.{e}" for e in ("png", "csv")]
    if a.get("sweep"):
        out += [f"{SWEEP_FIGURE}.png", f"{SWEEP_FIGURE}.csv", f"{ATTRIBUTION_TABLE4}.csv", f"{ATTRIBUTION_TABLE4}.md"]
    if a.get("compare"):
        out += [f"{FAMILY_COMPARISON}.csv", f"{FAMILY_COMPARISON}.md"]
    return out


# ------------------------------------------------------------------ rule inputs
def train_inputs(wc):
    ds = train_datasets(config["models"][wc.model])[0]
    dev = MERGED_DEV.format(model=wc.model) if trains_on_several(wc.model) else dataset_file(ds, "dev")
    inputs = {"train": model_training_file(wc.model), "dev": dev}
    if is_dcsr(wc.model):  # DCSR's sentence spans of the passages it trains on (one corpus: dcsr.config checks it)
        inputs["sentences"] = SENTENCES.format(corpus=corpus_of(ds))
    return inputs


def embed_shard_inputs(wc):
    # the corpus's passage store: the job reads its shard's rows only
    inputs = {"model": MODEL_DIR.format(model=wc.pmodel), **store_inputs(wc)}
    if is_dcsr(wc.pmodel):  # one vector per sentence of the sentence table
        inputs["sentences"] = SENTENCES.format(corpus=wc.corpus)
    return inputs


@functools.cache
def dense_runs():
    """(corpus, qmodel, pmodel, dataset) of every dense run the config asks for: the tables'
    cells and the attribution pairs. Computed once: every search and merge job asks, and the
    config is fixed once this file has run."""
    runs = [run for table in config["tables"] for run in table_runs(table)]
    if attribution():
        runs += [(corpus_of(t), q, p, t) for q, p, t in attribution_cells()]
    # the other training runs of claims' models with seeds: n
    runs += [run for c in config.get("claims", []) for side in ("baseline", "method")
             for run in claim_seed_runs(c, side)[1:]]
    # dcsr.temperature: dev: each DCSR run's pair also searches its dataset's dev questions
    runs += [(c, q, p, d + DEV_VARIANT) for c, q, p, d in runs if temperature_on_dev(p, d)]
    return tuple(sorted({run for run in runs if run[1] != "bm25"}))


def temperature_on_dev(pmodel, dataset):
    """Whether the run of DCSR passage encoder ``pmodel`` on ``dataset`` takes its HasAns
    temperature from ``dataset``'s dev questions (dcsr.temperature: dev)."""
    return is_dcsr(pmodel) and dataset + DEV_VARIANT in config["datasets"]


def hasans_args(wc, input):
    """merge_runs' HasAns flags: none for DPR; a DCSR run takes its temperature from the config,
    the dev choice (dcsr.temperature: dev), or 1 for the dev runs that the choice is made on."""
    if not is_dcsr(wc.pmodel):
        return ""
    if "temperature" in input.keys():
        return f"--hasans --temperature-file {input.temperature}"
    t = config["dcsr"]["temperature"]
    return f"--hasans --temperature {1.0 if t == 'dev' else t}"


def temperature_inputs(wc):
    if (wc.corpus, wc.qmodel, wc.pmodel, wc.dataset + DEV_VARIANT) not in dense_runs():
        raise WorkflowError(f"no dev run to choose the temperature of {wc.qmodel} x {wc.pmodel} on {wc.dataset}")
    return run_inputs(wc, wc.dataset + DEV_VARIANT)


def temperature_hit_files(wc, input):
    return hit_files(wc, input, wc.dataset + DEV_VARIANT)


def searches_of(corpus, pmodel):
    """(qmodel, dataset) of every question set searched against ``pmodel``'s index of ``corpus``."""
    return [(q, d) for c, q, p, d in dense_runs() if c == corpus and p == pmodel]


def question_sets_of(qmodel):
    """Test sets whose questions ``qmodel`` encodes (for any passage encoder and corpus)."""
    return sorted({d for c, q, p, d in dense_runs() if q == qmodel})


def embed_questions_inputs(wc):
    datasets = question_sets_of(wc.qmodel)
    if not datasets:
        raise WorkflowError(f"no table or attribution pair searches with the question encoder {wc.qmodel!r}")
    return {"model": MODEL_DIR.format(model=wc.qmodel), "questions": [dataset_file(d, "test") for d in datasets]}


def embed_questions_args(wc, output):
    return " ".join(
        f"--set {shlex.quote(dataset_file(d, 'test'))} {shlex.quote(str(Path(output[0]) / f'{d}.npy'))}"
        for d in question_sets_of(wc.qmodel)
    )


def search_shard_inputs(wc):
    inputs = {
        "index": SHARD_INDEX.format(**wc),
        "ids": SHARD_IDS.format(**wc),
        "queries": sorted({QUERY_DIR.format(qmodel=q) for q, d in searches_of(wc.corpus, wc.pmodel)}),
    }
    if not inputs["queries"]:
        raise WorkflowError(f"no table or attribution pair searches {wc.pmodel!r} on corpus {wc.corpus!r}")
    if is_dcsr(wc.pmodel) and config["dcsr"]["sentences_per_passage"] is None:
        inputs["stats"] = SENTENCE_STATS.format(corpus=wc.corpus)  # k = mean sentences per passage
    return inputs


def search_args(wc, output):
    return " ".join(
        f"--search {shlex.quote(QUERY_VECTORS.format(qmodel=q, dataset=d))}"
        f" {shlex.quote(str(Path(output[0]) / SHARD_HITS_IN_DIR.format(qmodel=q, dataset=d)))}"
        for q, d in searches_of(wc.corpus, wc.pmodel)
    )


def merge_inputs(wc):
    if (wc.corpus, wc.qmodel, wc.pmodel, wc.dataset) not in dense_runs():
        raise WorkflowError(
            f"the run {wc.qmodel} x {wc.pmodel} on {wc.dataset} ({wc.corpus}) is in no table and no attribution "
            "pair of the config: add it to a table's rows (config key tables) to have it searched"
        )
    inputs = run_inputs(wc, wc.dataset)
    if temperature_on_dev(wc.pmodel, wc.dataset):
        inputs["temperature"] = TEMPERATURE.format(**wc)
    return inputs


def run_inputs(wc, dataset):
    """What a merge of ``wc.pmodel``'s shard hits for ``dataset``'s questions reads: every shard's
    hits, the questions, and the passage store to score them."""
    return {
        "hits": [SHARD_HITS_DIR.format(corpus=wc.corpus, pmodel=wc.pmodel, shard=i) for i in shards(wc.corpus)],
        "questions": dataset_file(dataset, "test"),
        **store_inputs(wc),
    }


def store_inputs(wc):
    """The corpus's passage store: a run's passages are read from it to score the run, and an
    embedding shard's rows to embed them."""
    return {f"store_{k}": v.format(corpus=wc.corpus) for k, v in STORE.items()}


def merge_hit_files(wc, input):
    return hit_files(wc, input, wc.dataset)


def hit_files(wc, input, dataset):
    """The per-shard hit files of question encoder ``wc.qmodel`` on ``dataset``'s questions."""
    return " ".join(shlex.quote(str(Path(d) / SHARD_HITS_IN_DIR.format(qmodel=wc.qmodel, dataset=dataset)))
                    for d in input.hits)


def negatives_miners():
    """The models whose hard negatives some model trains on (models.<m>.negatives_from)."""
    return sorted({mc["negatives_from"] for mc in config["models"].values() if "negatives_from" in mc})


def mine_dense_inputs(wc):
    """The miner and its own shard indexes of the dataset's corpus (built for mining alone when no
    table or attribution pair searches them), and the dataset's training set."""
    corpus = corpus_of(wc.dataset)
    inputs = {
        "model": MODEL_DIR.format(model=wc.model),
        "train": dataset_file(wc.dataset, "train"),
        "corpus": corpus_tsv(corpus),
    }
    for key, pattern in (("indexes", SHARD_INDEX), ("ids", SHARD_IDS), ("sentence_numbers", SHARD_SENTENCE_NUMBERS)):
        inputs[key] = [pattern.format(corpus=corpus, pmodel=wc.model, shard=i) for i in shards(corpus)]
    return inputs


def mine_shard_args(wc, input):
    return " ".join(
        f"--shard {shlex.quote(i)} {shlex.quote(d)} {shlex.quote(n)}"
        for i, d, n in zip(input.indexes, input.ids, input.sentence_numbers)
    )


def sentence_depth_args(wc, input):
    """DCSR: search the top 100 x k sentences (k from the config, else the corpus mean)."""
    if not is_dcsr(wc.pmodel):
        return ""
    k = config["dcsr"]["sentences_per_passage"]
    return f"--sentences-per-passage {k}" if k is not None else f"--sentence-stats {input.stats}"
