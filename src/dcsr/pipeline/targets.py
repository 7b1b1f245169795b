"""What a config asks the pipeline to make: each table's cells and runs, the claims ledger's
seeds and runs, the hybrid fusions, the encoder-attribution cells and outputs, and the final
targets (``Plan.final_outputs``). The middle of :class:`dcsr.pipeline.plan.Plan`, over
:class:`dcsr.pipeline.config_view.ConfigView`."""

from __future__ import annotations

import functools

from dcsr.attribution.analysis import sweep_model_name
from dcsr.errors import InputError
from dcsr.evaluation.tables import table_cells
from dcsr.pipeline.config import ATTRIBUTION_METRICS, DEV_VARIANT, claim_pair, json_arg, model_init, model_seeds
from dcsr.pipeline.config_view import ConfigView


class Targets(ConfigView):
    """Tables, claims, hybrids and the attribution analysis, as the files that make them."""

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
            inputs["runs"] = [c["run"] for c in cells if "qrels" in c]
            inputs["qrels"] = sorted({c["qrels"] for c in cells if "qrels" in c})
        return inputs

    def table_spec_cells(self, table):
        """make_table's cells: each cell's pair, dataset, fusion and metrics file; with
        ``measures``, its TREC run and its test set's pooled qrels (not for a BEIR test set: its
        metrics are measured against its own qrels already)."""
        measures = bool(self.config["tables"][table].get("measures"))
        return [{"qmodel": cell.qmodel, "pmodel": cell.pmodel, "dataset": cell.dataset, "fusion": cell.fusion,
                 "metrics": self.cell_file(c, cell, "metrics"),
                 **({"run": self.cell_file(c, cell, "run"),
                     "qrels": self.paths.POOLED_QRELS.format(table=table, corpus=c, dataset=cell.dataset)}
                    if measures and not self.is_beir(cell.dataset) else {})}
                for c, cell in self.table_cells(table)]

    def table_paper_names(self, table) -> dict:
        """``{column: paper_name}`` of a table's columns (test sets): what make_table looks the
        paper's cells up by, and all it records of the datasets, so that a dataset added for
        another table reruns no table but its own."""
        columns = dict.fromkeys(cell.column for _, cell in self.table_cells(table))
        return {d: self.config["datasets"].get(d, {}).get("paper_name") for d in columns}

    def original_id_runs(self):
        """Every run of a BEIR test set that a table or the attribution matrix makes, with the
        collection's original ids (``ORIGINAL_ID_RUN``, beside the run): for its own tools."""
        runs = [self.cell_file(c, cell, "run") for table in self.config["tables"] for c, cell in self.table_cells(table)
                if self.is_beir(cell.dataset)]
        if self.attribution():
            runs += [self.paths.RUN.format(corpus=self.corpus_of(t), qmodel=q, pmodel=p, dataset=t)
                     for q, p, t in self.attribution_cells() if self.is_beir(t)]
        return [r.removesuffix(".trec") + ".original-ids.run" for r in dict.fromkeys(runs)]

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

    def seeds_notes(self, models) -> list[str]:
        """A note for a table with a model trained on several seeds (``seeds: n``): its cells
        show the first seed's run, while the claims ledger compares every seed."""
        seeded = sorted((m, int(self.config["models"][m]["seeds"])) for m in models
                        if int(self.config["models"].get(m, {}).get("seeds", 1)) > 1)
        if not seeded:
            return []
        claimed = self.claim_models()
        compared = ("the claims ledger compares every seed" if all(m in claimed for m, _ in seeded) else
                    "the claims ledger compares every seed of a model a claim names, and no output reads the "
                    "other seeds of the rest")
        return [f"Trained on several seeds ({', '.join(f'{m}: {n}' for m, n in seeded)}): each cell of such a model "
                f"is its first seed's run; {compared}."]

    def table_notes(self, table):
        models = {m for _, cell in self.table_cells(table) for m in (cell.qmodel, cell.pmodel)}
        return self.plumbing_notes(models) + self.seeds_notes(models)

    def claim_models(self) -> set[str]:
        """Every model a claim of the config names, on either side (question and passage encoders)."""
        return {m for c in self.config.get("claims", []) for side in ("baseline", "method")
                for m in claim_pair(c[side])}

    def claims_notes(self):
        return self.plumbing_notes(self.claim_models())

    def pool(self, table, corpus, dataset):
        """The per-question results of the runs ``table`` makes on ``dataset``'s questions over
        ``corpus``: its cells (BM25, dense pairs, hybrids) and the runs its hybrids fuse. Their
        judged hits, pooled, are the qrels that the table's standard measures of that test set
        are computed against (TREC pooling). The pool is the table's own: runs the config makes
        for other tables, the attribution matrix or claims' seeds (an overlay adding seed runs,
        say) leave it, and so the table's numbers, as they were."""
        runs = {self.cell_file(c, cell, "questions") for c, cell in self.table_cells(table)
                if (c, cell.dataset) == (corpus, dataset) and cell.fusion}
        runs |= {self.paths.QUESTION_RESULTS.format(corpus=c, qmodel=q, pmodel=p, dataset=d)
                 for c, q, p, d in self.table_runs(table) if (c, d) == (corpus, dataset)}
        if not runs:
            raise InputError("config", f"table {table!r} searches no question of {dataset!r} on corpus {corpus!r}, "
                                       "so there is nothing to pool qrels from")
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
        # the test questions too: the dev questions must not be among them (check_dev_disjoint)
        return {**self.fused_runs(wc, wc.dataset + DEV_VARIANT), "test_questions": self.dataset_file(wc.dataset, "test")}

    def judgment_inputs(self, wc):
        """What scoring a run of a BEIR test set reads beside its questions: the qrels and both id
        mappings (``qrels``, ``query_ids``, ``doc_ids``); nothing for an answer-judged test set."""
        if not self.is_beir(wc.dataset):
            return {}
        return {k: v for k, v in self.beir_files(wc.dataset).items() if k != "queries"}

    def fused_runs(self, wc, dataset):
        run = self.paths.RUN
        return {"bm25": run.format(corpus=wc.corpus, qmodel="bm25", pmodel="bm25", dataset=dataset),
                "dense": run.format(corpus=wc.corpus, qmodel=wc.qmodel, pmodel=wc.pmodel, dataset=dataset),
                "questions": self.dataset_file(dataset, "test"), **self.store_inputs(wc), **self.judgment_inputs(wc)}

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
        out += self.original_id_runs()
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
            if claim.get("scaled_metric"):  # its size computes the scaled k (dcsr.evaluation.claims.scaled_k)
                item["corpus_ids"] = self.paths.STORE["ids"].format(corpus=self.corpus_of(claim["test_set"]))
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
            "metrics": a.get("metrics", list(ATTRIBUTION_METRICS)),
            "families": a["families"],
            "paper_names": {d: ds.get("paper_name") for d, ds in self.config["datasets"].items()},
            "bm25": a.get("bm25", True),
            # BEIR test sets: judged by their qrels (nDCG@10 (qrels), ...), not by the top-k metrics
            "qrels_test_sets": [t for t in a["test_sets"] if self.is_beir(t)],
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

    # ------------------------------------------------------------------ every dense run
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
