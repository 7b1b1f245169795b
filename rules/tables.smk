# Tables regenerated from results/, with the papers' numbers beside ours.


rule make_table:
    input:
        metrics=lambda wc: table_metrics(wc.table),
        paper=str(Path(workflow.basedir) / "config" / "paper_numbers.yaml"),
    output:
        csv=TABLE_CSV,
        md=TABLE_MD,
    log:
        "logs/make_table/{table}.log",
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
