"""Strict YAML for the project's own files: a duplicated key is an error, not a silent overwrite.

PyYAML (like most YAML readers) keeps the *last* of two equal keys of a mapping without a word,
so a block pasted twice, or a key set in two places of a config, silently changes a result.
:func:`strict_load` reads YAML as ``yaml.safe_load`` does, but raises
:class:`~dcsr.errors.InputError` naming the file, the line and the key::

    config/x.yaml:12: duplicate key 'dcsr_appendix_b' (first at line 3)

and, for YAML that does not parse, the file and the line of the problem. Merge keys (``<<``) keep
their meaning: keys a mapping sets itself may override merged ones.

Cheap to import (PyYAML only), for the Snakefile and command-line entry points.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from dcsr.errors import InputError, at

__all__ = ["StrictLoader", "strict_load"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


#: Deepest nesting of collections a document may have (the project's configs nest 6 deep): past
#: it, PyYAML's recursive composer would end in a RecursionError traceback.
MAX_DEPTH = 64
#: Most nodes a document may stand for with its aliases expanded (the project's largest config has
#: about 2,000): nine levels of ten aliases each ("billion laughs") make 10^9, which every walk of
#: the loaded config (the schema check, the config check) would visit, for hours.
MAX_NODES = 1_000_000
#: The top-level key that asks Snakemake to run a config through YTE, whose ``?`` expressions
#: are Python that runs while the file is read.
YTE_KEY = "__use_yte__"


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose mappings refuse a key given twice, whose documents nest at most
    :data:`MAX_DEPTH` deep and stand for at most :data:`MAX_NODES` nodes with aliases expanded.

    ``where`` (set by :func:`strict_load`) names the source in messages.
    """

    where = "<yaml>"
    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise InputError(at(self.where, mark.line + 1), f"YAML nested more than {MAX_DEPTH} levels deep; "
                                                                 "a config nests a few levels: flatten it")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        seen: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes with aliases expanded, height)

        def measure(n, depth: int) -> tuple[int, int]:
            if id(n) in seen:
                size, height = seen[id(n)]
            else:
                seen[id(n)] = (0, 0)  # a recursive alias (&a [*a]) adds nothing more
                children = ([c for kv in n.value for c in kv] if isinstance(n, yaml.MappingNode)
                            else n.value if isinstance(n, yaml.SequenceNode) else [])
                size, height = 1, 1
                for c in children:
                    if depth + 1 > MAX_DEPTH:
                        break
                    s, h = measure(c, depth + 1)
                    size, height = min(size + s, MAX_NODES + 1), max(height, h + 1)
                seen[id(n)] = (size, height)
            if depth + height - 1 > MAX_DEPTH:
                raise InputError(self.where, f"its aliases (*name) nest the document more than {MAX_DEPTH} levels "
                                             "deep; write the config without them")
            return size, height

        if node is not None and measure(node, 1)[0] > MAX_NODES:
            raise InputError(self.where, f"its aliases (*name) expand to more than {MAX_NODES:,} YAML nodes (an alias "
                                         "bomb, 'billion laughs'); a config is a few thousand: write it without them")
        return node

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:
                    continue  # SafeConstructor reports unhashable keys itself
                line = key_node.start_mark.line + 1
                if key in first:
                    raise InputError(at(self.where, line), f"duplicate key {key!r} (first at line {first[key]})")
                first[key] = line
        return super().construct_mapping(node, deep=deep)


def _is_path(source) -> bool:
    if isinstance(source, os.PathLike):
        return True
    if "\n" in source:
        return False
    return os.path.exists(source) or source.endswith((".yaml", ".yml", ".json"))


def strict_load(path_or_text: str | os.PathLike, where: str | None = None):
    """The YAML document of a file (a ``Path``, or a ``str`` naming a file: no newline, and an
    existing path or a ``.yaml``/``.yml``/``.json`` name) or of YAML text (any other ``str``).

    ``where`` names the source in messages (default: the path, or ``<yaml>`` for text). Raises
    :class:`InputError` (``where:line: ...``) for a duplicated key, YAML that does not parse, or a
    file that cannot be read.
    """
    if _is_path(path_or_text):
        path = Path(path_or_text)
        where = str(path) if where is None else where
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise InputError(where, "no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(where, f"cannot be read: {e}") from None
    else:
        text, where = path_or_text, ("<yaml>" if where is None else where)
    loader = StrictLoader(text)
    loader.where = where
    try:
        doc = loader.get_single_data()
        if isinstance(doc, dict) and YTE_KEY in doc:
            raise InputError(where, f"asks for YTE templating ({YTE_KEY}), whose '?' expressions are Python run "
                                    "while the file is read; this workflow takes plain YAML only: write the values out")
        return doc
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = e.problem or e.context or "not valid YAML"
        context = f" ({e.context} at line {e.context_mark.line + 1})" if e.context and e.context_mark and e.problem else ""
        raise InputError(at(where, mark.line + 1 if mark else None), f"malformed YAML: {problem}{context}") from None
    except yaml.YAMLError as e:
        raise InputError(where, f"malformed YAML: {e}") from None
    finally:
        loader.dispose()
