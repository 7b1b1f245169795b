"""How far two embeddings of one corpus shard are apart: per vector, the cosine and the largest
absolute difference between the shards' vectors, for shards written by `embed_shard` with two
settings (precision, backend) over the same model and passages (not a test).

    python benchmarks/precision/shard_cosines.py REF_DIR OTHER_DIR [OTHER_DIR ...] --shard shard-0

Each DIR is an ``embeddings/<corpus>/<model>`` folder; its ``<shard>.npy`` (vectors) and
``<shard>.ids.npy`` are read with their checksums (``dcsr.retrieval.index.load_npy``), and the ids
(and DCSR's sentence numbers, ``<shard>.sents.npy``) must agree row by row.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from dcsr.retrieval.index import load_npy


def _shard(folder: Path, shard: str) -> tuple[np.ndarray, np.ndarray]:
    keys = [load_npy(folder / f"{shard}.ids.npy")]
    if (folder / f"{shard}.sents.npy").exists():
        keys.append(load_npy(folder / f"{shard}.sents.npy"))
    return np.asarray(load_npy(folder / f"{shard}.npy"), dtype=np.float32), np.stack(keys, axis=1)


def compare(ref: np.ndarray, other: np.ndarray) -> dict:
    """Cosines (lowest, median) and the largest absolute difference of two ``[N, H]`` arrays."""
    cos = (ref * other).sum(1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(other, axis=1))
    return {"vectors": int(len(ref)), "lowest_cosine": float(cos.min()), "median_cosine": float(np.median(cos)),
            "max_abs_difference": float(np.abs(ref - other).max()), "equal": bool(np.array_equal(ref, other))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref", type=Path)
    ap.add_argument("others", type=Path, nargs="+")
    ap.add_argument("--shard", default="shard-0")
    a = ap.parse_args()
    ref, ref_keys = _shard(a.ref, a.shard)
    for folder in a.others:
        vecs, keys = _shard(folder, a.shard)
        if not np.array_equal(keys, ref_keys):
            raise SystemExit(f"{folder}: its rows are not {a.ref}'s (ids or sentence numbers differ)")
        print(json.dumps({"ref": str(a.ref), "other": str(folder), **compare(ref, vecs)}))


if __name__ == "__main__":
    main()
