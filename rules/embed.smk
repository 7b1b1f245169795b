# Dense vectors: the corpus in independent shards (one job each) through a passage
# encoder (DPR: a vector per passage; DCSR: a vector per sentence), and each test set's
# questions through a question encoder.


rule embed_shard:
    input:
        unpack(plan.embed_shard_inputs),
    output:
        vectors=SHARD_VECTORS,
        ids=SHARD_IDS,
        sentence_numbers=SHARD_SENTENCE_NUMBERS,
        stats=SHARD_STATS,
    wildcard_constraints:
        pmodel=DENSE_MODEL,
    log:
        log_path("embed_shard", "{corpus}/{pmodel}/{shard}"),
    benchmark:
        bench_path("embed_shard", "{corpus}/{pmodel}/{shard}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/embed_shard.py",
        code=plan.code_version("embed_shard.py"),
        store=lambda wc, input: str(Path(input.store_ids).parent),
        shards=lambda wc: len(plan.shards(wc.corpus)),
        batch_size=config["embed"]["batch_size"],
        fp16="--fp16" if config["embed"]["fp16"] else "",
        precision=config["embed"]["precision"],
        backend=config["embed"]["backend"],
        sentences=lambda wc, input: ["--sentences", input.sentences] if plan.is_dcsr(wc.pmodel) else [],
    threads: plan.threads_for("embed_shard", 2)
    resources:
        mem_mb=plan.resources_for("embed_shard", "mem_mb"),
        runtime=plan.resources_for("embed_shard", "runtime"),
        gpu=lambda wc: plan.gpu_resource("embed_shard", gpus_here()),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python -m dcsr.pipeline.gpus {resources.gpu:q} --"
        " python {params.script:q} --model {input.model:q} --corpus {params.store:q} --shard {wildcards.shard:q}"
        " --num-shards {params.shards:q} --batch-size {params.batch_size:q} {params.fp16:q} --precision {params.precision:q}"
        " --backend {params.backend:q}"
        " --vectors {output.vectors:q} --ids {output.ids:q} --sentence-numbers {output.sentence_numbers:q}"
        " --stats {output.stats:q}"
        " {params.sentences:q} 2> {log:q}"


rule embed_questions:
    input:
        unpack(plan.embed_questions_inputs),
    output:
        directory(QUERY_DIR),
    wildcard_constraints:
        qmodel=DENSE_MODEL,
    log:
        log_path("embed_questions", "{qmodel}"),
    benchmark:
        bench_path("embed_questions", "{qmodel}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/embed_questions.py",
        code=plan.code_version("embed_questions.py"),
        sets=plan.embed_questions_args,
        precision=config["embed"]["precision"],
    threads: plan.threads_for("embed_questions", 2)
    resources:
        mem_mb=plan.resources_for("embed_questions", "mem_mb"),
        runtime=plan.resources_for("embed_questions", "runtime"),
        gpu=lambda wc: plan.gpu_resource("embed_questions", gpus_here()),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python -m dcsr.pipeline.gpus {resources.gpu:q} --"
        " python {params.script:q} --model {input.model:q} {params.sets:q} --precision {params.precision:q} 2> {log:q}"
