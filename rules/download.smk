# The papers' input files from DPR's resource map (and SQuAD v1.1), fetched as published:
# resumed after a cut, checked against the lock file (size, sha256) recorded at first download.
# Only with a `downloads` section in the config; without one the rule matches no file.


rule download_resource:
    output:
        DOWNLOADED,
    wildcard_constraints:
        file=plan.one_of(plan.download_files()),
    # compute nodes of clusters often have no internet: downloads run where Snakemake runs
    localrule: True
    log:
        log_path("download_resource", "{file}"),
    benchmark:
        bench_path("download_resource", "{file}")
    params:
        script=lambda wc, threads: f"{SCRIPTS}/download_resource.py",
        code=plan.code_version("download_resource.py"),
        url=plan.download_url,
        lock=plan.downloads["lock"],
        retries=plan.downloads["retries"],
        timeout=plan.downloads["timeout"],
    threads: 1
    resources:
        mem_mb=plan.resources_for("download_resource", "mem_mb"),
        runtime=plan.resources_for("download_resource", "runtime"),
    conda:
        "../envs/cpu.yaml"
    shell:
        "python {params.script:q} --url {params.url:q} --out {output:q} --lock {params.lock:q}"
        " --retries {params.retries:q} --timeout {params.timeout:q} 2> {log:q}"
