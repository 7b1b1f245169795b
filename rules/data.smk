# Data: the generated demo encyclopedia and its QA datasets, in DPR's formats.
# The generator is deterministic from the seed, so the corpus and each dataset are made by
# separate jobs that regenerate the same world and keep only their own files.


rule generate_corpus:
    output:
        CORPUS_TSV,
    log:
        "logs/generate_corpus/{corpus}.log",
    benchmark:
        bench_path("generate_corpus", "{corpus}")
    params:
        script=f"{SCRIPTS}/generate_demo_data.py",
        n_entities=lambda wc: config["corpora"][wc.corpus]["generate"]["n_entities"],
        seed=config["seed"],
    threads: 1
    resources:
        mem_mb=resources_for("generate_corpus", "mem_mb"),
        runtime=resources_for("generate_corpus", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --seed {params.seed} --n-entities {params.n_entities}"
        " --corpus-out {output} 2> {log}"


rule generate_dataset:
    output:
        train=GENERATED_TRAIN,
        dev=GENERATED_DEV,
        test=GENERATED_TEST,
    log:
        "logs/generate_dataset/{corpus}/{dataset}.log",
    benchmark:
        bench_path("generate_dataset", "{corpus}/{dataset}")
    params:
        script=f"{SCRIPTS}/generate_demo_data.py",
        n_entities=lambda wc: config["corpora"][wc.corpus]["generate"]["n_entities"],
        domain=lambda wc: dataset_cfg(wc.dataset)["generated"],
        seed=config["seed"],
        fractions=lambda wc: " ".join(
            f"--{key.replace('_', '-')} {value}"
            for key, value in config["corpora"][wc.corpus]["generate"].items()
            if key in ("dev_fraction", "test_fraction")
        ),
    threads: 1
    resources:
        mem_mb=resources_for("generate_dataset", "mem_mb"),
        runtime=resources_for("generate_dataset", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --seed {params.seed} --n-entities {params.n_entities}"
        " {params.fractions} --domain {params.domain} --train-out {output.train} --dev-out {output.dev}"
        " --test-out {output.test} 2> {log}"
