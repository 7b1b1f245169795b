# Top-k answer recall of the BM25 runs, with DPR's matching rules, per question kept. (Dense
# runs are scored by merge_runs, in the job that writes them.)


rule evaluate_topk:
    wildcard_constraints:
        qmodel="bm25",
        pmodel="bm25",
    input:
        run=RUN,
        questions=lambda wc: dataset_file(wc.dataset, "test"),
        corpus=lambda wc: corpus_tsv(wc.corpus),
    output:
        metrics=METRICS,
        questions=QUESTION_RESULTS,
    log:
        log_path("evaluate_topk", "{corpus}/{qmodel}/{pmodel}/{dataset}"),
    benchmark:
        bench_path("evaluate_topk", "{corpus}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=f"{SCRIPTS}/evaluate_topk.py",
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: match_type(wc.dataset),
    threads: 1
    resources:
        mem_mb=resources_for("evaluate_topk", "mem_mb"),
        runtime=resources_for("evaluate_topk", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --run {input.run} --questions {input.questions} --corpus {input.corpus}"
        " --metrics {output.metrics} --per-question {output.questions} --ks {params.ks}"
        " --match {params.match} 2> {log}"
