"""A job reruns when the code it runs changes (dcsr.pipeline.code_version): each rule's ``code``
param digests its script and the dcsr modules the script reaches through imports."""

import re
from pathlib import Path

from dcsr.pipeline.code_version import code_version, reached_files

REPO = Path(__file__).resolve().parents[1]


def _tree(tmp_path):
    src = tmp_path / "src"
    (src / "dcsr" / "data").mkdir(parents=True)
    (src / "dcsr" / "__init__.py").write_text("")
    (src / "dcsr" / "data" / "__init__.py").write_text("")
    (src / "dcsr" / "data" / "answers.py").write_text("from dcsr.data import tokens\n")
    (src / "dcsr" / "data" / "tokens.py").write_text("X = 1\n")
    (src / "dcsr" / "other.py").write_text("Y = 1\n")
    script = tmp_path / "evaluate.py"
    script.write_text("def main():\n    from dcsr.data.answers import match\n")
    return src, script


def test_an_edit_to_a_module_the_script_reaches_changes_its_version_and_no_other_does(tmp_path):
    src, script = _tree(tmp_path)
    files = {p.relative_to(tmp_path).as_posix() for p in reached_files(script, src)}
    # the import inside a function counts, and so does what that module imports in turn
    assert files == {"evaluate.py", "src/dcsr/__init__.py", "src/dcsr/data/__init__.py",
                     "src/dcsr/data/answers.py", "src/dcsr/data/tokens.py"}
    before = code_version.__wrapped__(str(script), str(src))
    (src / "dcsr" / "other.py").write_text("Y = 2\n")  # not reached: the same version
    assert code_version.__wrapped__(str(script), str(src)) == before
    (src / "dcsr" / "data" / "tokens.py").write_text("X = 2\n")  # reached through answers.py
    assert code_version.__wrapped__(str(script), str(src)) != before


def test_every_rule_passes_the_version_of_the_script_it_runs():
    for path in sorted((REPO / "rules").glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        scripts = re.findall(r'script=f"\{SCRIPTS\}/([\w.]+)",\n\s+code=plan\.code_version\("([\w.]+)"\)', text)
        assert all(a == b for a, b in scripts), path
        assert len(scripts) == text.count('script=f"{SCRIPTS}/'), path
        assert text.count("script=ATTRIBUTION_REPORT,") == text.count('code=plan.code_version("attribution_report.py")')
    # the scoring script reaches answer matching: an edit there reruns evaluation
    reached = {p.name for p in reached_files(REPO / "workflow" / "scripts" / "evaluate_topk.py", REPO / "src")}
    assert "answers.py" in reached
