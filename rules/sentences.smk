# Sentence splitting of the corpus (DCSR encodes one vector per sentence).


rule split_sentences:
    input:
        corpus=lambda wc: plan.corpus_tsv(wc.corpus),
    output:
        table=SENTENCES,
        stats=SENTENCE_STATS,
    log:
        log_path("split_sentences", "{corpus}"),
    benchmark:
        bench_path("split_sentences", "{corpus}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/split_sentences.py",
        code=plan.code_version("split_sentences.py"),
        splitter=plan.config["dcsr"]["splitter"],
    threads: 1
    resources:
        mem_mb=plan.resources_for("split_sentences", "mem_mb"),
        runtime=plan.resources_for("split_sentences", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --corpus {input.corpus:q} --output {output.table:q}"
        " --splitter {params.splitter:q} --stats {output.stats:q} 2> {log:q}"
