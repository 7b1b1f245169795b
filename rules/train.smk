# Bi-encoders: export the untrained checkpoint, or train DPR (one process on a CPU,
# torchrun + DDP over `train.gpus` GPUs). Checkpoints live outside the rule's output, so a
# killed job resumes from its last checkpoint when Snakemake runs it again.


rule export_encoder:
    output:
        directory(MODEL_DIR),
    log:
        "logs/export_encoder/{model}.log",
    benchmark:
        bench_path("export_encoder", "{model}")
    wildcard_constraints:
        model=one_of(untrained_models()),
    params:
        script=f"{SCRIPTS}/export_encoder.py",
        init=lambda wc: config["encoders"][config["models"][wc.model]["init"]],
        settings=lambda wc: shlex.quote(json.dumps(train_settings(wc.model))),
    threads: 1
    resources:
        mem_mb=resources_for("export_encoder", "mem_mb"),
        runtime=resources_for("export_encoder", "runtime"),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python {params.script} --init {params.init} --output {output} --settings {params.settings} 2> {log}"


rule train_biencoder:
    input:
        train=lambda wc: training_file(config["models"][wc.model]["train_on"]),
        dev=lambda wc: dataset_file(config["models"][wc.model]["train_on"], "dev"),
    output:
        directory(MODEL_DIR),
    log:
        "logs/train_biencoder/{model}.log",
    benchmark:
        bench_path("train_biencoder", "{model}")
    wildcard_constraints:
        model=one_of(trained_models()),
    params:
        script=f"{SCRIPTS}/train_biencoder.py",
        init=lambda wc: config["encoders"][config["models"][wc.model]["init"]],
        settings=lambda wc: shlex.quote(json.dumps(train_settings(wc.model))),
        checkpoints=lambda wc: CHECKPOINT_DIR.format(model=wc.model),
        launcher=lambda wc: (
            f"torchrun --standalone --nproc_per_node {model_gpus(wc.model)}"
            if model_gpus(wc.model) > 1
            else "python"
        ),
    threads: 2
    resources:
        mem_mb=resources_for("train_biencoder", "mem_mb"),
        runtime=resources_for("train_biencoder", "runtime"),
        gpu=lambda wc: model_gpus(wc.model),
    conda:
        "../envs/gpu.yaml"
    shell:
        "{params.launcher} {params.script} --train {input.train} --dev {input.dev} --init {params.init}"
        " --output {output} --checkpoint-dir {params.checkpoints} --settings {params.settings} 2> {log}"
