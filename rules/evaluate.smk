# A corpus's passage store: scoring a run reads the passages it retrieved by id, and an
# embedding job its shard's rows, instead of streaming the whole corpus (at 21M passages,
# minutes per job; the papers' matrix has 544 runs and 836 shard embeddings).


rule passage_store:
    input:
        corpus=lambda wc: plan.corpus_tsv(wc.corpus),
    output:
        **STORE,
    log:
        log_path("passage_store", "{corpus}"),
    benchmark:
        bench_path("passage_store", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/build_passage_store.py",
        code=plan.code_version("build_passage_store.py"),
        store=lambda wc, output: str(Path(output.ids).parent),
    threads: 1
    resources:
        mem_mb=plan.resources_for("passage_store", "mem_mb"),
        runtime=plan.resources_for("passage_store", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --corpus {input.corpus:q} --output {params.store:q} 2> {log:q}"


# Top-k answer recall of the BM25 runs, with DPR's matching rules, per question kept; a BEIR test
# set's runs are measured against its qrels instead (plan.gold_args). (Dense runs are scored by
# merge_runs, in the job that writes them.)


rule evaluate_topk:
    input:
        unpack(plan.store_inputs),
        unpack(plan.judgment_inputs),
        run=RUN,
        questions=lambda wc: plan.dataset_file(wc.dataset, "test"),
    output:
        metrics=METRICS,
        questions=QUESTION_RESULTS,
    wildcard_constraints:
        qmodel="bm25",
        pmodel="bm25",
    log:
        log_path("evaluate_topk", "{corpus}/{qmodel}/{pmodel}/{dataset}"),
    benchmark:
        bench_path("evaluate_topk", "{corpus}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/evaluate_topk.py",
        code=plan.code_version("evaluate_topk.py"),
        store=lambda wc, input: str(Path(input.store_ids).parent),
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        bad_patterns=plan.bad_pattern_args,
        gold=plan.gold_args,
    threads: 1
    resources:
        mem_mb=plan.resources_for("evaluate_topk", "mem_mb"),
        runtime=plan.resources_for("evaluate_topk", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --run {input.run:q} --questions {input.questions:q} --corpus {params.store:q}"
        " --metrics {output.metrics:q} --per-question {output.questions:q} --ks {params.ks:q}"
        " --match {params.match:q} {params.bad_patterns:q} {params.gold:q} 2> {log:q}"


# Answer-match qrels pooled over a table's runs of a test set (TREC pooling: each run's judged hits,
# to the depth it was judged at: the deepest top-k, and at least the measures' cutoff 10), so that
# every row's standard measures (tables.<t>.measures) are computed against the same judgments, and
# runs made for anything else (another table, the attribution matrix, claims' seeds) change none.
rule pool_qrels:
    input:
        lambda wc: plan.pool(wc.table, wc.corpus, wc.dataset),
    output:
        qrels=POOLED_QRELS,
        info=POOL_INFO,
    wildcard_constraints:
        table=plan.one_of(list(config["tables"])),
    log:
        log_path("pool_qrels", "{table}/{corpus}/{dataset}"),
    benchmark:
        bench_path("pool_qrels", "{table}/{corpus}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/pool_qrels.py",
        code=plan.code_version("pool_qrels.py"),
        depth=judged_depth(config["evaluate"]["ks"]),
    threads: 1
    resources:
        mem_mb=plan.resources_for("pool_qrels", "mem_mb"),
        runtime=plan.resources_for("pool_qrels", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --depth {params.depth:q} --qrels {output.qrels:q} --info {output.info:q}"
        " {input:q} 2> {log:q}"


# A BEIR test set's run (BM25, a dense pair or a hybrid) with the collection's original query and
# document ids, beside it, for its own qrels and tools (trec_eval, ir_measures, BEIR): the runs
# are scored the same way in the jobs that write them (dcsr.evaluation.metrics.evaluate_qrels_run).
rule original_id_run:
    input:
        unpack(plan.original_id_inputs),
    output:
        ORIGINAL_ID_RUN,
    wildcard_constraints:
        corpus=plan.one_of(plan.beir_corpora()),
        dataset=plan.one_of(plan.beir_datasets()),
        retriever=r"(hybrid-(linear|rrf)/)?[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*",
    log:
        log_path("original_id_run", "{corpus}/{retriever}/{dataset}"),
    benchmark:
        bench_path("original_id_run", "{corpus}/{retriever}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/prepare_beir.py",
        code=plan.code_version("prepare_beir.py"),
    threads: 1
    resources:
        mem_mb=plan.resources_for("original_id_run", "mem_mb"),
        runtime=plan.resources_for("original_id_run", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} run --run {input.run:q} --query-ids {input.query_ids:q} --doc-ids {input.doc_ids:q}"
        " --output {output:q} 2> {log:q}"
