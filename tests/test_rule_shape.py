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
