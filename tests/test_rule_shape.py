"""Every rule has the same parts in the same order (issue 19): input, output, then the
wildcards' shapes and where it runs (wildcard_constraints, localrule, group), log, benchmark,
params, threads, resources, conda, then the action; and every rule writes a log."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ORDER = ("input", "output", "wildcard_constraints", "localrule", "group", "log", "benchmark", "params", "threads",
         "resources", "conda", "default_target", "shell", "run", "script")


def rule_sections(text: str) -> dict[str, list[str]]:
    """``{rule name: its top-level keywords in order}`` of a Snakemake file (``use rule ... as X
    with:`` too)."""
    rules, name = {}, None
    for line in text.splitlines():
        m = re.match(r"(?:rule (\w+)|use rule \w+ as (\w+) with):", line)
        if m:
            name = m.group(1) or m.group(2)
            rules[name] = []
        elif line and not line.startswith((" ", "#")):
            name = None
        elif name and (k := re.match(r"    (\w+):", line)):
            rules[name].append(k.group(1))
    return rules


def all_rules() -> dict[str, list[str]]:
    out = {}
    for path in sorted((REPO / "rules").glob("*.smk")) + [REPO / "Snakefile"]:
        out.update(rule_sections(path.read_text(encoding="utf-8")))
    return out


def out_of_order(rules: dict[str, list[str]]) -> list[str]:
    return [name for name, keys in rules.items()
            if [ORDER.index(k) for k in keys] != sorted(ORDER.index(k) for k in keys)]


def test_the_checker_sees_a_part_out_of_place():
    text = "rule a:\n    input:\n        'x'\n    log:\n        'l'\n    output:\n        'y'\n    shell:\n        'cp'\n"
    assert rule_sections(text) == {"a": ["input", "log", "output", "shell"]}
    assert out_of_order(rule_sections(text)) == ["a"]


def test_every_rule_has_its_parts_in_the_agreed_order():
    rules = all_rules()
    assert len(rules) > 30
    assert out_of_order(rules) == []


def test_every_rule_but_the_target_writes_a_log_and_a_benchmark():
    for name, keys in all_rules().items():
        if name == "all":
            continue
        assert "log" in keys or "log" in _parent_keys(name), name
        assert "benchmark" in keys or "benchmark" in _parent_keys(name), name


def _parent_keys(name: str) -> list[str]:
    """A rule made with ``use rule P as name with:`` has P's parts besides its own."""
    for path in sorted((REPO / "rules").glob("*.smk")):
        m = re.search(rf"use rule (\w+) as {name} with:", path.read_text(encoding="utf-8"))
        if m:
            return all_rules()[m.group(1)]
    return []


# A shell command's fields as Snakemake formats them: {name}, {name:q}, {name:u}
FIELD = re.compile(r"(?<!\{)\{([A-Za-z_][\w.]*)(?::(\w*))?\}(?!\})")
# what is shell code by design, built from integers only (tests/test_plan.py checks the launcher)
UNQUOTED = {"params.launcher"}


def shell_fields(text: str) -> list[tuple[str, str, str]]:
    """``(rule, field, format spec)`` of every substitution in every ``shell:`` of a file."""
    out, rule, in_shell = [], None, False
    for line in text.splitlines():
        m = re.match(r"(?:rule (\w+)|use rule \w+ as (\w+) with):", line)
        if m:
            rule, in_shell = m.group(1) or m.group(2), False
        elif re.match(r"    (\w+):", line):
            in_shell = line.strip() == "shell:"
        elif in_shell and line.strip().startswith(('"', "'")):
            out += [(rule, f.group(1), f.group(2) or "") for f in FIELD.finditer(line)]
    return out


def test_the_quoting_checker_sees_a_bare_field():
    text = 'rule a:\n    shell:\n        "python {params.script:q} --x {input}"\n        " 2> {log:q}"\n'
    assert shell_fields(text) == [("a", "params.script", "q"), ("a", "input", ""), ("a", "log", "q")]


def test_every_value_in_every_shell_command_is_quoted():
    """No config value reaches a shell as code (issue 25): every substitution in every shell
    command is quoted by Snakemake (``:q``; a list's items one by one), so a path with a space
    stays one argument and ``$(...)`` or a quote in a value stays text. The one exception is
    the training launcher, shell code by design."""
    fields = []
    for path in sorted((REPO / "rules").glob("*.smk")) + [REPO / "Snakefile"]:
        fields += shell_fields(path.read_text(encoding="utf-8"))
    assert len(fields) > 150
    bare = [(r, f, spec) for r, f, spec in fields if spec != "q" and not (f in UNQUOTED and spec == "u")]
    assert bare == []
    # and no hand-made quotes around a field ('{x}' breaks on a value holding a quote)
    assert not [line for path in (REPO / "rules").glob("*.smk") for line in path.read_text().splitlines()
                if line.strip().startswith('"') and "'{" in line]


def test_the_slurm_profile_sends_exactly_the_rules_that_ask_for_gpus_to_its_gpu_partition():
    """profiles/slurm/config.yaml: the CPU partition by default, the GPU partition for each rule
    with a ``gpu`` resource; a rule that gains one must be added there, or it queues on CPU nodes."""
    import yaml

    gpu_rules, name, in_resources = set(), None, False
    for path in sorted((REPO / "rules").glob("*.smk")):
        for line in path.read_text().splitlines():
            if m := re.match(r"(?:rule (\w+)|use rule \w+ as (\w+) with):", line):
                name, in_resources = m.group(1) or m.group(2), False
            elif re.match(r"    (\w+):", line):
                in_resources = line.strip() == "resources:"
            elif in_resources and re.match(r"\s+gpu=", line):
                gpu_rules.add(name)
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert gpu_rules == {"train_biencoder", "embed_shard", "embed_questions", "search_shard", "mine_dense_negatives"}
    assert set(profile["set-resources"]) == gpu_rules
    assert {r["slurm_partition"] for r in profile["set-resources"].values()} == {"gpu"}
    assert profile["default-resources"]["slurm_partition"] == "cpu"


# Params Snakemake does not record (a function of input, output, threads or resources is
# "derived": snakemake.rules.Rule._is_deriving_function), so a change to them reruns nothing:
# each may carry file paths (the files are inputs or outputs), a memory size, or the training
# settings that change nothing of the model (run_settings: dcsr.settings.run_only_keys), never a
# setting that changes a number.
UNRECORDED_OK = {"store", "sentences", "sets", "shards", "searches", "hits", "weight", "shard_args", "heap",
                 "run_settings", "script", "found"}


def unrecorded_params() -> list[tuple[str, str, str]]:
    """``(rule file, rule, param)`` of every param of the rules whose value Snakemake derives (so
    does not record): a lambda or a ``plan`` method taking input, output, threads or resources."""
    import inspect

    from dcsr.pipeline.plan import Plan

    found = []
    for path in sorted((REPO / "rules").glob("*.smk")) + [REPO / "Snakefile"]:
        rule, in_params = None, False
        for line in path.read_text(encoding="utf-8").splitlines():
            if m := re.match(r"(?:rule (\w+)|use rule \w+ as (\w+) with):", line):
                rule, in_params = m.group(1) or m.group(2), False
            elif k := re.match(r"    (\w+):", line):
                in_params = k.group(1) == "params"
            elif in_params and (p := re.match(r"        (\w+)=(.*)$", line)):
                name, value = p.groups()
                args = []
                if value.startswith("lambda"):
                    args = re.findall(r"\w+", value[len("lambda"):value.index(":")])
                elif (attr := re.match(r"plan\.(\w+)", value)) and not isinstance(
                        inspect.getattr_static(Plan, attr.group(1), None), property) and callable(
                        getattr(Plan, attr.group(1), None)):
                    args = list(inspect.signature(getattr(Plan, attr.group(1))).parameters)
                if set(args) & {"input", "output", "threads", "resources"}:
                    found.append((path.name, rule, name))
    return found


def test_no_setting_rides_in_a_param_snakemake_does_not_record():
    """dcsr.temperature and dcsr.sentences_per_passage rode in params that read ``input``: a
    changed value was in the next command but reran nothing, and the results stayed those of the
    old value. Now every unrecorded param is a path or a memory size (UNRECORDED_OK), and the
    scan finds the ones there are."""
    found = unrecorded_params()
    assert {name for _, _, name in found} <= UNRECORDED_OK, [f for f in found if f[2] not in UNRECORDED_OK]
    assert ("search.smk", "merge_runs", "store") in found and ("bm25.smk", "search_bm25", "heap") in found
    assert not [f for f in found if f[2] in ("hasans", "depth")]
    # the script's path (its content is the code param) and a SQuAD source's, as found: a checkout
    # moved or cloned elsewhere plans no job again
    assert {("train.smk", "train_biencoder", "script"), ("data.smk", "prepare_squad", "found")} <= set(found)


def test_every_rule_that_may_fetch_a_file_checks_it_against_the_downloads_lock():
    """A rule whose script may download (``--download-dir``: a URL source, or its file kept from
    an earlier job) passes the downloads' lock, so a kept file is checked against the size and
    sha256 recorded at its first download, not reused as it is."""
    fields: dict[str, set[str]] = {}
    for path in sorted((REPO / "rules").glob("*.smk")):
        for rule, field, _ in shell_fields(path.read_text(encoding="utf-8")):
            fields.setdefault(rule, set()).add(field)
    fetching = sorted(r for r, f in fields.items() if "params.download_dir" in f)
    assert {"prepare_squad", "prepare_squad_dataset"} <= set(fetching)
    assert [r for r in fetching if "params.lock" not in fields[r]] == []


def test_the_rules_that_download_run_where_snakemake_runs():
    """Compute nodes of clusters often have no internet: DPR's files (download_resource) and a
    SQuAD URL source (prepare_squad, which downloads it for its datasets too) are local rules,
    run by Snakemake itself, not submitted."""
    rules = all_rules()
    assert [r for r in ("download_resource", "prepare_squad") if "localrule" not in rules[r]] == []
