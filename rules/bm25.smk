# BM25 with Anserini (the jar that the pyserini wheel ships): index the corpus, mine hard
# negatives for training questions as DPR did, and retrieve for the test questions.


rule index_bm25:
    input:
        corpus=lambda wc: plan.corpus_tsv(wc.corpus),
    output:
        directory(BM25_INDEX),
    log:
        log_path("index_bm25", "{corpus}"),
    benchmark:
        bench_path("index_bm25", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/index_bm25.py",
        code=plan.code_version("index_bm25.py"),
        heap=lambda wc, resources: f"{int(resources.mem_mb * 0.75)}m",
    threads: config["bm25"]["threads"]
    resources:
        mem_mb=plan.resources_for("index_bm25", "mem_mb"),
        runtime=plan.resources_for("index_bm25", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --corpus {input.corpus:q} --index {output:q} --threads {threads:q} --memory {params.heap:q} 2> {log:q}"


rule mine_bm25_negatives:
    input:
        train=lambda wc: plan.dataset_file(wc.dataset, "train"),
        corpus=lambda wc: plan.corpus_tsv(plan.corpus_of(wc.dataset)),
        index=lambda wc: BM25_INDEX.format(corpus=plan.corpus_of(wc.dataset)),
    output:
        MINED_TRAIN,
    log:
        log_path("mine_bm25_negatives", "{dataset}"),
    benchmark:
        bench_path("mine_bm25_negatives", "{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/mine_bm25_negatives.py",
        code=plan.code_version("mine_bm25_negatives.py"),
        negatives=config["bm25"]["negatives"],
        depth=config["bm25"]["depth"],
        k1=config["bm25"]["k1"],
        b=config["bm25"]["b"],
        match=lambda wc: plan.match_type(wc.dataset),
        heap=lambda wc, resources: f"{int(resources.mem_mb * 0.75)}m",
    threads: config["bm25"]["threads"]
    resources:
        mem_mb=plan.resources_for("mine_bm25_negatives", "mem_mb"),
        runtime=plan.resources_for("mine_bm25_negatives", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --train {input.train:q} --corpus {input.corpus:q} --index {input.index:q}"
        " --output {output:q} --negatives {params.negatives:q} --depth {params.depth:q}"
        " --match-type {params.match:q} --k1 {params.k1:q} --b {params.b:q} --threads {threads:q}"
        " --memory {params.heap:q} 2> {log:q}"


rule search_bm25:
    input:
        index=BM25_INDEX,
        questions=lambda wc: plan.dataset_file(wc.dataset, "test"),
    output:
        RUN.replace("{qmodel}/{pmodel}", "bm25/bm25"),
    log:
        log_path("search_bm25", "{corpus}/{dataset}"),
    benchmark:
        bench_path("search_bm25", "{corpus}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/search_bm25.py",
        code=plan.code_version("search_bm25.py"),
        k=config["bm25"]["k"],
        k1=config["bm25"]["k1"],
        b=config["bm25"]["b"],
        heap=lambda wc, resources: f"{int(resources.mem_mb * 0.75)}m",
    threads: config["bm25"]["threads"]
    resources:
        mem_mb=plan.resources_for("search_bm25", "mem_mb"),
        runtime=plan.resources_for("search_bm25", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --index {input.index:q} --questions {input.questions:q}"
        " --output {output:q} --k {params.k:q} --k1 {params.k1:q} --b {params.b:q}"
        " --threads {threads:q} --memory {params.heap:q} 2> {log:q}"
