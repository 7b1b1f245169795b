"""Checks of the pipeline config beyond its JSON schema: cross-references between sections.

The schema (config/schema.yaml) checks types and shapes; this checks that every name a
section uses is defined in another, and reports the offending key as ``config: a.b.c``.
"""

from __future__ import annotations

from .errors import InputError


def _key(*parts) -> str:
    return "config: " + ".".join(str(p) for p in parts)


def check_config(cfg: dict) -> None:
    corpora, datasets, models, encoders = cfg["corpora"], cfg["datasets"], cfg["models"], cfg["encoders"]
    for name, ds in datasets.items():
        if ds["corpus"] not in corpora:
            raise InputError(_key("datasets", name, "corpus"), f"names corpus {ds['corpus']!r}, which is not under 'corpora' ({', '.join(corpora)})")
        if "generated" in ds and "generate" not in corpora[ds["corpus"]]:
            raise InputError(_key("datasets", name, "generated"), f"corpus {ds['corpus']!r} is not generated, so the dataset cannot be")
        if "squad" in ds and ("squad" not in corpora[ds["corpus"]] or name != ds["corpus"]):
            raise InputError(_key("datasets", name, "squad"), "a SQuAD dataset must have the name of its corpus, "
                                                               "and that corpus a 'squad' block")
    for name, m in models.items():
        if m["init"] not in encoders:
            raise InputError(_key("models", name, "init"), f"names encoder {m['init']!r}, which is not under 'encoders' ({', '.join(encoders)})")
        if "train_on" in m and m["train_on"] not in datasets:
            raise InputError(_key("models", name, "train_on"), f"names dataset {m['train_on']!r}, which is not under 'datasets'")
    for tname, table in cfg["tables"].items():
        for i, ts in enumerate(table["test_sets"]):
            if ts not in datasets:
                raise InputError(_key("tables", tname, "test_sets", i), f"names dataset {ts!r}, which is not under 'datasets'")
        for i, row in enumerate(table["rows"]):
            if row.get("retriever") == "bm25":
                continue
            for side in ("question", "passage"):
                if side not in row:
                    raise InputError(_key("tables", tname, "rows", i), f"needs 'retriever: bm25' or both 'question' and 'passage' (missing {side!r})")
                if row[side] not in models:
                    raise InputError(_key("tables", tname, "rows", i, side), f"names model {row[side]!r}, which is not under 'models'")
