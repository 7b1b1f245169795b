# Tables regenerated from results/, with the papers' numbers beside ours.


rule make_table:
    input:
        unpack(plan.table_inputs),
        paper=str(Path(workflow.basedir) / "config" / "paper_numbers.yaml"),
    output:
        csv=report(TABLE_CSV, caption="../workflow/report/table.rst", category="Tables", subcategory="Retrieval"),
        md=TABLE_MD,
    wildcard_constraints:
        table=plan.one_of(list(config["tables"])),
    log:
        log_path("make_table", "{table}"),
    benchmark:
        bench_path("make_table", "{table}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/make_table.py",
        code=plan.code_version("make_table.py"),
        spec=lambda wc: (json_arg(
            {
                "table": config["tables"][wc.table],
                "ks": config["evaluate"]["ks"],
                "paper_names": plan.table_paper_names(wc.table),
                "cells": plan.table_spec_cells(wc.table),
                "notes": plan.table_notes(wc.table),
            }
        )),
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_table", "mem_mb"),
        runtime=plan.resources_for("make_table", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --spec {params.spec:q} --paper {input.paper:q}"
        " --csv {output.csv:q} --md {output.md:q} 2> {log:q}"


rule make_table1:
    input:
        train=lambda wc: [plan.dataset_file(d, "train") for d in plan.source_datasets()],
        paper=str(Path(workflow.basedir) / "config" / "paper_numbers.yaml"),
    output:
        csv=report(TABLE1_CSV, caption="../workflow/report/table.rst", category="Tables", subcategory="DCSR"),
        md=TABLE1_MD,
    log:
        log_path("make_table1", "table1"),
    benchmark:
        bench_path("make_table1", "table1")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/make_table1.py",
        code=plan.code_version("make_table1.py"),
        spec=lambda wc: (json_arg(
            {
                "rows": [
                    {"label": d, "train": plan.dataset_file(d, "train"), "paper_name": plan.dataset_cfg(d).get("paper_name")}
                    for d in plan.source_datasets()
                ]
            }
        )),
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_table1", "mem_mb"),
        runtime=plan.resources_for("make_table1", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --spec {params.spec:q} --paper {input.paper:q}"
        " --csv {output.csv:q} --md {output.md:q} 2> {log:q}"


rule make_appendix_b:
    input:
        train=lambda wc: [plan.dataset_file(d, "train") for d in plan.source_datasets()],
        dev=lambda wc: [plan.dataset_file(d, "dev") for d in plan.source_datasets()],
        paper=PAPER_NUMBERS,
    output:
        csv=report(f"{APPENDIX_B}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="DCSR"),
        md=f"{APPENDIX_B}.md",
    log:
        log_path("make_appendix_b", "appendix_b"),
    benchmark:
        bench_path("make_appendix_b", "appendix_b")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/make_appendix_b.py",
        code=plan.code_version("make_appendix_b.py"),
        spec=lambda wc: (json_arg(
            {
                "rows": [
                    {"label": d, "train": plan.dataset_file(d, "train"), "dev": plan.dataset_file(d, "dev"),
                     "match": plan.match_type(d), "paper_name": plan.dataset_cfg(d).get("paper_name")}
                    for d in plan.source_datasets()
                ]
            }
        )),
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_appendix_b", "mem_mb"),
        runtime=plan.resources_for("make_appendix_b", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --spec {params.spec:q} --paper {input.paper:q}"
        " --csv {output.csv:q} --md {output.md:q} 2> {log:q}"


# One figure per training set: a dataset, or several joined by '+' (a model trained on a list).
rule plot_validation:
    input:
        lambda wc: [MODEL_DIR.format(model=m) for m in plan.models_trained_on(wc.dataset)],
    output:
        png=report(VALIDATION_PNG, caption="../workflow/report/figure.rst", category="Figures", subcategory="Training"),
        csv=VALIDATION_CSV,
    wildcard_constraints:
        dataset=plan.one_of(sorted({plan.training_label(m) for m in plan.trained_models()})),
    log:
        log_path("plot_validation", "{dataset}"),
    benchmark:
        bench_path("plot_validation", "{dataset}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/plot_validation.py",
        code=plan.code_version("plot_validation.py"),
        spec=lambda wc: (json_arg(
            {"curves": [{"label": m, "model": MODEL_DIR.format(model=m)} for m in plan.models_trained_on(wc.dataset)]}
        )),
        title=lambda wc: f"In-batch dev accuracy by epochs trained, trained on {wc.dataset}",
    threads: 1
    resources:
        mem_mb=plan.resources_for("plot_validation", "mem_mb"),
        runtime=plan.resources_for("plot_validation", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --spec {params.spec:q} --title {params.title:q}"
        " --png {output.png:q} --csv {output.csv:q} 2> {log:q}"


# The claims ledger: each claim of the config (claims:) as a paired comparison of two runs
# over the same questions, with a bootstrap interval, a sign test and a verdict (dcsr.evaluation.claims).
rule claims_ledger:
    input:
        lambda wc: sorted({r for c in plan.claims_spec() for side in ("baseline", "method") for r in c[f"{side}_runs"]}
                          | {c["corpus_ids"] for c in plan.claims_spec() if "corpus_ids" in c}),
    output:
        csv=report(f"{CLAIMS}.csv", caption="../workflow/report/claims.rst", category="Claims"),
        md=f"{CLAIMS}.md",
    log:
        log_path("claims_ledger", "claims"),
    benchmark:
        bench_path("claims_ledger", "claims")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/make_claims.py",
        code=plan.code_version("make_claims.py"),
        spec=lambda wc: (json_arg({"claims": plan.claims_spec(), "seed": config["seed"], "notes": plan.claims_notes()})),
    threads: 1
    resources:
        mem_mb=plan.resources_for("claims_ledger", "mem_mb"),
        runtime=plan.resources_for("claims_ledger", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --spec {params.spec:q} --csv {output.csv:q} --md {output.md:q} 2> {log:q}"
