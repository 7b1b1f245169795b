"""The benchmark pages (BENCHMARKS.md and benchmarks/**/*.md) can be rerun from the repository: no
page names a script outside it (a `/tmp/...py` that lived on one machine), and every file of the
repository a page names exists where it says."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# An absolute (or home) path ending in .py or .sh: a script outside the repository. A path inside a
# word, a relative path (`benchmarks/<question>/x.py` too), `.../x.py` (an elided pattern), a glob and a
# URL do not count; neither does /tmp as a results folder (`--config results=/tmp/...`), no script.
OUTSIDE_SCRIPT = re.compile(r"(?<![\w.~:/>-])(~?/[\w.][^\s`'\"()<>\[\]{}|,;*]*\.(?:py|sh))\b")
# A path of the repository's benchmarks/ folder; one holding a placeholder (<N>, $n, {a,b}, *) or
# under benchmarks/out/ (outputs, not committed) is not checked.
REPO_PATH = re.compile(r"(?<![\w./-])(benchmarks/[\w./-]*[\w/])")
PLACEHOLDER = re.compile(r"[<>${}*]")


def pages():
    return [REPO / "BENCHMARKS.md", *sorted((REPO / "benchmarks").rglob("*.md"))]


def where(page: Path, n: int) -> str:
    return f"{page.relative_to(REPO)}:{n}"


def test_the_pages_are_found():
    found = [p.relative_to(REPO).as_posix() for p in pages()]
    assert "BENCHMARKS.md" in found and len(found) > 10, found


def test_no_page_names_a_script_outside_the_repository():
    bad = [f"{where(page, n)}: {m.group(1)}"
           for page in pages()
           for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
           for m in OUTSIDE_SCRIPT.finditer(line)]
    assert not bad, ("scripts outside the repository (put the script in benchmarks/<question>/ and name "
                     "that, or move the numbers to the page's History as not reproducible):\n" + "\n".join(bad))


def test_the_regex_tells_scripts_from_results_folders():
    hits = lambda text: [m.group(1) for m in OUTSIDE_SCRIPT.finditer(text)]  # noqa: E731
    assert hits("script `/tmp/prof/prof_train.py`, the trainer's") == ["/tmp/prof/prof_train.py"]
    assert hits("(`/tmp/pm/bench.sh`); run 3") == ["/tmp/pm/bench.sh"]
    assert hits("python ~/bench/x.py --n 3") == ["~/bench/x.py"]
    assert hits("--config results=/tmp/att/results -- /tmp/att/results/tables/demo.md") == []
    assert hits("python benchmarks/demo/prof_train.py; pgrep -f '^python .../embed_shard.py'") == []
    assert hits("https://github.com/facebookresearch/DPR/blob/main/train_dense_encoder.py") == []
    assert hits("`benchmarks/*.py`, `benchmarks/<question>/x.sh`") == []


def test_every_benchmarks_path_a_page_names_exists():
    missing = []
    for page in pages():
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in REPO_PATH.finditer(line):
                path = m.group(1)
                if path.startswith("benchmarks/out/") or PLACEHOLDER.search(line[m.end():m.end() + 1] + path):
                    continue
                if not (REPO / path).exists():
                    missing.append(f"{where(page, n)}: {path}")
    assert not missing, "paths named by a benchmark page that are not in the repository:\n" + "\n".join(missing)


def test_every_relative_link_of_a_page_resolves():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    broken = [f"{where(page, n)}: {target}"
              for page in pages()
              for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
              for target in link.findall(line)
              if "://" not in target and not (page.parent / target).exists()]
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)
