"""One kind of vectors in a merged run: the shards of one (corpus, passage encoder) must have
been embedded alike.

Each embedding job writes ``results/embeddings/<corpus>/<model>/shard-<n>.json`` beside its
vectors: its stats, the compute ``precision``, the ``backend`` that ran the passage encoder,
and the ``kind`` (host, precision, runtime: :func:`dcsr.models.precision.kind_key`). A shard
embedded again elsewhere (a GPU node, ``embed.precision`` or ``embed.backend`` changed and one
shard rerun) holds vectors whose scores differ from the others' by more than the ties the
merge breaks, so a run merged from both ranks two kinds against each other, and its pins
judge it against one kind. The merge refuses it, naming two shards that differ.
"""

from __future__ import annotations

import json
import os
from typing import Sequence

from dcsr.errors import InputError

#: What two shards of one run must share.
SAME = ("precision", "backend", "kind")


def read_shard_stats(path: str | os.PathLike) -> dict:
    """An embedding job's ``shard-<n>.json``."""
    try:
        with open(path, encoding="utf-8") as fh:
            stats = json.load(fh)
    except (OSError, ValueError) as e:
        raise InputError(str(path), f"is not an embedding shard's stats file ({e}); embed the shard again") from None
    if not isinstance(stats, dict):
        raise InputError(str(path), "is not an embedding shard's stats file (not a JSON object); embed the shard again")
    return stats


def check_one_kind(stats_files: Sequence[str | os.PathLike]) -> dict:
    """The shards' common ``{precision, backend, kind}``, or an :class:`InputError` naming the
    first shard and one that differs from it in what both record (a key one of them lacks, from
    a job older than the key, is not compared)."""
    first, common = None, {}
    for path in stats_files:
        stats = read_shard_stats(path)
        if first is None:
            first, common = path, {k: stats[k] for k in SAME if k in stats}
            continue
        differ = [k for k in SAME if k in stats and k in common and stats[k] != common[k]]
        if differ:
            ours = ", ".join(f"{k} {common[k]}" for k in differ)
            theirs = ", ".join(f"{k} {stats[k]}" for k in differ)
            raise InputError(str(path), f"was embedded with {theirs}, but {first} with {ours}: the shards of one "
                                        "corpus and passage encoder must be embedded alike, or the merged run ranks "
                                        "vectors of two kinds against each other; embed the shards that differ "
                                        "again with the others' embed.precision, embed.backend and device")
        common.update({k: stats[k] for k in SAME if k in stats and k not in common})
    return common
