"""What a validated config says, looked up: the config completed (:func:`expand_config`: defaults,
the sweep's models, seed replicas, dev variants), its datasets, corpora and files, what each
model trains on and with which settings, and each job's launcher, threads and resources. The
base of :class:`dcsr.pipeline.plan.Plan` (through :class:`dcsr.pipeline.targets.Targets`)."""

from __future__ import annotations

import re
from pathlib import Path

from dcsr.attribution.analysis import percent_label
from dcsr.errors import InputError
from dcsr.models.checkpoints import is_builtin_tiny
from dcsr.pipeline.config import (beir_datasets, check_config, corpus_shards, dataset_questions, dev_variants, json_arg,
                                  model_init, seed_replicas, sweep_models, train_datasets, variant_root,
                                  variant_settings)
from dcsr.pipeline.checks import (beir_folder, check_claim_seeds, check_dev_sets_not_tested, check_local_sources,
                                  check_marker_lengths, check_positive_match, check_splitter, check_text)
from dcsr.pipeline.code_version import code_version
from dcsr.pipeline.gpus import job_gpus
from dcsr.pipeline.paths import bench_path, log_path, patterns
from dcsr.pipeline.resources import download_settings, resource_files, resource_of_file, resource_url
from dcsr.settings import DCSR_INTERNAL, DCSR_TRAIN, LAUNCH, TRAIN, check_sections, filled, run_only_keys

#: The training settings that make an untrained model (``dcsr.training.loop.export_untrained``:
#: its encoders, their similarity and what they are fed; a DCSR model's sentences, which its
#: readers take from ``dcsr.json``): the only ones its export job records, so that a new learning
#: rate, step count or negative count re-exports, and so re-embeds, no untrained baseline.
UNTRAINED_KEYS = ("pooling", "dropout", "attention_dropout", "normalize", "scale", "token_types",
                  "question_max_length", "passage_max_length", "question_text", "max_sentences", "splitter")


def expand_config(config: dict) -> dict:
    """Check ``config`` (already validated against config/schema.yaml) and complete it in place:
    the settings sections' defaults, the sweep's models, the seed replicas of models with
    ``seeds: n``, the ``<dataset>.dev`` variants of ``dcsr.temperature: dev``, and each variant's
    inherited settings. An :class:`InputError` names the config key."""
    # every text on one line, before anything quotes it (Markdown rows, the report's RST)
    check_text(config)
    # the settings sections and every model's train: (types, ranges, unknown keys), defaults filled
    check_sections(config)
    check_config(config)
    check_claim_seeds(config)
    # the data-efficiency sweep's models (attribution.sweep) become ordinary trained models
    config["models"].update(sweep_models(config))
    # a model with seeds: n is trained n times (<model>.seed<k>, train.seed + k - 1)
    config["models"].update(seed_replicas(config))
    # what is chosen on dev questions (DCSR's temperature, a hybrid's weight) searches each dataset's
    # dev questions too (<dataset>.dev variants)
    config["datasets"].update(dev_variants(config))
    # a variant (datasets.<name>.like) has its dataset's match and paper_name unless it sets them
    for name, inherited in variant_settings(config).items():
        config["datasets"][name] = {**inherited, **config["datasets"][name]}
    return config


class ConfigView:
    """One config, completed by :func:`expand_config` and checked, and the lookups into it.

    ``basedir`` is the repository (Snakemake's ``workflow.basedir``): a relative SQuAD source
    that is not in the working directory is looked up there."""

    def __init__(self, config: dict, basedir: str | Path = "."):
        self.config = expand_config(config)
        self.basedir = Path(basedir)
        check_local_sources(self.config, self.basedir)
        check_splitter(self.config)
        check_dev_sets_not_tested(self.config, self.is_dcsr)
        for model in self.config["models"]:
            if self.is_dcsr(model):
                check_marker_lengths(model, self.train_settings(model))
                check_positive_match(model, self.train_settings(model))
        self.results = config["results"]
        self.downloads = download_settings(config.get("downloads", {}))
        self.paths = patterns(self.results, self.downloads["dir"])

    def code_version(self, script: str) -> str:
        """The digest of ``workflow/scripts/<script>`` and the dcsr modules it imports, and the
        versions of the packages that change its numbers (the ``pkg:`` models' among them): a
        rule's ``code`` param, so a change to any reruns its jobs (dcsr.pipeline.code_version)."""
        from dcsr.pipeline.code_version import pkg_modules

        return code_version(str(self.basedir / "workflow" / "scripts" / script), str(self.basedir / "src"),
                            pkg_modules(self.config))

    def log(self, rule_name: str, name: str) -> str:
        return log_path(self.results, rule_name, name)

    def bench(self, rule_name: str, name: str) -> str:
        return bench_path(self.results, rule_name, name)

    # ------------------------------------------------------------------ DPR's files as published
    def download_files(self) -> list[str]:
        """DPR's files that a config with ``downloads:`` may fetch (rules/download.smk)."""
        return resource_files() if "downloads" in self.config else []

    def download_url(self, wc) -> str:
        """The URL of ``wc.file`` under the config's download settings."""
        return resource_url(resource_of_file(wc.file), self.downloads)

    # ------------------------------------------------------------------ config lookups
    def dataset_cfg(self, dataset):
        return self.config["datasets"][dataset]

    def corpus_of(self, dataset):
        return self.dataset_cfg(dataset)["corpus"]

    def corpus_tsv(self, corpus):
        c = self.config["corpora"][corpus]
        return c["path"] if "path" in c else self.paths.CORPUS_TSV.format(corpus=corpus)

    def generated_datasets(self, corpus):
        return [d for d, ds in self.config["datasets"].items() if ds["corpus"] == corpus and "generated" in ds]

    def subset_corpora(self):
        return [c for c, cc in self.config["corpora"].items() if "subset" in cc]

    def subset_args(self, corpus) -> list[str]:
        sub = self.config["corpora"][corpus]["subset"]
        if "first" in sub:
            return ["--first", str(int(sub["first"]))]
        return ["--fraction", repr(float(sub["fraction"])), "--seed", str(int(sub.get("seed", self.config["seed"])))]

    def source_datasets(self):
        """The datasets with question files of their own: variants (``like``) are left out of the
        statistics of training sets, which would otherwise count the same questions twice, and so
        are BEIR test sets, which have no training or dev questions."""
        return [d for d, ds in self.config["datasets"].items() if "like" not in ds and "beir" not in ds]

    # ------------------------------------------------------------------ BEIR folders (dcsr.data.beir)
    def beir_corpora(self):
        return [c for c, cc in self.config["corpora"].items() if "beir" in cc]

    def beir_datasets(self):
        """The BEIR test sets (judged by qrels, not answers)."""
        return beir_datasets(self.config)

    def is_beir(self, dataset) -> bool:
        return "beir" in self.config["datasets"].get(dataset, {})

    def beir_folder(self, corpus) -> str:
        return str(beir_folder(self.config, corpus, self.basedir))

    def beir_files(self, dataset) -> dict:
        """A BEIR test set's converted files: its question file (``queries``), their ``query_ids``,
        its ``qrels`` (original ids) and its corpus's ``doc_ids``."""
        corpus = self.corpus_of(dataset)
        return {"queries": self.paths.BEIR_QUERIES.format(corpus=corpus, dataset=dataset),
                "query_ids": self.paths.BEIR_QUERY_IDS.format(corpus=corpus, dataset=dataset),
                "qrels": self.paths.BEIR_QRELS.format(corpus=corpus, dataset=dataset),
                "doc_ids": self.paths.BEIR_DOC_IDS.format(corpus=corpus)}

    def dev_question_datasets(self):
        """The datasets whose dev questions some variant searches as its test set."""
        return sorted({variant_root(self.config, d) for d in self.config["datasets"] if dataset_questions(self.config, d) == "dev"})

    def dataset_file(self, dataset, split):
        """The DPR file of a dataset split: train/dev biencoder JSON or the test qas TSV. A variant
        (``like``) has the files of its dataset, its test set that dataset's dev questions with
        ``questions: dev``."""
        ds = self.dataset_cfg(dataset)
        if "beir" in ds:
            if split != "test":  # config checks refuse training on one (dcsr.pipeline.checks)
                raise InputError(f"config: datasets.{dataset}", f"is a BEIR test set, which has no {split} set")
            return self.beir_files(dataset)["queries"]
        if "like" in ds:
            root = variant_root(self.config, dataset)
            if split == "test" and dataset_questions(self.config, dataset) == "dev":
                return self.paths.DEV_QUESTIONS.format(corpus=self.corpus_of(root), dataset=root)
            return self.dataset_file(root, split)
        if "files" in ds:
            return ds["files"][split]
        pattern = {"train": self.paths.GENERATED_TRAIN, "dev": self.paths.GENERATED_DEV, "test": self.paths.GENERATED_TEST}[split]
        return pattern.format(corpus=ds["corpus"], dataset=dataset)

    def training_file(self, dataset):
        """Training set as the trainer reads it: with BM25 hard negatives mined, if configured."""
        if self.config["bm25"]["mine_negatives"]:
            return self.paths.MINED_TRAIN.format(dataset=dataset)
        return self.dataset_file(dataset, "train")

    def trained_models(self):
        return [m for m, mc in self.config["models"].items() if "train_on" in mc]

    def trains_on_several(self, model):
        return len(train_datasets(self.config["models"][model])) > 1

    def training_label(self, model):
        """What a model is trained on, in file names: the dataset, or the datasets joined by '+'."""
        return "+".join(train_datasets(self.config["models"][model]))

    def train_fraction(self, model):
        return self.config["models"][model].get("train_fraction", 1.0)

    def model_training_file(self, model):
        """What a model trains on: its dataset's training set, a nested sample of it, or the
        concatenation of several datasets' training sets."""
        if self.trains_on_several(model):
            return self.paths.MERGED_TRAIN.format(model=model)
        ds = train_datasets(self.config["models"][model])[0]
        if self.train_fraction(model) < 1.0:
            return self.paths.SAMPLED_TRAIN.format(dataset=ds, percent=percent_label(self.train_fraction(model)))
        if "negatives_from" in self.config["models"][model]:  # a second round: a checkpoint's own hard negatives
            return self.paths.DENSE_NEGATIVES.format(model=self.config["models"][model]["negatives_from"], dataset=ds)
        return self.training_file(ds)

    def models_trained_on(self, label):
        """The models trained on all of ``label`` (a dataset, or datasets joined by '+': see
        ``training_label``); the sweep's fractions are left out."""
        return [m for m in self.trained_models() if self.training_label(m) == label and self.train_fraction(m) == 1.0]

    def squad_corpora(self):
        return [c for c, cc in self.config["corpora"].items() if "squad" in cc]

    def squad_article_datasets(self):
        """SQuAD datasets of a group of articles (squad: {articles: START:STOP})."""
        return [d for d, ds in self.config["datasets"].items() if isinstance(ds.get("squad"), dict)]

    def init_inputs(self, wc) -> dict:
        """The files of a model's local checkpoint folder(s) (``init``), as inputs of the job that
        starts from them (train_biencoder, export_encoder): an edited checkpoint makes the model
        again, where its path alone, a param, did not. A hub id or a ``pkg:`` checkpoint has none
        here (the package's version is in the job's code param), nor a folder inside ``results:``
        (another job's output, which that job's own rule makes)."""
        init = model_init(self.config, wc.model)
        results = Path(self.results).expanduser().resolve()
        files = []
        for checkpoint in ([init] if isinstance(init, str) else list(init.values())):
            folder = Path(checkpoint).expanduser()
            if checkpoint.startswith("pkg:") or is_builtin_tiny(checkpoint):
                continue  # a package's weights (its version is in the code param), or built in-process
            if folder.is_dir() and not folder.resolve().is_relative_to(results):  # results/: another job's output
                files += sorted(str(f) for f in folder.rglob("*")
                                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(folder).parts))
        return {"init": files} if files else {}

    def squad_source(self, corpus) -> str:
        """A SQuAD corpus's ``source``: a URL, or a local file; a relative path is taken from the
        working directory, else from the repository (the vendored resources/squad/ file, when
        Snakemake runs with --directory elsewhere)."""
        source = self.config["corpora"][corpus]["squad"]["source"]
        if "://" not in source and not Path(source).is_absolute() and not Path(source).exists():
            if (self.basedir / source).exists():
                source = str(self.basedir / source)
        return source

    def squad_source_inputs(self, wc):
        """prepare_squad's input: a local source file, so that an edited one rebuilds the corpus
        and its datasets (a URL's file is checked against its sha256 instead)."""
        source = self.squad_source(wc.corpus)
        return {} if "://" in source else {"source": source}

    def squad_args(self, corpus):
        """prepare_squad.py's options from a corpus's `squad` block (unset ones: the script's
        defaults), but ``--source``: the rules pass the source as the config writes it in a recorded
        param, and as found (:meth:`squad_source`: from the repository under --directory) in one
        Snakemake does not record, so that a checkout moved elsewhere rebuilds nothing."""
        sq = self.config["corpora"][corpus]["squad"]
        args = ["--seed", self.config["seed"]]
        if sq.get("sha256"):
            args += ["--sha256", sq["sha256"]]
        if "passage_words" in sq:
            args += ["--passage-words", sq["passage_words"]]
        for split, size in sq.get("split", {}).items():
            args += [f"--{split}", size]
        return [str(a) for a in args]

    def untrained_models(self):
        return [m for m, mc in self.config["models"].items() if "train_on" not in mc]

    def one_of(self, names):
        """A wildcard regex matching exactly one of ``names`` (never matches when empty)."""
        return "|".join(re.escape(n) for n in names) if names else "(?!)"

    def model_method(self, model):
        """dpr (one vector per passage) or dcsr (one vector per sentence)."""
        return self.config["models"][model]["method"]

    def is_dcsr(self, model):
        return model in self.config["models"] and self.model_method(model) == "dcsr"

    # DCSR's settings (config section `dcsr`) that the trainer and the embedder read from a model
    def train_settings(self, model):
        """The settings a model's training gets: the top-level train:, a DCSR model's dcsr: sample
        building, the model's own train:, without the launch keys (dcsr.settings)."""
        settings = dict(self.config["train"])
        if self.is_dcsr(model):
            settings.update({k: v for k, v in self.config["dcsr"].items() if k in DCSR_TRAIN})
            settings["splitter"] = self.config["dcsr"]["splitter"]  # one sentence table a corpus
            if "train_on" in self.config["models"][model]:
                # a list of datasets shares one match type (dcsr.pipeline.config checks it)
                settings["match_type"] = self.match_type(train_datasets(self.config["models"][model])[0])
        settings.update(self.config["models"][model].get("train", {}))
        for launch_key in LAUNCH:
            settings.pop(launch_key, None)
        spec = {**TRAIN, **DCSR_TRAIN, **DCSR_INTERNAL} if self.is_dcsr(model) else TRAIN
        return filled(spec, settings, f"config: models.{model}.train")

    def train_settings_arg(self, model, part: str = "all") -> str:
        """The training settings as the scripts' ``--settings`` JSON: every default filled in and
        the keys sorted, so that a config whose keys come in another order, or that writes out a
        default, plans the same jobs (Snakemake reruns a job whose params change). ``part``:
        ``"model"``, those that make the model (a recorded param); ``"run"``, those that change
        nothing of it (:func:`dcsr.settings.run_only_keys`: logging, loader workers, checkpoint
        frequency), passed in a param Snakemake does not record, so that a new value retrains
        and re-embeds nothing; ``"all"``, both; ``"untrained"``, those an untrained model's
        export reads (:data:`UNTRAINED_KEYS`)."""
        settings = self.train_settings(model)
        if part == "untrained":
            return json_arg({k: v for k, v in settings.items() if k in UNTRAINED_KEYS}, sort_keys=True)
        run = run_only_keys(settings)
        if part != "all":
            settings = {k: v for k, v in settings.items() if (k in run) == (part == "run")}
        return json_arg(settings, sort_keys=True)

    def _launch(self, model, key):
        return int({**self.config["train"], **self.config["models"][model].get("train", {})}.get(key, LAUNCH[key].default))

    def model_gpus(self, model):
        """GPUs per node of a model's training job."""
        return self._launch(model, "gpus")

    def model_nodes(self, model):
        nodes = self._launch(model, "nodes")
        if nodes > 1 and self.model_gpus(model) < 1:
            raise InputError("config: train.nodes", f"model {model} trains over {nodes} nodes, which needs train.gpus >= 1 (GPUs per node)")
        return nodes

    def threads_for(self, rule_name, default):
        """A rule's threads: ``resources.<rule>.threads`` of the self.config, else ``default``."""
        return int(self.resources_for(rule_name, "threads", default))

    def train_threads(self, model):
        """CPU cores of a training job: on GPUs ``cpus_per_gpu`` per GPU (data loading), at least
        2; on a CPU ``resources.train_biencoder.threads`` (default 2)."""
        if self.model_gpus(model) > 0:
            return max(2, self.model_gpus(model) * self._launch(model, "cpus_per_gpu"))
        return self.threads_for("train_biencoder", 2)

    def train_launcher(self, model):
        """How the training script is started: one process; ``torchrun --standalone`` over the
        GPUs of one node; or, with ``train.nodes`` > 1 under Slurm, one torchrun per node started
        by ``srun``, meeting at a c10d rendezvous on the node the batch script runs on.

        The multi-node ``srun`` is the job's only step: :meth:`train_resources` gives the job an
        ``mpi`` resource, so that snakemake-executor-plugin-slurm-jobstep runs the command in the
        batch script as it is instead of inside its own ``srun -n1`` (a step in a step, which
        since Slurm 20.11 waits for the CPUs the outer step holds, until the time limit;
        ``--overlap`` would let it start, but inside a one-task step on one node). The plugin
        clears every ``SLURM_*`` variable but the job's id before running it, so the step says
        its own shape (a step's default is one CPU a task; it gets the job's GPUs, ``--gres``,
        by default) and the rendezvous host is ``hostname``, the batch script's node, which
        is one of the job's and runs one of the torchruns; its port is 29500 plus the job id
        modulo 20,000, so two jobs whose batch scripts share a node meet on ports of their own."""
        gpus, nodes = self.model_gpus(model), self.model_nodes(model)
        if nodes > 1:
            return (
                f"srun --nodes {nodes} --ntasks-per-node 1 --cpus-per-task {self.train_threads(model)}"
                f" --kill-on-bad-exit=1 torchrun --nnodes {nodes} --nproc_per_node {max(gpus, 1)}"
                " --rdzv_id $SLURM_JOB_ID --rdzv_backend c10d"
                " --rdzv_endpoint $(hostname):$((29500 + SLURM_JOB_ID % 20000))"
            )
        if gpus > 1:
            return f"torchrun --standalone --nproc_per_node {gpus}"
        return "python"

    def train_resources(self, model, here: dict | None = None) -> dict:
        """A training job's resources (None: not set). On one node ``gpu`` (the Slurm plugin's
        ``--gpus``; Snakemake's count locally): ``train.gpus``, or 1 where that is 0 and torch
        sees a GPU ``here`` (:func:`dcsr.pipeline.gpus.gpus_here`, local runs only). Over nodes:
        ``gres`` per node (``--gres=gpu:N``), ``nodes``, and what makes it an MPI-style job for
        the Slurm plugins (see :meth:`train_launcher`): ``mpi``, ``tasks`` = one per node
        (``--ntasks``), ``tasks_per_gpu`` = 0 (else the plugin turns ``tasks`` into
        ``--ntasks-per-gpu`` for a GPU job)."""
        gpus, nodes = self.model_gpus(model), self.model_nodes(model)
        if nodes > 1:
            return {"gpu": 0, "gres": f"gpu:{gpus}", "nodes": nodes, "mpi": "srun", "tasks": nodes, "tasks_per_gpu": 0}
        return {"gpu": job_gpus(gpus, (here or {}).get("torch", 0)), "gres": None, "nodes": 1, "mpi": None,
                "tasks": None, "tasks_per_gpu": None}

    def gpu_resource(self, rule_name, here: dict | None = None) -> int:
        """The ``gpu`` resource of an embedding, search or mining job: the config's count
        (``embed.gpus``, ``index.gpus``), else 1 where what the job runs uses a GPU ``here``
        (:func:`dcsr.pipeline.gpus.gpus_here`): torch to encode questions or passages, and the
        shard indexes' search where :meth:`index_on_gpu`; else 0."""
        here = here or {}
        torch, index = here.get("torch", 0) > 0, self.index_on_gpu(here)
        section, usable = {"embed_shard": ("embed", torch), "embed_questions": ("embed", torch),
                           "mine_dense_negatives": ("embed", torch or index),
                           "search_shard": ("index", index)}[rule_name]
        return job_gpus(self.config[section]["gpus"], usable)

    def index_on_gpu(self, here: dict) -> bool:
        """Whether the shard indexes are searched on a GPU where torch and faiss see ``here``'s
        GPUs, as ``index.gpu`` has dcsr.retrieval.placement.place_index choose: faiss-gpu (true,
        auto), else torch on CUDA for a Flat index (torch, auto), else faiss on the CPU."""
        mode = self.config["index"]["gpu"]
        mode = mode if isinstance(mode, bool) else str(mode).lower()
        faiss = here.get("faiss", 0) > 0
        torch = here.get("torch", 0) > 0 and str(self.config["index"]["factory"]).strip() == "Flat"
        if mode in (False, "false"):
            return False
        if mode in (True, "true"):
            return faiss
        return torch if mode == "torch" else faiss or torch

    def resources_for(self, rule_name, key, default=None):
        res = {**self.config.get("resources", {}).get("default", {}), **self.config.get("resources", {}).get(rule_name, {})}
        return res.get(key, default)

    def shards(self, corpus):
        """Shard numbers of a corpus's embeddings, indexes and searches."""
        return range(corpus_shards(self.config, corpus))

    def match_type(self, dataset):
        return self.dataset_cfg(dataset).get("match", "string")

    def bad_pattern_args(self, wc):
        """What a run's scoring does with a regex answer that does not compile: nothing to say for
        ``refuse`` (the default: it stops the scoring); ``--bad-patterns never_found`` where the
        dataset's ``bad_patterns`` says so (DPR's own scoring, for DPR's CuratedTREC files)."""
        value = self.dataset_cfg(wc.dataset).get("bad_patterns", "refuse")
        return [] if value == "refuse" else ["--bad-patterns", value]

    def store_inputs(self, wc):
        """The corpus's passage store: a run's passages are read from it to score the run, and an
        embedding shard's rows to embed them."""
        return {f"store_{k}": v.format(corpus=wc.corpus) for k, v in self.paths.STORE.items()}
