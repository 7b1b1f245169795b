# Data, in DPR's formats: the generated demo encyclopedia and its QA datasets, or a SQuAD
# v1.1 JSON (local or downloaded) cut into 100-word passages with its questions split by article.
# The generator is deterministic from the seed, so the corpus and each dataset are made by
# separate jobs that regenerate the same world and keep only their own files.


rule generate_corpus:
    output:
        CORPUS_TSV,
    wildcard_constraints:
        corpus=plan.one_of([c for c, cc in config["corpora"].items() if "generate" in cc]),
    log:
        log_path("generate_corpus", "{corpus}"),
    benchmark:
        bench_path("generate_corpus", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/generate_demo_data.py",
        code=plan.code_version("generate_demo_data.py"),
        n_entities=lambda wc: config["corpora"][wc.corpus]["generate"]["n_entities"],
        size=lambda wc: [a for n in [config["corpora"][wc.corpus]["generate"].get("passages")] if n
                         for a in ("--passages", str(n), "--passages-key", f"corpora.{wc.corpus}.generate.passages")],
        seed=config["seed"],
    threads: 1
    resources:
        mem_mb=plan.resources_for("generate_corpus", "mem_mb"),
        runtime=plan.resources_for("generate_corpus", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --seed {params.seed:q} --n-entities {params.n_entities:q}"
        " {params.size:q} --corpus-out {output:q} 2> {log:q}"


rule generate_dataset:
    output:
        train=GENERATED_TRAIN,
        dev=GENERATED_DEV,
        test=GENERATED_TEST,
    wildcard_constraints:
        dataset=plan.one_of([d for d, ds in config["datasets"].items() if "generated" in ds]),
    log:
        log_path("generate_dataset", "{corpus}/{dataset}"),
    benchmark:
        bench_path("generate_dataset", "{corpus}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/generate_demo_data.py",
        code=plan.code_version("generate_demo_data.py"),
        n_entities=lambda wc: config["corpora"][wc.corpus]["generate"]["n_entities"],
        domain=lambda wc: plan.dataset_cfg(wc.dataset)["generated"],
        seed=config["seed"],
        fractions=lambda wc: [
            a for key, value in config["corpora"][wc.corpus]["generate"].items()
            if key in ("dev_fraction", "test_fraction", "train_per_domain")
            for a in (f"--{key.replace('_', '-')}", str(value))
        ],
    threads: 1
    resources:
        mem_mb=plan.resources_for("generate_dataset", "mem_mb"),
        runtime=plan.resources_for("generate_dataset", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --seed {params.seed:q} --n-entities {params.n_entities:q}"
        " {params.fractions:q} --domain {params.domain:q} --train-out {output.train:q} --dev-out {output.dev:q}"
        " --test-out {output.test:q} 2> {log:q}"


# A SQuAD corpus is built together with its one dataset, which carries the corpus's name
# (config: datasets.<corpus>: {corpus: <corpus>, squad: true}).
rule prepare_squad:
    input:
        unpack(plan.squad_source_inputs),
    output:
        corpus=CORPUS_TSV,
        train=GENERATED_TRAIN.replace("{dataset}", "{corpus}"),
        dev=GENERATED_DEV.replace("{dataset}", "{corpus}"),
        test=GENERATED_TEST.replace("{dataset}", "{corpus}"),
    wildcard_constraints:
        corpus=plan.one_of(plan.squad_corpora()),
    # a URL source (config/squad.yaml) is downloaded here, and compute nodes of clusters often have
    # no internet: it runs where Snakemake runs, as download_resource (a few seconds for SQuAD dev)
    localrule: True
    log:
        log_path("prepare_squad", "{corpus}"),
    benchmark:
        bench_path("prepare_squad", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/prepare_squad.py",
        code=plan.code_version("prepare_squad.py"),
        source=lambda wc: config["corpora"][wc.corpus]["squad"]["source"],
        found=lambda wc, threads: plan.squad_source(wc.corpus),  # not recorded: where the source is
        args=lambda wc: plan.squad_args(wc.corpus),
        download_dir=f"{plan.results}/downloads/squad",
        lock=plan.downloads["lock"],
    threads: 1
    resources:
        mem_mb=plan.resources_for("prepare_squad", "mem_mb"),
        runtime=plan.resources_for("prepare_squad", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --source {params.found:q} {params.args:q} --download-dir {params.download_dir:q}"
        " --lock {params.lock:q}"
        " --corpus-out {output.corpus:q} --train-out {output.train:q} --dev-out {output.dev:q}"
        " --test-out {output.test:q} 2> {log:q}"


# A SQuAD dataset of one group of articles (a "domain"), over the corpus of all articles. It
# waits for the corpus job, which downloads a URL source once for both.
rule prepare_squad_dataset:
    input:
        corpus=CORPUS_TSV,
    output:
        train=GENERATED_TRAIN,
        dev=GENERATED_DEV,
        test=GENERATED_TEST,
    wildcard_constraints:
        corpus=plan.one_of(plan.squad_corpora()),
        dataset=plan.one_of(plan.squad_article_datasets()),
    log:
        log_path("prepare_squad_dataset", "{corpus}/{dataset}"),
    benchmark:
        bench_path("prepare_squad_dataset", "{corpus}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/prepare_squad.py",
        code=plan.code_version("prepare_squad.py"),
        source=lambda wc: config["corpora"][wc.corpus]["squad"]["source"],
        found=lambda wc, threads: plan.squad_source(wc.corpus),  # not recorded: where the source is
        args=lambda wc: plan.squad_args(wc.corpus),
        articles=lambda wc: plan.dataset_cfg(wc.dataset)["squad"]["articles"],
        download_dir=f"{plan.results}/downloads/squad",
        lock=plan.downloads["lock"],  # a URL's file, downloaded by the corpus job, is checked again
    threads: 1
    resources:
        mem_mb=plan.resources_for("prepare_squad_dataset", "mem_mb"),
        runtime=plan.resources_for("prepare_squad_dataset", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --source {params.found:q} {params.args:q} --articles {params.articles:q}"
        " --download-dir {params.download_dir:q} --lock {params.lock:q}"
        " --train-out {output.train:q} --dev-out {output.dev:q} --test-out {output.test:q} 2> {log:q}"


# A subset of another corpus (config: corpora.<name>.subset): its first N passages, or a
# seeded random sample of an exact size, ids and order kept. Gold passages are not forced in
# (the DCSR paper's first 0.1M and 1.05M passages did not keep them). The source is streamed, never loaded.
rule subset_corpus:
    input:
        lambda wc: plan.corpus_tsv(config["corpora"][wc.corpus]["subset"]["of"]),
    output:
        CORPUS_TSV,
    wildcard_constraints:
        corpus=plan.one_of(plan.subset_corpora()),
    log:
        log_path("subset_corpus", "{corpus}"),
    benchmark:
        bench_path("subset_corpus", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/subset_corpus.py",
        code=plan.code_version("subset_corpus.py"),
        how=lambda wc: plan.subset_args(wc.corpus),
    threads: 1
    resources:
        mem_mb=plan.resources_for("subset_corpus", "mem_mb"),
        runtime=plan.resources_for("subset_corpus", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --corpus {input:q} {params.how:q} --output {output:q} 2> {log:q}"


# A dataset's dev questions as a qas TSV, the test set of its variants with `questions: dev`.
rule make_dev_questions:
    input:
        lambda wc: plan.dataset_file(wc.dataset, "dev"),
    output:
        DEV_QUESTIONS,
    wildcard_constraints:
        dataset=plan.one_of(plan.dev_question_datasets()),
    log:
        log_path("make_dev_questions", "{corpus}/{dataset}"),
    benchmark:
        bench_path("make_dev_questions", "{corpus}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/make_dev_questions.py",
        code=plan.code_version("make_dev_questions.py"),
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_dev_questions", "mem_mb"),
        runtime=plan.resources_for("make_dev_questions", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --dev {input:q} --output {output:q} 2> {log:q}"


# A BEIR-format folder (config: corpora.<name>.beir; dcsr.data.beir): corpus.jsonl as the corpus,
# each document's _id given an integer passage id (the mapping written beside it), and each test
# set (datasets.<name>.beir: {split: ...}) as the queries its qrels judge, with the qrels.
rule prepare_beir:
    input:
        lambda wc: str(Path(plan.beir_folder(wc.corpus)) / "corpus.jsonl"),
    output:
        corpus=CORPUS_TSV,
        ids=BEIR_DOC_IDS,
    wildcard_constraints:
        corpus=plan.one_of(plan.beir_corpora()),
    log:
        log_path("prepare_beir", "{corpus}"),
    benchmark:
        bench_path("prepare_beir", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/prepare_beir.py",
        code=plan.code_version("prepare_beir.py"),
        folder=lambda wc: plan.beir_folder(wc.corpus),
    threads: 1
    resources:
        mem_mb=plan.resources_for("prepare_beir", "mem_mb"),
        runtime=plan.resources_for("prepare_beir", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} corpus --folder {params.folder:q} --corpus-out {output.corpus:q}"
        " --ids-out {output.ids:q} 2> {log:q}"


rule prepare_beir_dataset:
    input:
        queries=lambda wc: str(Path(plan.beir_folder(wc.corpus)) / "queries.jsonl"),
        qrels=lambda wc: str(Path(plan.beir_folder(wc.corpus)) / "qrels" / f"{plan.dataset_cfg(wc.dataset)['beir']['split']}.tsv"),
        doc_ids=BEIR_DOC_IDS,
    output:
        queries=BEIR_QUERIES,
        query_ids=BEIR_QUERY_IDS,
        qrels=BEIR_QRELS,
    wildcard_constraints:
        corpus=plan.one_of(plan.beir_corpora()),
        dataset=plan.one_of(plan.beir_datasets()),
    log:
        log_path("prepare_beir_dataset", "{corpus}/{dataset}"),
    benchmark:
        bench_path("prepare_beir_dataset", "{corpus}/{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/prepare_beir.py",
        code=plan.code_version("prepare_beir.py"),
        folder=lambda wc: plan.beir_folder(wc.corpus),
        split=lambda wc: plan.dataset_cfg(wc.dataset)["beir"]["split"],
    threads: 1
    resources:
        mem_mb=plan.resources_for("prepare_beir_dataset", "mem_mb"),
        runtime=plan.resources_for("prepare_beir_dataset", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} queries --folder {params.folder:q} --split {params.split:q}"
        " --doc-ids {input.doc_ids:q} --queries-out {output.queries:q} --query-ids-out {output.query_ids:q}"
        " --qrels-out {output.qrels:q} 2> {log:q}"
