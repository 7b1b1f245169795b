# FAISS: one index per vector shard, one search job per (question encoder, passage shard,
# test set), and an exact top-k merge over the shards into a TREC run.


rule index_shard:
    input:
        vectors=SHARD_VECTORS,
    output:
        SHARD_INDEX,
    wildcard_constraints:
        pmodel=DENSE_MODEL,
    log:
        "logs/index_shard/{corpus}/{pmodel}/{shard}.log",
    benchmark:
        bench_path("index_shard", "{corpus}/{pmodel}/{shard}")
    params:
        script=f"{SCRIPTS}/index_shard.py",
        factory=config["index"].get("factory", "Flat"),
        train_size=config["index"].get("train_size", 100000),
        seed=config["seed"],
    threads: 2
    resources:
        mem_mb=resources_for("index_shard", "mem_mb"),
        runtime=resources_for("index_shard", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --vectors {input.vectors} --index {output}"
        " --factory '{params.factory}' --train-size {params.train_size} --seed {params.seed} 2> {log}"


rule search_shard:
    input:
        index=SHARD_INDEX,
        ids=SHARD_IDS,
        queries=QUERY_VECTORS,
    output:
        temp(SHARD_HITS),
    wildcard_constraints:
        qmodel=DENSE_MODEL,
        pmodel=DENSE_MODEL,
    log:
        "logs/search_shard/{corpus}/{qmodel}/{pmodel}/{dataset}/{shard}.log",
    benchmark:
        bench_path("search_shard", "{corpus}/{qmodel}/{pmodel}/{dataset}/{shard}")
    params:
        script=f"{SCRIPTS}/search_shard.py",
        k=config["search"].get("k", 100),
        gpu=str(config["index"].get("gpu", "auto")).lower(),
    threads: 2
    resources:
        mem_mb=resources_for("search_shard", "mem_mb"),
        runtime=resources_for("search_shard", "runtime"),
        gpu=config["index"].get("gpus", 0),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python {params.script} --index {input.index} --ids {input.ids} --queries {input.queries}"
        " --output {output} --k {params.k} --gpu {params.gpu} 2> {log}"


rule merge_runs:
    input:
        lambda wc: expand(SHARD_HITS, shard=shards(), **wc),
    output:
        RUN,
    wildcard_constraints:
        qmodel=DENSE_MODEL,
        pmodel=DENSE_MODEL,
    log:
        "logs/merge_runs/{corpus}/{qmodel}/{pmodel}/{dataset}.log",
    benchmark:
        bench_path("merge_runs", "{corpus}/{qmodel}/{pmodel}/{dataset}")
    params:
        script=f"{SCRIPTS}/merge_runs.py",
        k=config["search"].get("k", 100),
        tag=lambda wc: f"{wc.qmodel}--{wc.pmodel}",
    threads: 1
    resources:
        mem_mb=resources_for("merge_runs", "mem_mb"),
        runtime=resources_for("merge_runs", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --output {output} --k {params.k} --tag {params.tag} {input} 2> {log}"
