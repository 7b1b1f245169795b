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

from pathlib import Path

from dcsr.errors import InputError
from dcsr.pipeline.checks import check_indexes
from dcsr.pipeline.config import DEV_VARIANT, dataset_questions, train_datasets, variant_root
from dcsr.pipeline.targets import Targets


class Plan(Targets):
    """The answers to the rules' questions about one config: every rule's inputs and
    command-line arguments, over what the config asks to make (:class:`~dcsr.pipeline.targets.Targets`)
    and what it says (:class:`~dcsr.pipeline.config_view.ConfigView`, which takes ``config`` and
    ``basedir``)."""

    def __init__(self, config: dict, basedir: str | Path = "."):
        super().__init__(config, basedir)
        # index.factory and index.search_params at each indexed passage encoder's width, and the
        # vectors the factory trains on (dcsr.pipeline.checks.check_indexes)
        check_indexes(self.config, self.indexed(), self.is_dcsr)

    def indexed(self) -> list[tuple[str, str]]:
        """``(corpus, passage model)`` of every shard index the plan builds: the dense runs' and
        the dense miners' (``negatives_from``, over the corpora of what their students train on)."""
        pairs = {(corpus, pmodel) for corpus, _, pmodel, _ in self.dense_runs()}
        for m in self.config["models"].values():
            if "negatives_from" in m:
                pairs |= {(self.corpus_of(ds), m["negatives_from"]) for ds in train_datasets(m)}
        return sorted(pairs)

    # ------------------------------------------------------------------ rule inputs
    def train_inputs(self, wc):
        ds = train_datasets(self.config["models"][wc.model])[0]
        dev = self.paths.MERGED_DEV.format(model=wc.model) if self.trains_on_several(wc.model) else self.dataset_file(ds, "dev")
        inputs = {"train": self.model_training_file(wc.model), "dev": dev}
        if self.is_dcsr(wc.model):  # DCSR's sentence spans of the passages it trains on (one corpus: dcsr.pipeline.config checks it)
            inputs["sentences"] = self.paths.SENTENCES.format(corpus=self.corpus_of(ds))
        return {**inputs, **self.init_inputs(wc)}

    def export_inputs(self, wc):
        """export_model's input, the saved model; a DCSR model is refused here, before it is
        trained: its sentence vectors are in neither export format (dcsr.models.export)."""
        if self.is_dcsr(wc.model):
            raise InputError(f"config: models.{wc.model}.method", f"dcsr: model {wc.model} encodes a passage as one "
                             "vector per sentence, which neither DPR's Hugging Face format nor sentence-transformers "
                             "holds (one vector per text); only method dpr exports")
        return {"model": self.paths.MODEL_DIR.format(model=wc.model)}

    def export_pyserini_inputs(self, wc):
        """export_pyserini's inputs: ``wc.pmodel``'s shard indexes of ``wc.corpus`` and their ids (a
        DCSR model's: and sentence numbers), and the model, whose question encoder goes beside the
        index. Several shards of a factory other than Flat do not merge into the one index Pyserini
        reads (dcsr.retrieval.pyserini_export): refused here, before anything is built."""
        shards, factory = self.shards(wc.corpus), self.config["index"]["factory"]
        if len(shards) > 1 and factory != "Flat":
            raise InputError("config: index.factory", f"{factory!r}: corpus {wc.corpus} is indexed in {len(shards)} "
                             "shards, and only Flat shards merge into the one index Pyserini reads (each shard of "
                             "another factory trained its own codes or graph); export with index.factory: Flat or "
                             "one shard (embed.shards: 1)")
        inputs = {"model": self.paths.MODEL_DIR.format(model=wc.pmodel)}
        patterns = {"indexes": self.paths.SHARD_INDEX, "ids": self.paths.SHARD_IDS}
        if self.is_dcsr(wc.pmodel):  # its docids name sentences: <passage id>#<sentence number>
            patterns["sentence_numbers"] = self.paths.SHARD_SENTENCE_NUMBERS
        for key, pattern in patterns.items():
            inputs[key] = [pattern.format(corpus=wc.corpus, pmodel=wc.pmodel, shard=i) for i in shards]
        if "beir" in self.config["corpora"][wc.corpus]:  # docid: the documents' _id, as the qrels name them
            inputs["doc_ids"] = self.paths.BEIR_DOC_IDS.format(corpus=wc.corpus)
        return inputs

    def export_pyserini_args(self, wc, input) -> list[str]:
        """``--sentence-numbers`` and a DCSR model's shard files; ``--doc-ids`` and a BEIR corpus's
        id mapping; nothing else."""
        keys = input.keys()
        return ((["--sentence-numbers", *input.sentence_numbers] if "sentence_numbers" in keys else [])
                + (["--doc-ids", input.doc_ids] if "doc_ids" in keys else []))

    def embed_shard_inputs(self, wc):
        # the corpus's passage store: the job reads its shard's rows only
        inputs = {"model": self.paths.MODEL_DIR.format(model=wc.pmodel), **self.store_inputs(wc)}
        if self.is_dcsr(wc.pmodel):  # one vector per sentence of the sentence table
            inputs["sentences"] = self.paths.SENTENCES.format(corpus=wc.corpus)
        return inputs

    def hasans_args(self, wc):
        """merge_runs' HasAns flags: none for DPR; a DCSR run takes its temperature from the config
        or from the dev choice (dcsr.temperature: dev; its merged dev run too), else 1. A function
        of the wildcards alone, not of ``input``: Snakemake records such a param, so a changed
        temperature reruns the merge (it leaves out one that reads ``input``, as derived)."""
        if not self.is_dcsr(wc.pmodel):
            return []
        chosen = self.temperature_file(wc)
        if chosen is not None:
            return ["--hasans", "--temperature-file", chosen]
        t = self.config["dcsr"]["temperature"]
        return ["--hasans", "--temperature", str(1.0 if t == "dev" else t)]

    def temperature_file(self, wc) -> str | None:
        """Where a merge's temperature was chosen on dev questions (dcsr.temperature: dev): its own
        run's choice, or, for the merged dev run, its test run's; else None."""
        if self.temperature_on_dev(wc.pmodel, wc.dataset):
            return self.paths.TEMPERATURE.format(corpus=wc.corpus, qmodel=wc.qmodel, pmodel=wc.pmodel,
                                                 dataset=wc.dataset)
        if wc.dataset.endswith(DEV_VARIANT) and self.temperature_on_dev(wc.pmodel, wc.dataset[:-len(DEV_VARIANT)]):
            # the merged dev run (a hybrid's weight is chosen on it) ranks with the temperature the
            # test run uses, chosen on the dev questions' sentence hits, not on this merged run
            return self.paths.TEMPERATURE.format(corpus=wc.corpus, qmodel=wc.qmodel, pmodel=wc.pmodel,
                                                 dataset=wc.dataset[:-len(DEV_VARIANT)])
        return None

    def temperature_inputs(self, wc):
        if (wc.corpus, wc.qmodel, wc.pmodel, wc.dataset + DEV_VARIANT) not in self.dense_runs():
            raise InputError("config", f"no dev run to choose the temperature of {wc.qmodel} x {wc.pmodel} on {wc.dataset}")
        # the test questions too: the dev questions must not be among them (check_dev_disjoint)
        return {**self.run_inputs(wc, wc.dataset + DEV_VARIANT), "test_questions": self.dataset_file(wc.dataset, "test")}

    def own_dev_split(self, dataset):
        """Whether ``dataset``'s dev variant is the dataset's own dev split (generated by the
        pipeline) rather than a ``<dataset>.dev`` the config names itself."""
        return bool(self.config["datasets"].get(dataset + DEV_VARIANT, {}).get("dev_of"))

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
        # each shard's embedding stats: the merge refuses shards embedded as different kinds
        inputs["shard_stats"] = [self.paths.SHARD_STATS.format(corpus=wc.corpus, pmodel=wc.pmodel, shard=i)
                                 for i in self.shards(wc.corpus)]
        if (chosen := self.temperature_file(wc)) is not None:
            inputs["temperature"] = chosen
        return inputs

    def run_inputs(self, wc, dataset):
        """What a merge of ``wc.pmodel``'s shard hits for ``dataset``'s questions reads: every shard's
        hits, the questions, and the passage store to score them."""
        return {
            "hits": [self.paths.SHARD_HITS_DIR.format(corpus=wc.corpus, pmodel=wc.pmodel, shard=i) for i in self.shards(wc.corpus)],
            "questions": self.dataset_file(dataset, "test"),
            **self.store_inputs(wc),
            **self.judgment_inputs(wc),
        }

    def gold_args(self, wc):
        """How a run's scoring judges it beyond answers: ``--gold DEV_JSON`` when its test set is a
        dataset's dev questions (whose DPR dev JSON knows each question's gold passages: standard
        measures against them too); ``--qrels QRELS --query-ids IDS --doc-ids IDS`` for a BEIR test
        set, measured against its qrels alone (dcsr.evaluation.metrics.evaluate_qrels_run); else
        nothing."""
        if self.is_beir(wc.dataset):
            files = self.beir_files(wc.dataset)
            return ["--qrels", files["qrels"], "--query-ids", files["query_ids"], "--doc-ids", files["doc_ids"]]
        if dataset_questions(self.config, wc.dataset) != "dev":
            return []
        return ["--gold", self.dataset_file(variant_root(self.config, wc.dataset), "dev")]

    def original_id_inputs(self, wc):
        """original_id_run's inputs: the run, and the test set's and corpus's id mappings."""
        files = self.beir_files(wc.dataset)
        run = self.paths.ORIGINAL_ID_RUN.format(**wc).removesuffix(".original-ids.run") + ".trec"
        return {"run": run, "query_ids": files["query_ids"], "doc_ids": files["doc_ids"]}

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

    def sentence_depth_args(self, wc):
        """DCSR: search the top 100 x k sentences (k from the config, else the corpus mean, from the
        sentence table's stats, an input). Of the wildcards alone, so that Snakemake records it and
        a changed k reruns the search (:meth:`hasans_args`)."""
        if not self.is_dcsr(wc.pmodel):
            return []
        k = self.config["dcsr"]["sentences_per_passage"]
        return (["--sentences-per-passage", str(k)] if k is not None
                else ["--sentence-stats", self.paths.SENTENCE_STATS.format(corpus=wc.corpus)])
