# Encoder attribution (the second paper): every question encoder of a family is searched
# against every passage encoder's index on every test set. The pairs need no rules of their
# own: a pair (q, p, t) is the ordinary run/metrics path of search.smk and evaluate.smk, so a
# passage encoder embeds the corpus once and the K x K x T searches are independent jobs.
# Here: the sweep's training samples, the pair matrix, and the tables and figures.


rule sample_training_set:
    input:
        lambda wc: plan.training_file(wc.dataset),
    output:
        SAMPLED_TRAIN,
    log:
        log_path("sample_training_set", "{dataset}/{percent}"),
    benchmark:
        bench_path("sample_training_set", "{dataset}/{percent}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/sample_training_set.py",
        code=plan.code_version("sample_training_set.py"),
        fraction=lambda wc: fraction_of(wc.percent),
        seed=plan.attribution().get("sweep", {}).get("seed", config["seed"]),
    threads: 1
    resources:
        mem_mb=plan.resources_for("sample_training_set", "mem_mb"),
        runtime=plan.resources_for("sample_training_set", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --train {input:q} --fraction {params.fraction:q} --seed {params.seed:q}"
        " --output {output:q} 2> {log:q}"


rule collect_pair_matrix:
    input:
        lambda wc: [
            METRICS.format(corpus=plan.corpus_of(t), qmodel=q, pmodel=p, dataset=t) for q, p, t in plan.attribution_cells()
        ],
    output:
        PAIR_MATRIX,
    log:
        log_path("collect_pair_matrix", "pair_matrix"),
    benchmark:
        bench_path("collect_pair_matrix", "pair_matrix")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/collect_pair_matrix.py",
        code=plan.code_version("collect_pair_matrix.py"),
        cells=lambda wc: [
            a for q, p, t in plan.attribution_cells()
            for a in ("--cell", q, p, t, METRICS.format(corpus=plan.corpus_of(t), qmodel=q, pmodel=p, dataset=t))
        ],
    threads: 1
    resources:
        mem_mb=plan.resources_for("collect_pair_matrix", "mem_mb"),
        runtime=plan.resources_for("collect_pair_matrix", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} {params.cells:q} --output {output:q} 2> {log:q}"


# The report rules share one script (a subcommand each) and the spec built from the config
# (Plan.attribution_spec_arg). Table 4 is Table 2's rule with its own subcommand and outputs.

rule make_attribution_table2:
    input:
        matrix=PAIR_MATRIX,
        paper=PAPER_NUMBERS,
    output:
        csv=report(f"{ATTRIBUTION_TABLE2}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="Attribution"),
        md=f"{ATTRIBUTION_TABLE2}.md",
    log:
        log_path("make_attribution_table2", "table2"),
    benchmark:
        bench_path("make_attribution_table2", "table2")
    params:
        script=lambda wc, threads: ATTRIBUTION_REPORT,
        code=plan.code_version("attribution_report.py"),
        spec=plan.attribution_spec_arg,
        table="table2",
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_attribution_table2", "mem_mb"),
        runtime=plan.resources_for("make_attribution_table2", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} {params.table:q} --spec {params.spec:q} --matrix {input.matrix:q} --paper {input.paper:q}"
        " --csv {output.csv:q} --md {output.md:q} 2> {log:q}"


rule plot_marginalization:
    input:
        matrix=PAIR_MATRIX,
    output:
        csv=report(f"{MARGINALS}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="Attribution"),
        md=f"{MARGINALS}.md",
        png=report(MARGINALS_PNG, caption="../workflow/report/figure.rst", category="Figures", subcategory="Attribution"),
        heatmap_png=report(f"{PAIR_HEATMAP}.png", caption="../workflow/report/figure.rst", category="Figures", subcategory="Attribution"),
        heatmap_csv=f"{PAIR_HEATMAP}.csv",
    wildcard_constraints:
        family=plan.one_of(list(plan.attribution().get("families", {}))),
    log:
        log_path("plot_marginalization", "{family}"),
    benchmark:
        bench_path("plot_marginalization", "{family}")
    params:
        script=lambda wc, threads: ATTRIBUTION_REPORT,
        code=plan.code_version("attribution_report.py"),
        spec=plan.attribution_spec_arg,
    threads: 1
    resources:
        mem_mb=plan.resources_for("plot_marginalization", "mem_mb"),
        runtime=plan.resources_for("plot_marginalization", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} marginals --family {wildcards.family:q} --spec {params.spec:q} --matrix {input.matrix:q}"
        " --csv {output.csv:q} --md {output.md:q} --png {output.png:q} --heatmap-png {output.heatmap_png:q}"
        " --heatmap-csv {output.heatmap_csv:q} 2> {log:q}"


rule plot_data_efficiency:
    input:
        matrix=PAIR_MATRIX,
    output:
        png=report(f"{SWEEP_FIGURE}.png", caption="../workflow/report/figure.rst", category="Figures", subcategory="Attribution"),
        csv=f"{SWEEP_FIGURE}.csv",
    log:
        log_path("plot_data_efficiency", "figure3"),
    benchmark:
        bench_path("plot_data_efficiency", "figure3")
    params:
        script=lambda wc, threads: ATTRIBUTION_REPORT,
        code=plan.code_version("attribution_report.py"),
        spec=plan.attribution_spec_arg,
    threads: 1
    resources:
        mem_mb=plan.resources_for("plot_data_efficiency", "mem_mb"),
        runtime=plan.resources_for("plot_data_efficiency", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} sweep --spec {params.spec:q} --matrix {input.matrix:q}"
        " --csv {output.csv:q} --png {output.png:q} 2> {log:q}"


use rule make_attribution_table2 as make_attribution_table4 with:
    output:
        csv=report(f"{ATTRIBUTION_TABLE4}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="Attribution"),
        md=f"{ATTRIBUTION_TABLE4}.md",
    log:
        log_path("make_attribution_table4", "table4"),
    benchmark:
        bench_path("make_attribution_table4", "table4")
    params:
        script=lambda wc, threads: ATTRIBUTION_REPORT,
        code=plan.code_version("attribution_report.py"),
        spec=plan.attribution_spec_arg,
        table="table4",
    resources:
        mem_mb=plan.resources_for("make_attribution_table4", "mem_mb"),
        runtime=plan.resources_for("make_attribution_table4", "runtime"),


rule compare_families:
    input:
        matrix=PAIR_MATRIX,
    output:
        csv=report(f"{FAMILY_COMPARISON}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="Attribution"),
        md=f"{FAMILY_COMPARISON}.md",
    log:
        log_path("compare_families", "compare"),
    benchmark:
        bench_path("compare_families", "compare")
    params:
        script=lambda wc, threads: ATTRIBUTION_REPORT,
        code=plan.code_version("attribution_report.py"),
        spec=plan.attribution_spec_arg,
    threads: 1
    resources:
        mem_mb=plan.resources_for("compare_families", "mem_mb"),
        runtime=plan.resources_for("compare_families", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} compare --spec {params.spec:q} --matrix {input.matrix:q}"
        " --csv {output.csv:q} --md {output.md:q} 2> {log:q}"


rule make_attribution_table1:
    input:
        files=lambda wc: [plan.dataset_file(d, s) for d in plan.attribution_datasets() for s in ("train", "dev", "test")],
        paper=PAPER_NUMBERS,
    output:
        csv=report(f"{ATTRIBUTION_TABLE1}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="Attribution"),
        md=f"{ATTRIBUTION_TABLE1}.md",
    log:
        log_path("make_attribution_table1", "table1"),
    benchmark:
        bench_path("make_attribution_table1", "table1")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/make_attribution_table1.py",
        code=plan.code_version("make_attribution_table1.py"),
        datasets=lambda wc: [
            str(a) for d in plan.attribution_datasets()
            for a in ("--dataset", d, plan.dataset_cfg(d).get("paper_name") or "-",
                      *(plan.dataset_file(d, s) for s in ("train", "dev", "test")))
        ],
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_attribution_table1", "mem_mb"),
        runtime=plan.resources_for("make_attribution_table1", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} {params.datasets:q} --paper {input.paper:q} --csv {output.csv:q} --md {output.md:q} 2> {log:q}"


rule make_coverage_table:
    input:
        train=lambda wc: [path for _d, _f, path in plan.attribution_stats_entries()],
        paper=PAPER_NUMBERS,
    output:
        csv=report(f"{ATTRIBUTION_TABLE3}.csv", caption="../workflow/report/table.rst", category="Tables", subcategory="Attribution"),
        md=f"{ATTRIBUTION_TABLE3}.md",
        png=report(f"{COVERAGE_FIGURE}.png", caption="../workflow/report/figure.rst", category="Figures", subcategory="Attribution"),
        figure_csv=f"{COVERAGE_FIGURE}.csv",
    log:
        log_path("make_coverage_table", "table3"),
    benchmark:
        bench_path("make_coverage_table", "table3")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/coverage_statistics.py",
        code=plan.code_version("coverage_statistics.py"),
        entries=lambda wc: [a for d, f, path in plan.attribution_stats_entries() for a in ("--entry", d, repr(f), path)],
        alpha=plan.attribution().get("statistics", {}).get("alpha", 1.3),
        min_questions=plan.attribution().get("statistics", {}).get("min_questions", 2),
        paper_names=lambda wc: json_arg({d: ds.get("paper_name") for d, ds in config["datasets"].items()}),
    threads: 1
    resources:
        mem_mb=plan.resources_for("make_coverage_table", "mem_mb"),
        runtime=plan.resources_for("make_coverage_table", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} {params.entries:q} --alpha {params.alpha:q} --min-questions {params.min_questions:q}"
        " --paper-names {params.paper_names:q} --paper {input.paper:q} --csv {output.csv:q} --md {output.md:q}"
        " --png {output.png:q} --figure-csv {output.figure_csv:q} 2> {log:q}"
