"""config/README.md documents every config key, generated from the code's definitions
(config/schema.yaml and dcsr.settings) by dcsr.pipeline.config_docs, and stays current."""

import subprocess
import sys

import yaml

from dcsr import settings
from dcsr.pipeline.config_docs import SCHEMA, reference, schema_keys

REGENERATE = "python -m dcsr.pipeline.config_docs > config/README.md"


def _schema(repo):
    return yaml.safe_load((repo / "config" / "schema.yaml").read_text())


def test_config_readme_is_the_generated_reference(repo):
    assert SCHEMA == repo / "config" / "schema.yaml"
    assert (repo / "config" / "README.md").read_text() == reference(), \
        f"config/README.md is out of date: regenerate it with `{REGENERATE}`"


def test_the_reference_holds_the_settings_reference(repo):
    text = reference(repo / "config" / "schema.yaml")
    assert text.endswith(settings.reference())
    assert "| key | type | what it is |" in text
    for name in ("config/config.yaml", "config/generated.yaml", "config/squad.yaml", "config/paper.yaml",
                 REGENERATE):
        assert name in text, name


def test_the_module_prints_the_reference(repo):
    r = subprocess.run([sys.executable, "-m", "dcsr.pipeline.config_docs"], capture_output=True, text=True, cwd=repo,
                       timeout=60, check=True)
    assert r.stdout == reference()


def _properties(node, where="", found=None):
    """``(place, property schema)`` of every key under every ``properties:`` of the schema,
    ``$defs`` included, at any depth."""
    found = [] if found is None else found
    if isinstance(node, dict):
        for name, prop in (node.get("properties") or {}).items():
            found.append((f"{where}.properties.{name}", prop))
        for key, value in node.items():
            _properties(value, f"{where}.{key}", found)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _properties(value, f"{where}[{i}]", found)
    return found


def test_every_schema_property_has_a_description(repo):
    props = _properties(_schema(repo))
    assert len(props) > 100
    missing = [where for where, prop in props
               if not (isinstance(prop, dict) and isinstance(prop.get("description"), str) and prop["description"].strip())]
    assert not missing, f"config/schema.yaml: properties without a description: {missing}"


def test_every_key_is_described_in_the_readme(repo):
    keys = schema_keys(_schema(repo))
    readme = (repo / "config" / "README.md").read_text()
    assert len(keys) == len({path for path, _, _ in keys})
    undescribed = [path for path, _, description in keys if not description]
    assert not undescribed, undescribed
    absent = [path for path, _, _ in keys if f"| `{path}` |" not in readme]
    assert not absent, f"not in config/README.md (regenerate it with `{REGENERATE}`): {absent}"
    for path in ("seed", "corpora.<name>.generate.n_entities", "datasets.<name>.files.train",
                 "tables.<name>.rows[].label", "claims[].metric", "claims[].baseline.question",
                 "attribution.sweep.seed", "downloads.retries", "resources.<name>.threads", "encoders.<name>"):
        assert path in {p for p, _, _ in keys}, path


def test_schema_keys_walks_properties_names_items_alternatives_and_refs():
    schema = {
        "$defs": {
            "limits": {"type": "object", "description": "limits",
                       "properties": {"low": {"type": "integer", "minimum": 1, "description": "lowest"}}},
        },
        "type": "object",
        "properties": {
            "top": {"type": "string", "description": "a top key"},
            "nested": {
                "type": "object", "description": "nested",
                "properties": {"inner": {"type": "object", "description": "inner",
                                         "properties": {"leaf": {"type": "number", "exclusiveMinimum": 0,
                                                                 "maximum": 1, "description": "a leaf"}}}},
            },
            "named": {
                "type": "object", "description": "by name",
                "additionalProperties": {"type": "object", "description": "one",
                                         "properties": {"size": {"type": "integer", "description": "its size"}}},
            },
            "listed": {
                "type": "array", "description": "a list",
                "items": {"type": "object", "description": "an item",
                          "properties": {"label": {"type": "string", "description": "its label"},
                                         "limits": {"$ref": "#/$defs/limits", "description": "its limits"}}},
            },
            "either": {
                "description": "a word or a pair",
                "oneOf": [{"type": "string"},
                          {"type": "object", "properties": {"left": {"type": "string", "description": "left"}}}],
            },
            "mode": {"enum": ["a", "b"], "description": "a mode"},
        },
    }
    assert schema_keys(schema) == [
        ("top", "string", "a top key"),
        ("nested", "object", "nested"),
        ("nested.inner", "object", "inner"),
        ("nested.inner.leaf", "number > 0 and <= 1", "a leaf"),
        ("named", "object", "by name"),
        ("named.<name>", "object", "one"),
        ("named.<name>.size", "integer", "its size"),
        ("listed", "array of object", "a list"),
        ("listed[]", "object", "an item"),
        ("listed[].label", "string", "its label"),
        ("listed[].limits", "object", "its limits"),  # the property's own description wins over the $def's
        ("listed[].limits.low", "integer >= 1", "lowest"),
        ("either", "string or object", "a word or a pair"),
        ("either.left", "string", "left"),
        ("mode", "`a` or `b`", "a mode"),
    ]
