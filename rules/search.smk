# FAISS: one index per vector shard; one search job per passage-encoder shard, which loads the
# shard index once and searches every question set paired with that encoder (the tables' rows
# and the attribution pairs); an exact top-k merge over the shards into one TREC run per
# (question encoder, passage encoder, test set), scored in the same job (top-k answer recall), which refuses
# shards embedded as different kinds (their shard-<n>.json: precision, backend). For a DCSR passage
# encoder the vectors are sentences: each shard returns its top 100 x k sentences and the
# merge ranks passages by HasAns (score normalization, DCSR Section 3.3).
# index.search_params (nprobe, efSearch, ...) is a search-time setting: a param of search_shard
# only, so changing it searches again and leaves the indexes as they are (checked at DAG build
# by the plan, against an empty index of index.factory).


rule index_shard:
    input:
        vectors=SHARD_VECTORS,
    output:
        SHARD_INDEX,
    wildcard_constraints:
        pmodel=DENSE_MODEL,
    log:
        log_path("index_shard", "{corpus}/{pmodel}/{shard}"),
    benchmark:
        bench_path("index_shard", "{corpus}/{pmodel}/{shard}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/index_shard.py",
        code=plan.code_version("index_shard.py"),
        factory=config["index"]["factory"],
        train_size=config["index"]["train_size"],
        seed=config["seed"],
    threads: plan.threads_for("index_shard", 2)
    resources:
        mem_mb=plan.resources_for("index_shard", "mem_mb"),
        runtime=plan.resources_for("index_shard", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --vectors {input.vectors:q} --index {output:q}"
        " --factory {params.factory:q} --train-size {params.train_size:q} --seed {params.seed:q} 2> {log:q}"


rule search_shard:
    input:
        unpack(plan.search_shard_inputs),
    output:
        temp(directory(SHARD_HITS_DIR)),
    wildcard_constraints:
        pmodel=DENSE_MODEL,
    log:
        log_path("search_shard", "{corpus}/{pmodel}/{shard}"),
    benchmark:
        bench_path("search_shard", "{corpus}/{pmodel}/{shard}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/search_shard.py",
        code=plan.code_version("search_shard.py"),
        searches=plan.search_args,
        k=config["search"]["k"],
        gpu=str(config["index"]["gpu"]).lower(),
        search_params=plan.search_params_args,
        depth=plan.sentence_depth_args,
    threads: plan.threads_for("search_shard", 2)
    resources:
        mem_mb=plan.resources_for("search_shard", "mem_mb"),
        runtime=plan.resources_for("search_shard", "runtime"),
        gpu=lambda wc: plan.gpu_resource("search_shard", gpus_here()),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python -m dcsr.pipeline.gpus {resources.gpu:q} --"
        " python {params.script:q} --index {input.index:q} --ids {input.ids:q} {params.searches:q}"
        " --k {params.k:q} --gpu {params.gpu:q} {params.search_params:q} {params.depth:q} 2> {log:q}"


rule merge_runs:
    input:
        unpack(plan.merge_inputs),
    output:
        run=RUN,
        metrics=METRICS,
        questions=QUESTION_RESULTS,
    wildcard_constraints:
        qmodel=DENSE_MODEL,
        pmodel=DENSE_MODEL,
    log:
        log_path("merge_runs", "{corpus}/{qmodel}/{pmodel}/{dataset}"),
    benchmark:
        bench_path("merge_runs", "{corpus}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/merge_runs.py",
        code=plan.code_version("merge_runs.py"),
        store=lambda wc, input: str(Path(input.store_ids).parent),
        hits=plan.merge_hit_files,
        k=config["search"]["k"],
        tag=lambda wc: f"{wc.qmodel}--{wc.pmodel}",
        hasans=plan.hasans_args,
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        bad_patterns=plan.bad_pattern_args,
        gold=plan.gold_args,
    threads: 1
    resources:
        mem_mb=plan.resources_for("merge_runs", "mem_mb"),
        runtime=plan.resources_for("merge_runs", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --output {output.run:q} --k {params.k:q} --tag {params.tag:q} {params.hasans:q}"
        " --questions {input.questions:q} --corpus {params.store:q} --metrics {output.metrics:q}"
        " --per-question {output.questions:q} --ks {params.ks:q} --match {params.match:q} {params.bad_patterns:q} {params.gold:q}"
        " --shard-stats {input.shard_stats:q} -- {params.hits:q} 2> {log:q}"


# dcsr.temperature: dev: DCSR's HasAns temperature for one run, chosen on the dev questions of
# its test set's dataset (searched as the variant <dataset>.dev), from a grid around T = 1.
rule choose_temperature:
    input:
        unpack(plan.temperature_inputs),
    output:
        TEMPERATURE,
    wildcard_constraints:
        qmodel=DENSE_MODEL,
        pmodel=DENSE_MODEL,
    log:
        log_path("choose_temperature", "{corpus}/{qmodel}/{pmodel}/{dataset}"),
    benchmark:
        bench_path("choose_temperature", "{corpus}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/choose_temperature.py",
        code=plan.code_version("choose_temperature.py"),
        store=lambda wc, input: str(Path(input.store_ids).parent),
        hits=plan.temperature_hit_files,
        k=config["search"]["k"],
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        own_dev=lambda wc: "--own-dev-split" if plan.own_dev_split(wc.dataset) else "",
    threads: 1
    resources:
        mem_mb=plan.resources_for("choose_temperature", "mem_mb"),
        runtime=plan.resources_for("choose_temperature", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --questions {input.questions:q} --test-questions {input.test_questions:q}"
        " {params.own_dev:q} --corpus {params.store:q} --k {params.k:q}"
        " --ks {params.ks:q} --match {params.match:q} --output {output:q} {params.hits:q} 2> {log:q}"


# Hybrid rows (retriever: hybrid): BM25's run fused with a dense run (DPR Table 2's BM25 + DPR),
# scored in the same job. Linear fusion's weight is chosen on the dev questions of the test set's
# dataset (the variant <dataset>.dev), from both retrievers' runs of them.
rule choose_fusion_weight:
    input:
        unpack(plan.fusion_weight_inputs),
    output:
        FUSION_WEIGHT,
    wildcard_constraints:
        qmodel=DENSE_MODEL,
        pmodel=DENSE_MODEL,
    log:
        log_path("choose_fusion_weight", "{corpus}/{qmodel}/{pmodel}/{dataset}"),
    benchmark:
        bench_path("choose_fusion_weight", "{corpus}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/choose_fusion_weight.py",
        code=plan.code_version("choose_fusion_weight.py"),
        store=lambda wc, input: str(Path(input.store_ids).parent),
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        own_dev=lambda wc: "--own-dev-split" if plan.own_dev_split(wc.dataset) else "",
    threads: 1
    resources:
        mem_mb=plan.resources_for("choose_fusion_weight", "mem_mb"),
        runtime=plan.resources_for("choose_fusion_weight", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --bm25 {input.bm25:q} --dense {input.dense:q} --questions {input.questions:q}"
        " --test-questions {input.test_questions:q} {params.own_dev:q} --corpus {params.store:q} --ks {params.ks:q} --match {params.match:q} --output {output:q} 2> {log:q}"


rule fuse_runs:
    input:
        unpack(plan.fuse_inputs),
    output:
        run=HYBRID_RUN,
        metrics=HYBRID_METRICS,
        questions=HYBRID_QUESTIONS,
    wildcard_constraints:
        qmodel=DENSE_MODEL,
        pmodel=DENSE_MODEL,
    log:
        log_path("fuse_runs", "{corpus}/{fusion}/{qmodel}/{pmodel}/{dataset}"),
    benchmark:
        bench_path("fuse_runs", "{corpus}/{fusion}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/fuse_runs.py",
        code=plan.code_version("fuse_runs.py"),
        store=lambda wc, input: str(Path(input.store_ids).parent),
        weight=lambda wc, input: ["--weight-file", input.weight] if wc.fusion == "linear" else [],
        k=config["search"]["k"],
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        bad_patterns=plan.bad_pattern_args,
        gold=plan.gold_args,
    threads: 1
    resources:
        mem_mb=plan.resources_for("fuse_runs", "mem_mb"),
        runtime=plan.resources_for("fuse_runs", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --bm25 {input.bm25:q} --dense {input.dense:q} --fusion {wildcards.fusion:q}"
        " {params.weight:q} --k {params.k:q} --output {output.run:q} --questions {input.questions:q}"
        " --corpus {params.store:q} --metrics {output.metrics:q} --per-question {output.questions:q}"
        " --ks {params.ks:q} --match {params.match:q} {params.bad_patterns:q} {params.gold:q} 2> {log:q}"


# A passage encoder's index of a corpus for Pyserini's FaissSearcher (dcsr.retrieval.pyserini_export):
# the shard indexes as one FAISS `index` (Flat shards merged, one shard of any factory copied),
# `docid` (passage ids; DCSR: <passage id>#<sentence number>), and a DPR model's question encoder
# in the form Pyserini's query encoders load. On request only:
#   snakemake results/export/pyserini/<corpus>/<pmodel>
rule export_pyserini:
    input:
        unpack(plan.export_pyserini_inputs),
    output:
        directory(PYSERINI_EXPORT_DIR),
    wildcard_constraints:
        corpus=plan.one_of(list(config["corpora"])),
        pmodel=plan.one_of(list(config["models"])),
    log:
        log_path("export_pyserini", "{corpus}/{pmodel}"),
    benchmark:
        bench_path("export_pyserini", "{corpus}/{pmodel}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/export_pyserini.py",
        code=plan.code_version("export_pyserini.py"),
        shard_args=plan.export_pyserini_args,
        search_params=plan.search_params_args,
    threads: 1
    resources:
        mem_mb=plan.resources_for("export_pyserini", "mem_mb"),
        runtime=plan.resources_for("export_pyserini", "runtime"),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python {params.script:q} --index {input.indexes:q} --ids {input.ids:q} {params.shard_args:q}"
        " --model {input.model:q} --output {output:q} --name {wildcards.pmodel:q} --corpus {wildcards.corpus:q}"
        " {params.search_params:q} 2> {log:q}"
