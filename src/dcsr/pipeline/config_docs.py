"""config/README.md, generated from the code's definitions of the config.

Two definitions check a config when Snakemake builds the DAG: the JSON schema
``config/schema.yaml`` (the shape of every section, each key with a ``description``) and
:mod:`dcsr.settings` (the settings sections, with types, defaults, allowed values and help).
:func:`reference` writes both as one Markdown reference:

    python -m dcsr.pipeline.config_docs > config/README.md

and a test (tests/test_config_docs.py) keeps the file equal to it. Nothing here imports torch.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Mapping

import yaml

from dcsr import settings

#: The repository's schema (src/dcsr/ -> ../../config/schema.yaml).
SCHEMA = Path(__file__).resolve().parents[3] / "config" / "schema.yaml"


def _resolve(node: Any, root: Mapping) -> Any:
    """``node`` with a local ``$ref`` (``#/$defs/...``) followed; the node's own keys (its
    ``description``) win over the target's."""
    seen = set()
    while isinstance(node, Mapping) and "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/") or ref in seen:
            raise ValueError(f"unsupported or circular $ref {ref!r}")
        seen.add(ref)
        target: Any = root
        for part in ref[2:].split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _alternatives(node: Mapping) -> list:
    return [*node.get("oneOf", []), *node.get("anyOf", [])]


def _num(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _literal(value) -> str:
    if value is True or value is False:
        return "`true`" if value else "`false`"
    return "`null`" if value is None else f"`{value}`"


def type_text(node: Any, root: Mapping) -> str:
    """A schema node's type in words: ``integer >= 1``, ``number > 0 and <= 1``,
    ``array of string``, ``` `dpr` or `dcsr` ```, ``string or object``."""
    node = _resolve(node, root)
    if not isinstance(node, Mapping):
        return ""
    if "const" in node:
        return _literal(node["const"])
    if "enum" in node:
        values = [_literal(v) for v in node["enum"]]
        return " or ".join(values) if len(values) <= 2 else "one of " + ", ".join(values)
    types = node.get("type")
    if types is None:
        alts = [t for t in (type_text(a, root) for a in _alternatives(node)) if t]
        return " or ".join(dict.fromkeys(alts))
    names = []
    for t in [types] if isinstance(types, str) else types:
        if t == "array" and isinstance(node.get("items"), Mapping):
            item = type_text(node["items"], root)
            names.append(f"array of ({item})" if " " in item else f"array of {item}" if item else "array")
        else:
            names.append(t)
    text = " or ".join(names)
    bounds = [f"{op} {_num(node[key])}" for key, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                          ("maximum", "<="), ("exclusiveMaximum", "<"))
              if key in node]
    return f"{text} {' and '.join(bounds)}" if bounds else text


def schema_keys(schema: Mapping, root: Mapping | None = None, path: str = "") -> list[tuple[str, str, str]]:
    """Every key of ``schema``, in schema order, as ``(path, type text, description)``.

    A key under ``properties`` is ``parent.key``; the free names of ``additionalProperties``
    are ``parent.<name>``; the items of an array ``parent[]``. ``oneOf``/``anyOf`` alternatives
    and ``$ref``s into ``$defs`` are followed (a path given by two alternatives is listed once).
    """
    root = schema if root is None else root
    rows: list[tuple[str, str, str]] = []
    seen: set[str] = set()

    def add(child_path: str, child: Any) -> None:
        node = _resolve(child, root)
        if child_path not in seen:
            seen.add(child_path)
            description = node.get("description", "") if isinstance(node, Mapping) else ""
            rows.append((child_path, type_text(node, root), " ".join(str(description).split())))
        walk(node, child_path)

    def walk(node: Any, at: str) -> None:
        node = _resolve(node, root)
        if not isinstance(node, Mapping):
            return
        for name, child in (node.get("properties") or {}).items():
            add(f"{at}.{name}" if at else str(name), child)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            add(f"{at}.<name>" if at else "<name>", extra)
        items = node.get("items")
        if isinstance(items, Mapping):
            add(f"{at}[]", items)
        for alternative in _alternatives(node):
            walk(alternative, at)

    walk(schema, path)
    return rows


def _cell(text: str) -> str:
    """Table-cell text: ``|`` would end the cell and ``<name>`` read as an HTML tag."""
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text.replace("|", "\\|"))


INTRO = """\
# Config keys

The pipeline reads one YAML config (`snakemake --configfile FILE ...`; a later file overlays an
earlier one): the corpora and question sets, the encoders and the bi-encoders trained from them,
the tables and claims to produce, and the settings of every stage.

- `config/config.yaml` is the default (`make demo`, a bare `snakemake`): both papers' experiments
  on real text (36 SQuAD v1.1 articles vendored in `resources/squad/`), offline, on a CPU.
- `config/generated.yaml` is the generated multi-domain data (the demo encyclopedia) that the
  tests run on.
- `config/squad.yaml` is DCSR on SQuAD v1.1 made into an open-retrieval dataset.
- `config/paper.yaml` is both papers at full scale on DPR's downloaded files.

Every key is checked when Snakemake builds the DAG, before any job runs: the shape of each
section against the JSON schema `config/schema.yaml`, the settings sections against
`src/dcsr/settings.py`, and the names that sections use of each other by `dcsr.pipeline.config`. A wrong
type, a value out of range or an unknown key stops `snakemake -n` within seconds, naming the
key where it sits.

This file is generated from those definitions, `python -m dcsr.pipeline.config_docs > config/README.md`
(`src/dcsr/pipeline/config_docs.py`); a test keeps it current. Edit the schema's `description`s or
`src/dcsr/settings.py`, not this file.

## Every key

`<name>` stands for a name of your choice (a corpus, a dataset, a model, a rule, a test set);
`[]` for each item of a list. The keys of the settings sections (`train`, `dcsr`, `bm25`, `mining`,
`embed`, `index`, `search`, `evaluate`, and a model's own `train`) are under [Settings](#settings).
"""


def keys_table(schema: Mapping) -> str:
    rows = ["| key | type | what it is |", "|---|---|---|"]
    for path, type_, description in schema_keys(schema):
        rows.append(f"| `{path}` | {_cell(type_)} | {_cell(description)} |")
    return "\n".join(rows)


def reference(schema_path: str | Path = SCHEMA) -> str:
    """The whole of config/README.md: the introduction, every key of the schema, and every
    setting (:func:`dcsr.settings.reference`)."""
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    return "\n".join([INTRO, keys_table(schema), "", settings.reference()])


if __name__ == "__main__":
    sys.stdout.write(reference(sys.argv[1] if len(sys.argv) > 1 else SCHEMA))
