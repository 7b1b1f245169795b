"""The benchmark pages (BENCHMARKS.md and benchmarks/**/*.md) can be rerun from the repository: no
page names a script outside it (a `/tmp/...py` that lived on one machine); every file of the
repository that they, README.md, docs/ and config/README.md name exists where they say, and every
option they give one of our scripts is one it takes."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# An absolute (or home) path ending in .py or .sh: a script outside the repository. A path inside a
# word, a relative path (`benchmarks/<question>/x.py` too), `.../x.py` (an elided pattern), a glob and a
# URL do not count; neither does /tmp as a results folder (`--config results=/tmp/...`), no script.
OUTSIDE_SCRIPT = re.compile(r"(?<![\w.~:/>-])(~?/[\w.][^\s`'\"()<>\[\]{}|,;*]*\.(?:py|sh))\b")
# A path of the repository (benchmarks/, config/, docs/, ...); one holding a placeholder (<N>, $n,
# {a,b}, *) or under benchmarks/out/ (outputs, not committed) is not checked.
REPO_PATH = re.compile(r"(?<![\w./-])((?:benchmarks|config|docs|envs|profiles|resources|rules|src/dcsr|tests|workflow)"
                       r"/[\w./-]*[\w/])")
PLACEHOLDER = re.compile(r"[<>${}*]")


def pages():
    return [REPO / "BENCHMARKS.md", *sorted((REPO / "benchmarks").rglob("*.md"))]


def user_pages():
    """The benchmark pages and the pages a user reads first: README.md, docs/, config/README.md."""
    return [*pages(), REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "config" / "README.md"]


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


def test_every_repository_path_a_page_names_exists():
    missing, checked = [], 0
    for page in user_pages():
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for m in REPO_PATH.finditer(line):
                path = m.group(1)
                if path.startswith("benchmarks/out/") or PLACEHOLDER.search(line[m.end():m.end() + 1] + path):
                    continue
                checked += 1
                if not (REPO / path).exists():
                    missing.append(f"{where(page, n)}: {path}")
    assert checked > 500, checked  # the pages' paths were found
    assert not missing, "paths named by a page that are not in the repository:\n" + "\n".join(missing)


def test_every_relative_link_of_a_page_resolves():
    link = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
    broken = [f"{where(page, n)}: {target}"
              for page in pages()
              for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
              for target in link.findall(line)
              if "://" not in target and not (page.parent / target).exists()]
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


# A command that runs one of our scripts: `python benchmarks/<question>/x.py ...` or
# `python workflow/scripts/x.py ...`, continued over lines ending in a backslash, up to what the
# shell takes as its end (`;`, `|`, `&`, `>`, a comment, a backtick) or `--` (what follows goes to
# another program: snakemake, for run_paper_mini.py).
OUR_COMMAND = re.compile(r"python[0-9.]*\s+((?:benchmarks|workflow/scripts)/[\w/.-]+\.py)((?:[^`\n;|&>#\\]|\\\\?\n|\\\\?(?=\s))*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
DECLARED = re.compile(r"""["'](--[a-z][\w-]*)["']""")


def command_options(text: str) -> list[tuple[str, str, int]]:
    """``(script, option, line)`` of every option a text passes to one of our scripts."""
    out = []
    for m in OUR_COMMAND.finditer(text):
        args = re.split(r"\s--(?:\s|$)", m.group(2), maxsplit=1)[0]
        line = text.count("\n", 0, m.start()) + 1
        out += [(m.group(1), option, line) for option in OPTION.findall(args)]
    return out


def declared_options(script: Path) -> set[str]:
    """The options a script declares as literals (``add_argument("--x", ...)``), its own and those of
    the benchmarks' shared helpers it imports."""
    text = script.read_text(encoding="utf-8")
    for helper in ("benchmarks_common",):
        if helper in text:
            text += (REPO / "benchmarks" / f"{helper}.py").read_text(encoding="utf-8")
    return set(DECLARED.findall(text))


def help_text(script: Path) -> str:
    """What ``script --help`` prints: for an option made at run time (``f"--{name}"``)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO / "benchmarks")])}
    r = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=REPO, env=env,
                       timeout=120)
    return r.stdout + r.stderr


def test_every_option_a_page_passes_to_a_script_is_one_it_takes():
    """A renamed or dropped option leaves a page's command failing at its first word: every
    `--option` a page (the benchmark pages, their shell scripts, README and docs/) gives one of our
    scripts is declared by it, or printed by its --help where it is made at run time."""
    texts = [*user_pages(), *sorted((REPO / "benchmarks").rglob("*.sh"))]
    unknown, checked, helps = [], 0, {}
    for page in texts:
        for script, option, n in command_options(page.read_text(encoding="utf-8")):
            path = REPO / script
            assert path.is_file(), f"{where(page, n)}: {script} is not in the repository"
            checked += 1
            if option in declared_options(path):
                continue
            if script not in helps:
                helps[script] = help_text(path)
            if not re.search(re.escape(option) + r"(?![\w-])", helps[script]):
                unknown.append(f"{where(page, n)}: {script} {option}")
    assert checked > 100, checked  # the pages' commands were found
    assert not unknown, "options the script does not take:\n" + "\n".join(unknown)


def test_a_command_s_options_are_read_up_to_where_the_shell_ends_it():
    text = ("python benchmarks/demo/prof_train.py --warmup 3 \\\n  --amp off; python benchmarks/x.py --y\n"
            "`python workflow/scripts/run_paper_mini.py --workdir /tmp/pm -- --cores 2 --quiet rules`\n"
            "python benchmarks/hybrid/hybrid.py --results r > out.txt --not-an-option  # --nor-this\n")
    assert command_options(text) == [
        ("benchmarks/demo/prof_train.py", "--warmup", 1), ("benchmarks/demo/prof_train.py", "--amp", 1),
        ("benchmarks/x.py", "--y", 2), ("workflow/scripts/run_paper_mini.py", "--workdir", 3),
        ("benchmarks/hybrid/hybrid.py", "--results", 4)]
