# FAISS: one index per vector shard; one search job per passage-encoder shard, which loads the
# shard index once and searches every question set paired with that encoder (the tables' rows
# and the attribution pairs); an exact top-k merge over the shards into one TREC run per
# (question encoder, passage encoder, test set), scored in the same job (top-k answer recall). For a DCSR passage
# encoder the vectors are sentences: each shard returns its top 100 x k sentences and the
# merge ranks passages by HasAns (score normalization, DCSR Section 3.3).


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
        script=f"{SCRIPTS}/index_shard.py",
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
        "python {params.script} --vectors {input.vectors} --index {output}"
        " --factory '{params.factory}' --train-size {params.train_size} --seed {params.seed} 2> {log}"


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
        script=f"{SCRIPTS}/search_shard.py",
        searches=plan.search_args,
        k=config["search"]["k"],
        gpu=str(config["index"]["gpu"]).lower(),
        depth=plan.sentence_depth_args,
    threads: plan.threads_for("search_shard", 2)
    resources:
        mem_mb=plan.resources_for("search_shard", "mem_mb"),
        runtime=plan.resources_for("search_shard", "runtime"),
        gpu=config["index"]["gpus"],
    conda:
        "../envs/gpu.yaml"
    shell:
        "python {params.script} --index {input.index} --ids {input.ids} {params.searches}"
        " --k {params.k} --gpu {params.gpu} {params.depth} 2> {log}"


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
        script=f"{SCRIPTS}/merge_runs.py",
        store=lambda wc, input: str(Path(input.store_ids).parent),
        hits=plan.merge_hit_files,
        k=config["search"]["k"],
        tag=lambda wc: f"{wc.qmodel}--{wc.pmodel}",
        hasans=plan.hasans_args,
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        gold=plan.gold_args,
    threads: 1
    resources:
        mem_mb=plan.resources_for("merge_runs", "mem_mb"),
        runtime=plan.resources_for("merge_runs", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --output {output.run} --k {params.k} --tag {params.tag} {params.hasans}"
        " --questions {input.questions} --corpus {params.store} --metrics {output.metrics}"
        " --per-question {output.questions} --ks {params.ks} --match {params.match} {params.gold} {params.hits} 2> {log}"


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
        script=f"{SCRIPTS}/choose_temperature.py",
        store=lambda wc, input: str(Path(input.store_ids).parent),
        hits=plan.temperature_hit_files,
        k=config["search"]["k"],
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
    threads: 1
    resources:
        mem_mb=plan.resources_for("choose_temperature", "mem_mb"),
        runtime=plan.resources_for("choose_temperature", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --questions {input.questions} --corpus {params.store} --k {params.k}"
        " --ks {params.ks} --match {params.match} --output {output} {params.hits} 2> {log}"


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
        script=f"{SCRIPTS}/choose_fusion_weight.py",
        store=lambda wc, input: str(Path(input.store_ids).parent),
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
    threads: 1
    resources:
        mem_mb=plan.resources_for("choose_fusion_weight", "mem_mb"),
        runtime=plan.resources_for("choose_fusion_weight", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --bm25 {input.bm25} --dense {input.dense} --questions {input.questions}"
        " --corpus {params.store} --ks {params.ks} --match {params.match} --output {output} 2> {log}"


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
        script=f"{SCRIPTS}/fuse_runs.py",
        store=lambda wc, input: str(Path(input.store_ids).parent),
        weight=lambda wc, input: f"--weight-file {input.weight}" if wc.fusion == "linear" else "",
        k=config["search"]["k"],
        ks=",".join(str(k) for k in config["evaluate"]["ks"]),
        match=lambda wc: plan.match_type(wc.dataset),
        gold=plan.gold_args,
    threads: 1
    resources:
        mem_mb=plan.resources_for("fuse_runs", "mem_mb"),
        runtime=plan.resources_for("fuse_runs", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --bm25 {input.bm25} --dense {input.dense} --fusion {wildcards.fusion}"
        " {params.weight} --k {params.k} --output {output.run} --questions {input.questions}"
        " --corpus {params.store} --metrics {output.metrics} --per-question {output.questions}"
        " --ks {params.ks} --match {params.match} {params.gold} 2> {log}"
