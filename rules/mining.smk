# Hard negatives mined by a trained dense checkpoint (DCSR Section 4.5, Tables 3 and 5): the
# miner's question encoder searches every shard index of its passage encoder over the corpus;
# the top hits without an answer that are not positives replace the training set's hard
# negatives (a DCSR miner: sentence-specific negatives), for a second round of training.


rule mine_dense_negatives:
    input:
        unpack(plan.mine_dense_inputs),
    output:
        DENSE_NEGATIVES,
    wildcard_constraints:
        model=plan.one_of(plan.negatives_miners()),
    log:
        log_path("mine_dense_negatives", "{model}/{dataset}"),
    benchmark:
        bench_path("mine_dense_negatives", "{model}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/mine_dense_negatives.py",
        code=plan.code_version("mine_dense_negatives.py"),
        shards=plan.mine_shard_args,
        negatives=config["mining"]["negatives"],
        depth=config["mining"]["depth"],
        match=lambda wc: plan.match_type(wc.dataset),
        batch_size=config["embed"]["batch_size"],
        gpu=str(config["index"]["gpu"]).lower(),
        search_params=plan.search_params_args,
    threads: plan.threads_for("mine_dense_negatives", 2)
    resources:
        mem_mb=plan.resources_for("mine_dense_negatives", "mem_mb"),
        runtime=plan.resources_for("mine_dense_negatives", "runtime"),
        gpu=lambda wc: plan.gpu_resource("mine_dense_negatives", gpus_here()),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python -m dcsr.pipeline.gpus {resources.gpu:q} --"
        " python {params.script:q} --model {input.model:q} --train {input.train:q} --corpus {input.corpus:q}"
        " {params.shards:q} --output {output:q} --negatives {params.negatives:q} --depth {params.depth:q}"
        " --match-type {params.match:q} --batch-size {params.batch_size:q} --gpu {params.gpu:q}"
        " {params.search_params:q} 2> {log:q}"
