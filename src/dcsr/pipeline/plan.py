"""The plan: what a validated config asks the pipeline to make, as answers the Snakemake rules
ask for. Which datasets and models exist, what each model trains on, which runs each table,
claim and attribution cell needs, which question sets each index is searched with, every
rule's inputs and command-line arguments, and the resources of each job. ``rules/common.smk``
builds one :class:`Plan` and the rules only ask it questions; it is unit-tested without
Snakemake (tests/test_plan.py).

Input functions take Snakemake's ``wildcards`` (any object with the wildcards as attributes)
and, as Snakemake passes them by name, ``input``/``output``.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

from dcsr.attribution.analysis import percent_label, sweep_model_name
from dcsr.errors import InputError
from dcsr.evaluation.tables import table_cells
from dcsr.pipeline.config import (DEV_VARIANT, check_config, claim_pair, json_arg, model_init, corpus_shards, dataset_questions, model_seeds,
                                  seed_replicas, sweep_models, dev_variants, train_datasets, variant_root,
                                  variant_settings)
from dcsr.pipeline.checks import check_claim_seeds, check_local_sources, check_marker_lengths, check_search_params
from dcsr.pipeline.code_version import code_version
from dcsr.pipeline.paths import bench_path, log_path, patterns
from dcsr.pipeline.resources import download_settings, resource_files, resource_of_file, resource_url
from dcsr.settings import DCSR_INTERNAL, DCSR_TRAIN, LAUNCH, TRAIN, check_sections, filled


def expand_config(config: dict) -> dict:
    """Check ``config`` (already validated against config/schema.yaml) and complete it in place:
    the settings sections' defaults, the sweep's models, the seed replicas of models with
    ``seeds: n``, the ``<dataset>.dev`` variants of ``dcsr.temperature: dev``, and each variant's
    inherited settings. An :class:`InputError` names the config key."""
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


class Plan:
    """The answers to the rules' questions about one config (completed by :func:`expand_config`).

    ``basedir`` is the repository (Snakemake's ``workflow.basedir``): a relative SQuAD source
    that is not in the working directory is looked up there."""

    def __init__(self, config: dict, basedir: str | Path = "."):
        self.config = expand_config(config)
        self.basedir = Path(basedir)
        check_local_sources(self.config, self.basedir)
        for model in self.config["models"]:
            if self.is_dcsr(model):
                check_marker_lengths(model, self.train_settings(model))
        check_search_params(self.config["index"]["search_params"], self.config["index"]["factory"])  # and the factory
        self.results = config["results"]
        self.downloads = download_settings(config.get("downloads", {}))
        self.paths = patterns(self.results, self.downloads["dir"])

    def code_version(self, script: str) -> str:
        """The digest of ``workflow/scripts/<script>`` and the dcsr modules it imports: a rule's
        ``code`` param, so an edit to either reruns its jobs (dcsr.pipeline.code_version)."""
        return code_version(str(self.basedir / "workflow" / "scripts" / script), str(self.basedir / "src"))

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
        statistics of training sets, which would otherwise count the same questions twice."""
        return [d for d, ds in self.config["datasets"].items() if "like" not in ds]

    def dev_question_datasets(self):
        """The datasets whose dev questions some variant searches as its test set."""
        return sorted({variant_root(self.config, d) for d in self.config["datasets"] if dataset_questions(self.config, d) == "dev"})

    def dataset_file(self, dataset, split):
        """The DPR file of a dataset split: train/dev biencoder JSON or the test qas TSV. A variant
        (``like``) has the files of its dataset, its test set that dataset's dev questions with
        ``questions: dev``."""
        ds = self.dataset_cfg(dataset)
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

    def squad_args(self, corpus):
        """prepare_squad.py's options from a corpus's `squad` block (unset ones: the script's defaults)."""
        sq = self.config["corpora"][corpus]["squad"]
        source = sq["source"]
        # a relative path is taken from the working directory, else from the repository (the
        # vendored resources/squad/ file, when Snakemake runs with --directory elsewhere)
        if "://" not in source and not Path(source).is_absolute() and not Path(source).exists():
            if (self.basedir / source).exists():
                source = str(self.basedir / source)
        args = ["--source", source, "--seed", self.config["seed"]]
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
            if "train_on" in self.config["models"][model]:
                # a list of datasets shares one match type (dcsr.pipeline.config checks it)
                settings["match_type"] = self.match_type(train_datasets(self.config["models"][model])[0])
        settings.update(self.config["models"][model].get("train", {}))
        for launch_key in LAUNCH:
            settings.pop(launch_key, None)
        spec = {**TRAIN, **DCSR_TRAIN, **DCSR_INTERNAL} if self.is_dcsr(model) else TRAIN
        return filled(spec, settings, f"config: models.{model}.train")

    def train_settings_arg(self, model) -> str:
        """The training settings as the scripts' ``--settings`` JSON: every default filled in and
        the keys sorted, so that a config whose keys come in another order, or that writes out a
        default, plans the same jobs (Snakemake reruns a job whose params change)."""
        return json_arg(self.train_settings(model), sort_keys=True)

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
        by ``srun``, meeting at a c10d rendezvous on the job's first node."""
        gpus, nodes = self.model_gpus(model), self.model_nodes(model)
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

    def train_gpu_resources(self, model):
        """Slurm GPU request: ``gpu`` (the plugin's ``--gpus``, per job) on one node; per node
        (``gres``, ``--gres=gpu:N``) when the job spans nodes."""
        gpus, nodes = self.model_gpus(model), self.model_nodes(model)
        if nodes > 1:
            return {"gpu": 0, "gres": f"gpu:{gpus}" if gpus else "", "nodes": nodes}
        return {"gpu": gpus, "gres": "", "nodes": 1}

    def resources_for(self, rule_name, key, default=None):
        res = {**self.config.get("resources", {}).get("default", {}), **self.config.get("resources", {}).get(rule_name, {})}
        return res.get(key, default)

    def shards(self, corpus):
        """Shard numbers of a corpus's embeddings, indexes and searches."""
        return range(corpus_shards(self.config, corpus))

    def match_type(self, dataset):
        return self.dataset_cfg(dataset).get("match", "string")

    # ------------------------------------------------------------------ targets
    def table_cells(self, table):
        """(corpus, :class:`~dcsr.evaluation.tables.Cell`) of every cell of a table."""
        return [(self.corpus_of(c.dataset), c) for c in table_cells(self.config["tables"][table])]

    # a table cell's files: its pair's run, or its fusion's for a hybrid row
    CELL_FILES = {"metrics": ("METRICS", "HYBRID_METRICS"), "run": ("RUN", "HYBRID_RUN"),
                  "questions": ("QUESTION_RESULTS", "HYBRID_QUESTIONS")}

    def cell_file(self, corpus, cell, kind):
        """A table cell's ``kind`` of file (metrics, run, per-question results): its pair's, or
        its fusion's for a hybrid row."""
        plain, hybrid = self.CELL_FILES[kind]
        if cell.fusion:
            return getattr(self.paths, hybrid).format(corpus=corpus, fusion=cell.fusion, qmodel=cell.qmodel,
                                                      pmodel=cell.pmodel, dataset=cell.dataset)
        return getattr(self.paths, plain).format(corpus=corpus, qmodel=cell.qmodel, pmodel=cell.pmodel,
                                                 dataset=cell.dataset)

    def table_runs(self, table):
        """(corpus, qmodel, pmodel, dataset) of every run a table needs: its cells', and for a
        hybrid cell the BM25 and dense runs it fuses (linear fusion: on the dev questions too,
        where its weight is chosen)."""
        runs = []
        for c, cell in self.table_cells(table):
            runs.append((c, cell.qmodel, cell.pmodel, cell.dataset))
            if cell.fusion:
                runs.append((c, "bm25", "bm25", cell.dataset))
                if cell.fusion == "linear":
                    dev = cell.dataset + DEV_VARIANT
                    runs += [(c, cell.qmodel, cell.pmodel, dev), (c, "bm25", "bm25", dev)]
        return list(dict.fromkeys(runs))

    def table_metrics(self, table):
        return [self.cell_file(c, cell, "metrics") for c, cell in self.table_cells(table)]

    def table_inputs(self, wc):
        """make_table's inputs: every cell's metrics; with ``measures``, every cell's TREC run and
        the pooled qrels of each test set it scores them against (from :meth:`table_spec_cells`)."""
        cells = self.table_spec_cells(wc.table)
        inputs = {"metrics": [c["metrics"] for c in cells]}
        if self.config["tables"][wc.table].get("measures"):
            inputs["runs"] = [c["run"] for c in cells]
            inputs["qrels"] = sorted({c["qrels"] for c in cells})
        return inputs

    def table_spec_cells(self, table):
        """make_table's cells: each cell's pair, dataset, fusion and metrics file; with
        ``measures``, its TREC run and its test set's pooled qrels."""
        measures = bool(self.config["tables"][table].get("measures"))
        return [{"qmodel": cell.qmodel, "pmodel": cell.pmodel, "dataset": cell.dataset, "fusion": cell.fusion,
                 "metrics": self.cell_file(c, cell, "metrics"),
                 **({"run": self.cell_file(c, cell, "run"),
                     "qrels": self.paths.POOLED_QRELS.format(corpus=c, dataset=cell.dataset)} if measures else {})}
                for c, cell in self.table_cells(table)]

    def plumbing_notes(self, models) -> list[str]:
        """A note for a table or ledger with a model built on a tiny random encoder: its numbers
        test the pipeline's plumbing, not retrieval quality."""
        from dcsr.models.checkpoints import is_random_tiny

        inits = {m: model_init(self.config, m) for m in models if m in self.config["models"]}
        tiny = sorted(m for m, init in inits.items()
                      if any(is_random_tiny(e) for e in ([init] if isinstance(init, str) else init.values())))
        if not tiny:
            return []
        return [f"Built on a tiny random encoder ({', '.join(tiny)}): these numbers test the pipeline's plumbing, "
                "not retrieval quality."]

    def table_notes(self, table):
        return self.plumbing_notes({m for _, cell in self.table_cells(table) for m in (cell.qmodel, cell.pmodel)})

    def claims_notes(self):
        return self.plumbing_notes({m for c in self.config.get("claims", []) for side in ("baseline", "method")
                                    for m in claim_pair(c[side])})

    def pool(self, corpus, dataset):
        """The per-question results of every run the config makes on ``dataset``'s questions over
        ``corpus``: the tables' cells (BM25, dense pairs, hybrids), the runs they fuse, the
        attribution pairs and the claims' seeds. Their judged hits, pooled, are the qrels that
        every row's standard measures are computed against (TREC pooling)."""
        runs = set()
        for table in self.config["tables"]:
            runs |= {self.cell_file(c, cell, "questions") for c, cell in self.table_cells(table)
                     if (c, cell.dataset) == (corpus, dataset) and cell.fusion}
            runs |= {self.paths.QUESTION_RESULTS.format(corpus=c, qmodel=q, pmodel=p, dataset=d)
                     for c, q, p, d in self.table_runs(table) if (c, d) == (corpus, dataset)}
        runs |= {self.paths.QUESTION_RESULTS.format(corpus=c, qmodel=q, pmodel=p, dataset=d)
                 for c, q, p, d in self.dense_runs() if (c, d) == (corpus, dataset)}
        if self.attribution().get("bm25", True) and dataset in self.attribution().get("test_sets", []):
            runs.add(self.paths.QUESTION_RESULTS.format(corpus=corpus, qmodel="bm25", pmodel="bm25", dataset=dataset))
        if not runs:
            raise InputError("config", f"no run of the config searches {dataset!r} on corpus {corpus!r}, so there is "
                                       "nothing to pool qrels from")
        return sorted(runs)

    @functools.cache
    def hybrid_runs(self):
        """(corpus, fusion, qmodel, pmodel, dataset) of every hybrid cell of the tables."""
        return tuple(sorted({(c, cell.fusion, cell.qmodel, cell.pmodel, cell.dataset) for table in self.config["tables"]
                             for c, cell in self.table_cells(table) if cell.fusion}))

    def fuse_inputs(self, wc):
        """A hybrid run's two runs (BM25's and the pair's), its questions and passage store, and
        for linear fusion the weight chosen on dev."""
        if (wc.corpus, wc.fusion, wc.qmodel, wc.pmodel, wc.dataset) not in self.hybrid_runs():
            raise InputError("config", f"no table has a hybrid row ({wc.fusion}) of {wc.qmodel} x {wc.pmodel} on "
                                       f"{wc.dataset}: add one (retriever: hybrid) to a table's rows")
        inputs = self.fused_runs(wc, wc.dataset)
        if wc.fusion == "linear":
            inputs["weight"] = self.paths.FUSION_WEIGHT.format(**wc)
        return inputs

    def fusion_weight_inputs(self, wc):
        """The runs of the dev questions that linear fusion's weight is chosen on."""
        return self.fused_runs(wc, wc.dataset + DEV_VARIANT)

    def fused_runs(self, wc, dataset):
        run = self.paths.RUN
        return {"bm25": run.format(corpus=wc.corpus, qmodel="bm25", pmodel="bm25", dataset=dataset),
                "dense": run.format(corpus=wc.corpus, qmodel=wc.qmodel, pmodel=wc.pmodel, dataset=dataset),
                "questions": self.dataset_file(dataset, "test"), **self.store_inputs(wc)}

    def final_outputs(self):
        out = []
        for table in self.config["tables"]:
            out += [self.paths.TABLE_CSV.format(table=table), self.paths.TABLE_MD.format(table=table)]
        for model in self.trained_models():
            out.append(self.paths.MODEL_DIR.format(model=model))
        # the sentence table of every corpus (DCSR's index keys), with its statistics
        out += [self.paths.SENTENCE_STATS.format(corpus=c) for c in self.config["corpora"]]
        out += [self.paths.TABLE1_CSV, self.paths.TABLE1_MD, f"{self.paths.APPENDIX_B}.csv", f"{self.paths.APPENDIX_B}.md"]
        for label in sorted({self.training_label(m) for m in self.trained_models()}):
            out += [self.paths.VALIDATION_PNG.format(dataset=label), self.paths.VALIDATION_CSV.format(dataset=label)]
        out += self.attribution_outputs()
        if self.config.get("claims"):
            out += [f"{self.paths.CLAIMS}.csv", f"{self.paths.CLAIMS}.md"]
        return out

    def claim_seed_runs(self, claim, side):
        """(corpus, q, p, test set) of one side of a claim for each training seed: seed k pairs the
        k-th run of each model that has several (a model with one run stays itself)."""
        q, p = claim_pair(claim[side])
        if q == "bm25":
            return [(self.corpus_of(claim["test_set"]), q, p, claim["test_set"])]
        qs, ps = model_seeds(self.config, q), model_seeds(self.config, p)
        n = max(len(qs), len(ps))
        return [(self.corpus_of(claim["test_set"]), qs[k] if len(qs) > 1 else q, ps[k] if len(ps) > 1 else p, claim["test_set"])
                for k in range(n)]

    def claims_spec(self):
        """The claims of the config with the per-question results of both sides' runs. A dense
        pair that no table or attribution pair runs is an error at DAG build."""
        out = []
        for i, claim in enumerate(self.config.get("claims", [])):
            item = dict(claim)
            for side in ("baseline", "method"):
                q, p = claim_pair(claim[side])
                run = (self.corpus_of(claim["test_set"]), q, p, claim["test_set"])
                if q != "bm25" and run not in self.dense_runs():
                    raise InputError(f"config: claims.{i}.{side}", f"the run {q} x {p} on {claim['test_set']} is in no "
                                        "table and no attribution pair: add it to a table's rows")
                item[side] = q if q == p else f"{q} x {p}"
                item[f"{side}_runs"] = [self.paths.QUESTION_RESULTS.format(corpus=c, qmodel=sq, pmodel=sp, dataset=d)
                                        for c, sq, sp, d in self.claim_seed_runs(claim, side)]
            out.append(item)
        return out

    # ------------------------------------------------------------------ encoder attribution
    def attribution(self):
        return self.config.get("attribution", {})

    def sweep_series(self):
        """``{dataset: [(fraction, model), ...]}`` of the sweep, 1.0 = the family's own model."""
        a = self.attribution()
        if not a.get("sweep"):
            return {}
        family = a["families"][a["sweep"]["family"]]
        out = {}
        for ds in a["sweep"]["datasets"]:
            series = {f: sweep_model_name(family[ds], f) for f in a["sweep"]["fractions"] if f != 1.0}
            series[1.0] = family[ds]
            out[ds] = sorted(series.items())
        return out

    def attribution_cells(self):
        """(question model, passage model, test set) of every pair the analysis reads: each family's
        K x K pairs on every test set, BM25, and the sweep's encoders against the 100% ones (its
        dataset's test set both ways, and its passage encoders with every in-domain question encoder)."""
        a = self.attribution()
        tests = a["test_sets"]
        cells = []
        for family in a["families"].values():
            cells += [(q, p, t) for q in family.values() for p in family.values() for t in tests]
        if a.get("bm25", True):
            cells += [("bm25", "bm25", t) for t in tests]
        if a.get("sweep"):
            family = a["families"][a["sweep"]["family"]]
            for ds, series in self.sweep_series().items():
                for _f, m in series:
                    cells += [(m, p, ds) for p in family.values()] + [(q, m, ds) for q in family.values()]
                    cells += [(family[t], m, t) for t in tests if t in family]
        return list(dict.fromkeys(cells))

    def attribution_spec(self):
        a = self.attribution()
        spec = {
            "test_sets": a["test_sets"],
            "metrics": a.get("metrics", ["top20", "top100"]),
            "families": a["families"],
            "paper_names": {d: ds.get("paper_name") for d, ds in self.config["datasets"].items()},
            "bm25": a.get("bm25", True),
        }
        if a.get("sweep"):
            spec["sweep_family"] = a["sweep"]["family"]
            spec["sweeps"] = [{"dataset": d, "models": s} for d, s in self.sweep_series().items()]
        if a.get("compare"):
            spec["compare"] = [a["compare"]["baseline"], a["compare"]["method"]]
        return spec

    def attribution_spec_arg(self, wc):
        return json_arg(self.attribution_spec())

    def attribution_datasets(self):
        """The datasets of the attribution's families that have question files of their own
        (Table 1's rows), in the families' order."""
        families = self.attribution()["families"].values()
        return [d for d in dict.fromkeys(d for fam in families for d in fam) if d in self.source_datasets()]

    def attribution_stats_entries(self):
        """(dataset, fraction, training file) for Table 3 and Figure 4."""
        datasets = self.attribution_datasets()
        entries = [(d, 1.0, self.training_file(d)) for d in datasets]
        for ds, series in self.sweep_series().items():
            entries += [(ds, f, self.model_training_file(m)) for f, m in series if f != 1.0 and ds in datasets]
        return entries

    def attribution_outputs(self):
        a = self.attribution()
        if not a:
            return []
        out = [self.paths.PAIR_MATRIX, f"{self.paths.ATTRIBUTION_TABLE1}.csv", f"{self.paths.ATTRIBUTION_TABLE1}.md",
               f"{self.paths.ATTRIBUTION_TABLE2}.csv", f"{self.paths.ATTRIBUTION_TABLE2}.md",
               f"{self.paths.ATTRIBUTION_TABLE3}.csv", f"{self.paths.ATTRIBUTION_TABLE3}.md", f"{self.paths.COVERAGE_FIGURE}.png", f"{self.paths.COVERAGE_FIGURE}.csv"]
        for family in a["families"]:
            out += [f"{self.paths.MARGINALS.format(family=family)}.{e}" for e in ("csv", "md")]
            out += [self.paths.MARGINALS_PNG.format(family=family)]
            out += [f"{self.paths.PAIR_HEATMAP.format(family=family)}.{e}" for e in ("png", "csv")]
        if a.get("sweep"):
            out += [f"{self.paths.SWEEP_FIGURE}.png", f"{self.paths.SWEEP_FIGURE}.csv", f"{self.paths.ATTRIBUTION_TABLE4}.csv", f"{self.paths.ATTRIBUTION_TABLE4}.md"]
        if a.get("compare"):
            out += [f"{self.paths.FAMILY_COMPARISON}.csv", f"{self.paths.FAMILY_COMPARISON}.md"]
        return out

    # ------------------------------------------------------------------ rule inputs
    def train_inputs(self, wc):
        ds = train_datasets(self.config["models"][wc.model])[0]
        dev = self.paths.MERGED_DEV.format(model=wc.model) if self.trains_on_several(wc.model) else self.dataset_file(ds, "dev")
        inputs = {"train": self.model_training_file(wc.model), "dev": dev}
        if self.is_dcsr(wc.model):  # DCSR's sentence spans of the passages it trains on (one corpus: dcsr.pipeline.config checks it)
            inputs["sentences"] = self.paths.SENTENCES.format(corpus=self.corpus_of(ds))
        return inputs

    def export_inputs(self, wc):
        """export_model's input, the saved model; a DCSR model is refused here, before it is
        trained: its sentence vectors are in neither export format (dcsr.models.export)."""
        if self.is_dcsr(wc.model):
            raise InputError(f"config: models.{wc.model}.method", f"dcsr: model {wc.model} encodes a passage as one "
                             "vector per sentence, which neither DPR's Hugging Face format nor sentence-transformers "
                             "holds (one vector per text); only method dpr exports")
        return {"model": self.paths.MODEL_DIR.format(model=wc.model)}

    def embed_shard_inputs(self, wc):
        # the corpus's passage store: the job reads its shard's rows only
        inputs = {"model": self.paths.MODEL_DIR.format(model=wc.pmodel), **self.store_inputs(wc)}
        if self.is_dcsr(wc.pmodel):  # one vector per sentence of the sentence table
            inputs["sentences"] = self.paths.SENTENCES.format(corpus=wc.corpus)
        return inputs

    @functools.cache
    def dense_runs(self):
        """(corpus, qmodel, pmodel, dataset) of every dense run the config asks for: the tables'
        cells and the attribution pairs. Computed once: every search and merge job asks, and the
        config is fixed once this file has run."""
        runs = [run for table in self.config["tables"] for run in self.table_runs(table)]
        if self.attribution():
            runs += [(self.corpus_of(t), q, p, t) for q, p, t in self.attribution_cells()]
        # the other training runs of claims' models with seeds: n
        runs += [run for c in self.config.get("claims", []) for side in ("baseline", "method")
                 for run in self.claim_seed_runs(c, side)[1:]]
        # dcsr.temperature: dev: each DCSR run's pair also searches its dataset's dev questions
        runs += [(c, q, p, d + DEV_VARIANT) for c, q, p, d in runs if self.temperature_on_dev(p, d)]
        return tuple(sorted({run for run in runs if run[1] != "bm25"}))

    def temperature_on_dev(self, pmodel, dataset):
        """Whether the run of DCSR passage encoder ``pmodel`` on ``dataset`` takes its HasAns
        temperature from ``dataset``'s dev questions (dcsr.temperature: dev)."""
        return (self.is_dcsr(pmodel) and self.config["dcsr"]["temperature"] == "dev"
                and dataset + DEV_VARIANT in self.config["datasets"])

    def hasans_args(self, wc, input):
        """merge_runs' HasAns flags: none for DPR; a DCSR run takes its temperature from the config
        or from the dev choice (dcsr.temperature: dev; its merged dev run too), else 1."""
        if not self.is_dcsr(wc.pmodel):
            return []
        if "temperature" in input.keys():
            return ["--hasans", "--temperature-file", input.temperature]
        t = self.config["dcsr"]["temperature"]
        return ["--hasans", "--temperature", str(1.0 if t == "dev" else t)]

    def temperature_inputs(self, wc):
        if (wc.corpus, wc.qmodel, wc.pmodel, wc.dataset + DEV_VARIANT) not in self.dense_runs():
            raise InputError("config", f"no dev run to choose the temperature of {wc.qmodel} x {wc.pmodel} on {wc.dataset}")
        return self.run_inputs(wc, wc.dataset + DEV_VARIANT)

    def temperature_hit_files(self, wc, input):
        return self.hit_files(wc, input, wc.dataset + DEV_VARIANT)

    def searches_of(self, corpus, pmodel):
        """(qmodel, dataset) of every question set searched against ``pmodel``'s index of ``corpus``."""
        return [(q, d) for c, q, p, d in self.dense_runs() if c == corpus and p == pmodel]

    def question_sets_of(self, qmodel):
        """Test sets whose questions ``qmodel`` encodes (for any passage encoder and corpus)."""
        return sorted({d for c, q, p, d in self.dense_runs() if q == qmodel})

    def embed_questions_inputs(self, wc):
        datasets = self.question_sets_of(wc.qmodel)
        if not datasets:
            raise InputError("config", f"no table or attribution pair searches with the question encoder {wc.qmodel!r}")
        return {"model": self.paths.MODEL_DIR.format(model=wc.qmodel), "questions": [self.dataset_file(d, "test") for d in datasets]}

    def embed_questions_args(self, wc, output) -> list[str]:
        return [a for d in self.question_sets_of(wc.qmodel)
                for a in ("--set", self.dataset_file(d, "test"), str(Path(output[0]) / f"{d}.npy"))]

    def search_shard_inputs(self, wc):
        inputs = {
            "index": self.paths.SHARD_INDEX.format(**wc),
            "ids": self.paths.SHARD_IDS.format(**wc),
            "queries": sorted({self.paths.QUERY_DIR.format(qmodel=q) for q, d in self.searches_of(wc.corpus, wc.pmodel)}),
        }
        if not inputs["queries"]:
            raise InputError("config", f"no table or attribution pair searches {wc.pmodel!r} on corpus {wc.corpus!r}")
        if self.is_dcsr(wc.pmodel) and self.config["dcsr"]["sentences_per_passage"] is None:
            inputs["stats"] = self.paths.SENTENCE_STATS.format(corpus=wc.corpus)  # k = mean sentences per passage
        return inputs

    def search_args(self, wc, output) -> list[str]:
        return [a for q, d in self.searches_of(wc.corpus, wc.pmodel)
                for a in ("--search", self.paths.QUERY_VECTORS.format(qmodel=q, dataset=d),
                          str(Path(output[0]) / self.paths.SHARD_HITS_IN_DIR.format(qmodel=q, dataset=d)))]

    def merge_inputs(self, wc):
        if (wc.corpus, wc.qmodel, wc.pmodel, wc.dataset) not in self.dense_runs():
            raise InputError(
                "config",
                f"the run {wc.qmodel} x {wc.pmodel} on {wc.dataset} ({wc.corpus}) is in no table and no attribution "
                "pair of the config: add it to a table's rows (config key tables) to have it searched"
            )
        inputs = self.run_inputs(wc, wc.dataset)
        if self.temperature_on_dev(wc.pmodel, wc.dataset):
            inputs["temperature"] = self.paths.TEMPERATURE.format(**wc)
        elif wc.dataset.endswith(DEV_VARIANT) and self.temperature_on_dev(wc.pmodel, wc.dataset[:-len(DEV_VARIANT)]):
            # the merged dev run (a hybrid's weight is chosen on it) ranks with the temperature the
            # test run uses, chosen on the dev questions' sentence hits, not on this merged run
            root = wc.dataset[:-len(DEV_VARIANT)]
            inputs["temperature"] = self.paths.TEMPERATURE.format(corpus=wc.corpus, qmodel=wc.qmodel,
                                                                  pmodel=wc.pmodel, dataset=root)
        return inputs

    def run_inputs(self, wc, dataset):
        """What a merge of ``wc.pmodel``'s shard hits for ``dataset``'s questions reads: every shard's
        hits, the questions, and the passage store to score them."""
        return {
            "hits": [self.paths.SHARD_HITS_DIR.format(corpus=wc.corpus, pmodel=wc.pmodel, shard=i) for i in self.shards(wc.corpus)],
            "questions": self.dataset_file(dataset, "test"),
            **self.store_inputs(wc),
        }

    def gold_args(self, wc):
        """``--gold DEV_JSON`` when a run's test set is a dataset's dev questions (whose DPR dev JSON
        knows each question's gold passages: standard measures against them too), else ''."""
        if dataset_questions(self.config, wc.dataset) != "dev":
            return []
        return ["--gold", self.dataset_file(variant_root(self.config, wc.dataset), "dev")]

    def store_inputs(self, wc):
        """The corpus's passage store: a run's passages are read from it to score the run, and an
        embedding shard's rows to embed them."""
        return {f"store_{k}": v.format(corpus=wc.corpus) for k, v in self.paths.STORE.items()}

    def merge_hit_files(self, wc, input):
        return self.hit_files(wc, input, wc.dataset)

    def hit_files(self, wc, input, dataset):
        """The per-shard hit files of question encoder ``wc.qmodel`` on ``dataset``'s questions."""
        return [str(Path(d) / self.paths.SHARD_HITS_IN_DIR.format(qmodel=wc.qmodel, dataset=dataset))
                for d in input.hits]

    def negatives_miners(self):
        """The models whose hard negatives some model trains on (models.<m>.negatives_from)."""
        return sorted({mc["negatives_from"] for mc in self.config["models"].values() if "negatives_from" in mc})

    def mine_dense_inputs(self, wc):
        """The miner and its own shard indexes of the dataset's corpus (built for mining alone when no
        table or attribution pair searches them), and the dataset's training set."""
        corpus = self.corpus_of(wc.dataset)
        inputs = {
            "model": self.paths.MODEL_DIR.format(model=wc.model),
            "train": self.dataset_file(wc.dataset, "train"),
            "corpus": self.corpus_tsv(corpus),
        }
        for key, pattern in (("indexes", self.paths.SHARD_INDEX), ("ids", self.paths.SHARD_IDS), ("sentence_numbers", self.paths.SHARD_SENTENCE_NUMBERS)):
            inputs[key] = [pattern.format(corpus=corpus, pmodel=wc.model, shard=i) for i in self.shards(corpus)]
        return inputs

    def mine_shard_args(self, wc, input) -> list[str]:
        return [a for i, d, n in zip(input.indexes, input.ids, input.sentence_numbers) for a in ("--shard", i, d, n)]

    @property
    def search_params_args(self) -> list[str]:
        """``--search-params`` and ``index.search_params`` for the scripts that search shard
        indexes (search_shard, mine_dense_negatives); nothing when it is empty (Snakemake's
        ``:q`` writes an empty string as nothing, which would leave the flag without a value)."""
        params = self.config["index"]["search_params"]
        return ["--search-params", params] if params else []

    def sentence_depth_args(self, wc, input):
        """DCSR: search the top 100 x k sentences (k from the self.config, else the corpus mean)."""
        if not self.is_dcsr(wc.pmodel):
            return []
        k = self.config["dcsr"]["sentences_per_passage"]
        return ["--sentences-per-passage", str(k)] if k is not None else ["--sentence-stats", input.stats]
