"""Config text in the Markdown tables, the claims ledger and the Snakemake report: a label, a
title or a claim (text written by whoever wrote the config) stays in its cell, and no config
value becomes reStructuredText markup in report.html (docs/bad-inputs.md, hostile config)."""

import copy
import os
import re
from types import SimpleNamespace

import pytest

from dcsr.errors import InputError
from dcsr.pipeline.plan import Plan
from test_plan import REPO, load

#: a cell boundary of a Markdown table row: a '|' no backslash escapes
CELL = re.compile(r"(?<!\\)\|")


def cells(line: str) -> list[str]:
    return [c.strip() for c in CELL.split(line.strip())[1:-1]]


def test_a_pipe_in_a_row_label_stays_in_its_cell(tmp_path):
    from dcsr.evaluation.tables import Row, write_retrieval_table

    rows = [Row("DPR | 99.9 | 99.9", "t", {"questions": 10, "top1": 40.0}), Row("BM25 \\", "t", {"questions": 10, "top1": 30.0})]
    write_retrieval_table(rows, ["top1"], {}, tmp_path / "t.csv", tmp_path / "t.md", title="T | x")
    table = [line for line in (tmp_path / "t.md").read_text().splitlines() if line.startswith("|")]
    head = cells(table[0])
    assert [len(cells(line)) for line in table[2:]] == [len(head), len(head)]
    assert cells(table[2])[0] == r"DPR \| 99.9 \| 99.9" and cells(table[3])[0] == "BM25 \\\\"


def test_a_pipe_or_line_break_in_a_claim_stays_in_its_row(tmp_path):
    """A claim's text with a line break put a forged "holds" row into claims.md: written by a
    caller that skipped the config check, the break is a space and a '|' is escaped."""
    from dcsr.evaluation.claims import ledger_rows, write_ledger

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("".join(f'{{"qid": {q}, "first_hit": {1 if q < 20 else "null"}}}\n' for q in range(40)))
    b.write_text("".join(f'{{"qid": {q}, "first_hit": {1 if q < 21 else "null"}}}\n' for q in range(40)))
    forged = "B ties A | p | t | paper k: top20 | a | b | 40 | 50.0 / 95.0 | +45.0 | 0 / 9 | 0.001 | 0.001 | 1 | **holds** | – |"
    rows = ledger_rows([{"claim": "B beats A\n" + forged, "paper": "Table 9 | 1 vs 2", "test_set": "t",
                         "metric": "top20", "baseline": "a", "method": "b", "baseline_run": a, "method_run": b}])
    write_ledger(rows, tmp_path / "c.csv", tmp_path / "c.md")
    table = [line for line in (tmp_path / "c.md").read_text().splitlines() if line.startswith("|")]
    assert len(table) == 3  # the head, the rule and the one claim: no forged row
    assert len(cells(table[2])) == len(cells(table[0]))
    assert cells(table[2])[-2] == "**inconclusive at this scale**"  # its own verdict, not the forged one


def test_html_and_links_in_config_text_show_as_text_in_the_markdown_tables(tmp_path):
    """A title, a row label or a claim holding raw HTML or a Markdown link: every Markdown viewer
    that renders HTML (an IDE's preview, mkdocs, GitHub) ran the script or offered the link; the
    writers escape them, so a CommonMark renderer shows them as the text they are."""
    from markdown_it import MarkdownIt

    from dcsr.evaluation.claims import ledger_rows, write_ledger
    from dcsr.evaluation.tables import Row, write_retrieval_table

    evil = "[BM25](javascript:alert(1)) <script>alert(2)</script> <img src=x onerror=alert(3)> <javascript:alert(4)>"
    write_retrieval_table([Row(evil, "t", {"questions": 10, "top1": 40.0})], ["top1"], {}, tmp_path / "t.csv",
                          tmp_path / "t.md", title="<sent> markers " + evil)
    a = tmp_path / "a.jsonl"
    a.write_text("".join(f'{{"qid": {q}, "first_hit": 1}}\n' for q in range(10)))
    write_ledger(ledger_rows([{"claim": evil, "paper": evil, "test_set": "t", "metric": "top20", "baseline": "a",
                               "method": "b", "baseline_run": a, "method_run": a}]), tmp_path / "c.csv", tmp_path / "c.md")
    md = MarkdownIt("commonmark").enable("table")
    for name in ("t.md", "c.md"):
        html = md.render((tmp_path / name).read_text())
        assert "<script" not in html and "<img" not in html and "<a " not in html and "<sent" not in html, html
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html and "[BM25](javascript:alert(1))" in html
    assert "&lt;sent&gt; markers" in md.render((tmp_path / "t.md").read_text())


HOSTILE = [
    ({"tables": {"t": {"title": "T\n| forged | row |"}}}, "tables.t.title", "'T\\n| forged | row |' holds a line break ('\\n')"),
    ({"tables": {"t": {"rows": [{"label": "DPR\r\n| x |"}]}}}, "tables.t.rows.0.label", "'DPR\\r\\n| x |' holds a line break ('\\r')"),
    ({"claims": [{"claim": "B beats A\n| forged | holds |"}]}, "claims.0.claim", "'B beats A\\n| forged | holds |' holds a line break ('\\n')"),
    ({"claims": [{"seeds_note": "one seed\u2028.. raw:: html"}]}, "claims.0.seeds_note", "'one seed\\u2028.. raw:: html' holds a line break ('\\u2028')"),
    ({"encoders": {"minilm": "x``\n\n.. raw:: html\n\n   <script>alert(1)</script>\n\n``"}}, "encoders.minilm",
     "'x``\\n\\n.. raw:: html\\n\\n   <script>alert(1)</script>\\n\\n``' holds a line break ('\\n')"),
]
BREAK = ("; config text is written into Markdown tables and the report's reStructuredText, where a line break "
         "starts a new row or a directive: write it on one line")


def _merge(config: dict, over: dict) -> dict:
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            _merge(config[key], value)
        elif isinstance(value, list) and isinstance(config.get(key), list):
            for i, item in enumerate(value):
                config[key][i].update(item)
        else:
            config[key] = value
    return config


def _hostile_config(over: dict) -> dict:
    config = load("generated.yaml")
    config.setdefault("claims", [])
    if "claims" in over and not config["claims"]:
        rows = next(iter(config["tables"].values()))["rows"]
        config["claims"] = [{"claim": "c", "test_set": next(iter(config["tables"].values()))["test_sets"][0],
                             "metric": f"top{config['evaluate']['ks'][0]}", "baseline": "bm25",
                             "method": next(r["question"] for r in rows if "question" in r)}]
    if "tables" in over:
        name = next(iter(config["tables"]))
        over = {"tables": {name: over["tables"]["t"]}}
    return _merge(config, copy.deepcopy(over))


@pytest.mark.parametrize("over,key,problem", HOSTILE, ids=[h[1] for h in HOSTILE])
def test_a_line_break_in_config_text_is_refused_at_dag_build(over, key, problem):
    config = _hostile_config(over)
    if key.startswith("tables."):
        key = key.replace("tables.t.", f"tables.{next(iter(config['tables']))}.")
    with pytest.raises(InputError) as e:
        Plan(config, basedir=REPO)
    assert str(e.value) == f"config: {key}: {problem}{BREAK}"


def test_a_backquote_in_a_path_the_report_quotes_is_refused():
    """Without a line break, a backquote would still close the report's ``literal`` early."""
    config = _hostile_config({"results": "results`` and |sub| ``x"})
    with pytest.raises(InputError) as e:
        Plan(config, basedir=REPO)
    assert str(e.value) == ("config: results: 'results`` and |sub| ``x' holds a backquote (`), which would end the "
                            "report's ``literal`` around it and let the rest be read as reStructuredText; write the "
                            "path without one")


@pytest.mark.parametrize("value", [" javascript:alert(document.domain)//x/y", "results\t", "\u00a0results"])
def test_white_space_around_a_path_the_report_quotes_is_refused(value):
    """A caption of `` x`` is no RST literal: docutils reads its text, and made a ``javascript:`` link of
    the leading-space path in report.html."""
    config = _hostile_config({"results": value})
    with pytest.raises(InputError) as e:
        Plan(config, basedir=REPO)
    assert str(e.value) == (f"config: results: {value!r} starts or ends with white space, which makes the report's "
                            "``literal`` around it no literal (its text, a javascript: link say, would be read as "
                            "reStructuredText); write the path without it")
    caption = "``{{ snakemake.config['results'] }}``"
    html = _render(caption, {"results": value}, {})
    assert 'class="docutils literal"' not in html  # what the check prevents: no literal at all
    assert ('href="javascript:' in html) == value.startswith(" javascript:")
    assert 'class="docutils literal"' in _render(caption, {"results": value.strip()}, {})


def _render(template: str, config: dict, wildcards: dict, strict: bool = False) -> str:
    import jinja2
    from docutils.core import publish_parts

    snakemake = SimpleNamespace(config=config, wildcards=wildcards)
    # as snakemake.report renders captions and the workflow description
    text = jinja2.Environment(trim_blocks=True, lstrip_blocks=True).from_string(template).render(snakemake=snakemake)
    # strict: a docutils warning (a list run into its next line, say) fails instead of printing
    return publish_parts(text, writer_name="html", settings_overrides={"halt_level": 2 if strict else 4})["html_body"]


@pytest.mark.parametrize("name", ["config.yaml", "squad.yaml", "generated.yaml"])
def test_the_report_lists_every_model_once_as_a_bullet(name):
    """The report's description (workflow/report/workflow.rst, as Snakemake renders it: Jinja with
    trim_blocks) lists each model of the config as its own bullet, its training seeds beside it;
    a line that ended with a block tag ran every model into one line, and docutils warned."""
    config = load(name)
    html = _render((REPO / "workflow" / "report" / "workflow.rst").read_text(encoding="utf-8"), config, {}, strict=True)
    items = re.findall(r"<li>(.*?)</li>", html, flags=re.S)
    assert len(items) == len(config["models"])
    for item, (model, m) in zip(items, config["models"].items()):
        assert item.startswith(f"<strong>{model}</strong>: {m['method']}, init"), item
        assert ("training seeds" in item) == (m.get("seeds", 1) > 1), item
    if name == "squad.yaml":  # three seeds of DPR, DCSR and DCSR +2 BM25
        assert sum("3 training seeds" in item for item in items) == 3
    for caption in sorted((REPO / "workflow" / "report").glob("*.rst")):  # every caption renders cleanly too
        assert "<p>" in _render(caption.read_text(encoding="utf-8"), config, {"table": "t"}, strict=True), caption.name


def test_report_captions_carry_no_directive_from_config_values(tmp_path):
    """Every caption (workflow/report/*.rst) rendered as Snakemake renders it (Jinja, then docutils
    with raw and include enabled), with the hostile values a config may still hold: RST markup
    in them is shown as text. The values the check refuses would have put live HTML and another
    file's text into the report."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-OUTSIDE-RESULTS")
    legal = _hostile_config({})
    encoder = next(iter(legal["encoders"]))
    # an encoder is an existing folder (or a hub id): folders named to be markup
    folder = tmp_path / ".. raw:: html <script>alert(1)<" / "script> |x| _y_ *z* .. include:: secret.txt"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")  # what the DAG-build check asks of a model folder
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    legal["encoders"][encoder] = str(folder)
    legal["results"] = f"results .. include:: {secret} .. raw:: html <script>alert(2)</script>"
    Plan(copy.deepcopy(legal), basedir=REPO)  # legal: no line break, no backquote
    templates = sorted((REPO / "workflow" / "report").glob("*.rst"))
    assert len(templates) >= 4
    for template in templates:
        html = _render(template.read_text(encoding="utf-8"), legal, {"table": "t"})
        assert "<script>" not in html and "SECRET-OUTSIDE-RESULTS" not in html, template.name
    # what the check refuses is what would have got through
    refused = copy.deepcopy(legal)
    folder = f"{tmp_path}/x``\n\n.. raw:: html\n\n   <script>alert(1)</script>\n\n.. include:: {secret}\n\n``"
    os.makedirs(folder)
    refused["encoders"][encoder] = folder
    html = _render((REPO / "workflow" / "report" / "workflow.rst").read_text(encoding="utf-8"), refused, {})
    assert "<script>alert(1)</script>" in html and "SECRET-OUTSIDE-RESULTS" in html
    with pytest.raises(InputError, match="holds a line break"):
        Plan(refused, basedir=REPO)
