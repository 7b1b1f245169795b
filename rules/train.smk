# Bi-encoders: export the untrained checkpoint, or train DPR / DCSR (one process on a CPU,
# torchrun + DDP over `train.gpus` GPUs, or over `train.nodes` nodes under Slurm). Checkpoints live outside the rule's output, so a
# killed job resumes from its last checkpoint when Snakemake runs it again.
# A model's init is one encoder (both towers start from it) or {question: ENCODER, passage: ENCODER};
# `--init` gets the checkpoint, or the pair as JSON (dcsr.pipeline.config.init_param).
from dcsr.pipeline.config import init_param  # noqa: E402


rule export_encoder:
    input:
        unpack(plan.init_inputs),
    output:
        directory(MODEL_DIR),
    wildcard_constraints:
        model=plan.one_of(plan.untrained_models()),
    log:
        log_path("export_encoder", "{model}"),
    benchmark:
        bench_path("export_encoder", "{model}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/export_encoder.py",
        code=plan.code_version("export_encoder.py"),
        init=lambda wc: init_param(config, wc.model),
        # the settings an untrained model is made of: a new learning rate re-exports no baseline
        settings=lambda wc: plan.train_settings_arg(wc.model, "untrained"),
        method=lambda wc: plan.model_method(wc.model),
    threads: 1
    resources:
        mem_mb=plan.resources_for("export_encoder", "mem_mb"),
        runtime=plan.resources_for("export_encoder", "runtime"),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python {params.script:q} --init {params.init:q} --output {output:q} --settings {params.settings:q}"
        " --method {params.method:q} 2> {log:q}"


# A model trained on a list of datasets (DCSR's Multi) trains on their training sets (BM25
# negatives mined per dataset) and validates on their dev sets (or dev_on's), each concatenated in list order.
rule merge_training_sets:
    input:
        train=lambda wc: [plan.training_file(d) for d in train_datasets(config["models"][wc.model])],
        # one dev set per file: DPR's recipe NQ + nq_train_hn1 shares NQ's dev set
        dev=lambda wc: list(dict.fromkeys(plan.dataset_file(d, "dev") for d in dev_datasets(config["models"][wc.model]))),
    output:
        train=MERGED_TRAIN,
        dev=MERGED_DEV,
    wildcard_constraints:
        model=plan.one_of([m for m in plan.trained_models() if plan.trains_on_several(m)]),
    log:
        log_path("merge_training_sets", "{model}"),
    benchmark:
        bench_path("merge_training_sets", "{model}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/merge_training_sets.py",
        code=plan.code_version("merge_training_sets.py"),
    threads: 1
    resources:
        mem_mb=plan.resources_for("merge_training_sets", "mem_mb"),
        runtime=plan.resources_for("merge_training_sets", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --train {input.train:q} --dev {input.dev:q} --train-out {output.train:q}"
        " --dev-out {output.dev:q} 2> {log:q}"


rule train_biencoder:
    input:
        unpack(plan.train_inputs),
    output:
        directory(MODEL_DIR),
    wildcard_constraints:
        model=plan.one_of(plan.trained_models()),
    log:
        log_path("train_biencoder", "{model}"),
    benchmark:
        bench_path("train_biencoder", "{model}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/train_biencoder.py",
        code=plan.code_version("train_biencoder.py"),
        init=lambda wc: init_param(config, wc.model),
        settings=lambda wc: plan.train_settings_arg(wc.model, "model"),
        # logging, loader workers, checkpoint frequency: read with threads, so Snakemake does not
        # record them and a new value retrains nothing (Plan.train_settings_arg)
        run_settings=lambda wc, threads: plan.train_settings_arg(wc.model, "run"),
        checkpoints=lambda wc: CHECKPOINT_DIR.format(model=wc.model),
        method=lambda wc: plan.model_method(wc.model),
        sentences=lambda wc, input: ["--sentences", input.sentences] if plan.is_dcsr(wc.model) else [],
        launcher=lambda wc: plan.train_launcher(wc.model),
    threads: lambda wc: plan.train_threads(wc.model)
    resources:
        mem_mb=plan.resources_for("train_biencoder", "mem_mb"),
        runtime=plan.resources_for("train_biencoder", "runtime"),
        gpu=train_resource("gpu"),
        gres=train_resource("gres"),
        nodes=train_resource("nodes"),
        # over nodes (Plan.train_launcher): an MPI-style job, whose own srun Slurm's jobstep plugin does not wrap
        mpi=train_resource("mpi"),
        tasks=train_resource("tasks"),
        tasks_per_gpu=train_resource("tasks_per_gpu"),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python -m dcsr.pipeline.gpus {resources.gpu:q} --"
        " {params.launcher:u} {params.script:q} --train {input.train:q} --dev {input.dev:q} --init {params.init:q}"
        " --output {output:q} --checkpoint-dir {params.checkpoints:q} --settings {params.settings:q}"
        " --run-settings {params.run_settings:q}"
        " --method {params.method:q} {params.sentences:q} --code {params.code:q} 2> {log:q}"


# A model in the format its family's tools read (dcsr.models.export): DPR's Hugging Face format
# (question_encoder/, ctx_encoder/) for CLS + dot-product models, sentence-transformers
# (question_encoder/, passage_encoder/) for mean-pooled or normalized ones. On request only:
#   snakemake results/export/<model>
rule export_model:
    input:
        unpack(plan.export_inputs),
    output:
        directory(EXPORT_DIR),
    wildcard_constraints:
        model=plan.one_of(list(config["models"])),
    log:
        log_path("export_model", "{model}"),
    benchmark:
        bench_path("export_model", "{model}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/export_model.py",
        code=plan.code_version("export_model.py"),
    threads: 1
    resources:
        mem_mb=plan.resources_for("export_model", "mem_mb"),
        runtime=plan.resources_for("export_model", "runtime"),
    conda:
        "../envs/gpu.yaml"
    shell:
        "python {params.script:q} --model {input.model:q} --output {output:q} --name {wildcards.model:q} 2> {log:q}"
