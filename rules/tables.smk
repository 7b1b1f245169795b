# Tables regenerated from results/, with the papers' numbers beside ours.


rule make_table:
    input:
        metrics=lambda wc: table_metrics(wc.table),
        paper=str(Path(workflow.basedir) / "config" / "paper_numbers.yaml"),
    output:
        csv=TABLE_CSV,
        md=TABLE_MD,
    wildcard_constraints:
        table=one_of(list(config["tables"])),
    log:
        log_path("make_table", "{table}"),
    benchmark:
        bench_path("make_table", "{table}")
    params:
        script=f"{SCRIPTS}/make_table.py",
        spec=lambda wc: shlex.quote(json.dumps(
            {
                "table": config["tables"][wc.table],
                "ks": config["evaluate"]["ks"],
                "paper_names": {d: ds.get("paper_name") for d, ds in config["datasets"].items()},
                "cells": [
                    {"qmodel": q, "pmodel": p, "dataset": d, "metrics": METRICS.format(corpus=c, qmodel=q, pmodel=p, dataset=d)}
                    for c, q, p, d in table_runs(wc.table)
                ],
            }
        )),
    threads: 1
    resources:
        mem_mb=resources_for("make_table", "mem_mb"),
        runtime=resources_for("make_table", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --spec {params.spec} --paper {input.paper}"
        " --csv {output.csv} --md {output.md} 2> {log}"


rule make_table1:
    input:
        train=lambda wc: [dataset_file(d, "train") for d in config["datasets"]],
        paper=str(Path(workflow.basedir) / "config" / "paper_numbers.yaml"),
    output:
        csv=TABLE1_CSV,
        md=TABLE1_MD,
    log:
        log_path("make_table1", "table1"),
    benchmark:
        bench_path("make_table1", "table1")
    params:
        script=f"{SCRIPTS}/make_table1.py",
        spec=lambda wc: shlex.quote(json.dumps(
            {
                "rows": [
                    {"label": d, "train": dataset_file(d, "train"), "paper_name": ds.get("paper_name")}
                    for d, ds in config["datasets"].items()
                ]
            }
        )),
    threads: 1
    resources:
        mem_mb=resources_for("make_table1", "mem_mb"),
        runtime=resources_for("make_table1", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --spec {params.spec} --paper {input.paper}"
        " --csv {output.csv} --md {output.md} 2> {log}"


rule plot_validation:
    input:
        lambda wc: [MODEL_DIR.format(model=m) for m in models_trained_on(wc.dataset)],
    output:
        png=VALIDATION_PNG,
        csv=VALIDATION_CSV,
    log:
        log_path("plot_validation", "{dataset}"),
    benchmark:
        bench_path("plot_validation", "{dataset}")
    params:
        script=f"{SCRIPTS}/plot_validation.py",
        spec=lambda wc: shlex.quote(json.dumps(
            {"curves": [{"label": m, "model": MODEL_DIR.format(model=m)} for m in models_trained_on(wc.dataset)]}
        )),
        title=lambda wc: shlex.quote(f"In-batch dev accuracy after each epoch, trained on {wc.dataset}"),
    threads: 1
    resources:
        mem_mb=resources_for("plot_validation", "mem_mb"),
        runtime=resources_for("plot_validation", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script} --spec {params.spec} --title {params.title}"
        " --png {output.png} --csv {output.csv} 2> {log}"
