"""Random access to a corpus's passages by id, for scoring runs at 21M passages.

Scoring a run needs the texts of the passages it retrieved (DPR's ``has_answer``), a few
hundred thousand ids spread over the whole corpus. Streaming DPR's 21M-passage
``psgs_w100.tsv.gz`` for them takes minutes per run, and the papers' matrix scores hundreds of
runs. A *store* is written once per corpus, in one streaming pass:

- ``passages.jsonl``: one passage per line, ``[id, text, title]`` as JSON (so no record spans
  lines, whatever quoting the TSV used), in corpus order;
- ``ids.npy`` (int64, sorted) and ``offsets.npy`` (int64): each id's byte offset in it, each
  sealed with its checksum (:mod:`dcsr.integrity`), checked when a store is opened.
  ``passages.jsonl`` has none (checking it would read 13 GB at every open); each line read is
  checked to be the passage the arrays put there, so an edit to it is an InputError.

:meth:`PassageStore.get` then reads only the wanted lines (memory-mapped index, seeks in file
order), and :meth:`PassageStore.shard` one embedding shard's rows. The texts are exactly
:func:`dcsr.data.formats.iter_passages`'s, which checks every row of the corpus while the store is
built.
"""

from __future__ import annotations

import json
import os
from array import array
from pathlib import Path
from typing import Iterable

import numpy as np

from dcsr.errors import InputError
from dcsr.data.formats import Passage, iter_passages, output_folder, passage_texts
from dcsr.data.literals import JSON_LIMITS
from dcsr.fsutil import atomic_open, atomic_path
from dcsr.integrity import load_array, seal, warn_unverified

TEXT, IDS, OFFSETS = "passages.jsonl", "ids.npy", "offsets.npy"


def store_files(directory: str | os.PathLike) -> dict[str, Path]:
    d = Path(directory)
    return {"passages": d / TEXT, "ids": d / IDS, "offsets": d / OFFSETS}


def build_store(corpus: str | os.PathLike, directory: str | os.PathLike, progress: bool = False) -> int:
    """Write the store of ``corpus`` (a DPR passage TSV, ``.gz`` or not) into ``directory``.

    Every file is written atomically; a corpus with a bad row or a repeated passage id raises
    :class:`InputError` (naming the file and line, or the id) and leaves no store behind.
    Returns the number of passages.
    """
    files = store_files(directory)
    with output_folder(files["passages"].parent):  # no empty store folder left on an error
        return _build_store(corpus, files, progress)


def _build_store(corpus, files: dict[str, Path], progress: bool) -> int:
    ids, offsets = array("q"), array("q")  # 8 B per passage each (a list would hold 36 B per int)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(unit=" passages", desc="store", mininterval=5)
    with atomic_open(files["passages"], "wb") as fh:
        pos = 0
        for p in iter_passages(corpus):
            line = (json.dumps([p.id, p.text, p.title], ensure_ascii=False) + "\n").encode("utf-8")
            fh.write(line)
            ids.append(p.id)
            offsets.append(pos)
            pos += len(line)
            if bar is not None:
                bar.update(1)
        id_arr = np.frombuffer(ids, dtype=np.int64)
        off_arr = np.frombuffer(offsets, dtype=np.int64)
        del ids, offsets
        order = np.argsort(id_arr, kind="stable")
        id_arr, off_arr = id_arr[order], off_arr[order]
        dup = np.flatnonzero(id_arr[1:] == id_arr[:-1])
        if len(dup):  # iter_passages reports a repeated id with its line; this is a last check
            raise InputError(str(corpus), f"passage id {int(id_arr[dup[0]])} occurs more than once; "
                                          "passage ids must be unique")
        for key, arr in (("ids", id_arr), ("offsets", off_arr)):
            with atomic_path(files[key], suffix=".npy") as tmp:
                with open(tmp, "wb") as out:
                    np.save(out, arr)
                seal(tmp)
    if bar is not None:
        bar.close()
    return len(id_arr)


class PassageStore:
    """Read passages by id from a store written by :func:`build_store`."""

    def __init__(self, directory: str | os.PathLike):
        self.files = store_files(directory)
        missing = [str(p) for p in self.files.values() if not p.exists()]
        if missing:
            raise InputError(str(directory), f"not a passage store (missing {', '.join(missing)})")
        self.ids = self._load("ids", directory)
        self.offsets = self._load("offsets", directory)

    def _load(self, key: str, directory) -> np.ndarray:
        """A store array, memory-mapped, its checksum checked (a store written before checksums
        is read with a warning)."""
        fix = f"delete the passage store {directory} and build it again with build_passage_store.py"
        try:
            arr, verified = load_array(self.files[key], fix, mmap_mode="r")
        except InputError:
            raise
        except (ValueError, EOFError, OSError):
            raise InputError(str(self.files[key]), f"not a readable .npy array (truncated or corrupt); {fix}") from None
        if not verified:
            warn_unverified(self.files[key], fix)
        return arr

    def __len__(self) -> int:
        return len(self.ids)

    def get(self, wanted: Iterable[int]) -> dict[int, Passage]:
        """The passages of the ``wanted`` ids that the corpus has (absent ids are left out)."""
        want = np.unique(np.fromiter((int(w) for w in wanted), dtype=np.int64))
        if not len(want) or not len(self.ids):
            return {}
        pos = np.searchsorted(self.ids, want)
        pos[pos >= len(self.ids)] = 0
        found = np.asarray(self.ids[pos]) == want
        offs = np.sort(np.asarray(self.offsets[pos[found]]))
        return {p.id: p for p in self._read(offs)}

    def shard(self, shard: int, num_shards: int) -> list[Passage]:
        """Rows ``shard, shard + num_shards, ...`` of the corpus, in corpus order (the shards of
        :func:`dcsr.retrieval.embed.shard_passages`), read by offset instead of parsing every row."""
        if not 0 <= shard < num_shards:
            raise ValueError(f"shard {shard} is outside 0..{num_shards - 1}")
        in_corpus_order = np.sort(np.asarray(self.offsets))  # a line's offset grows with its row
        return self._read(in_corpus_order[shard::num_shards])

    def _read(self, offsets: np.ndarray) -> list[Passage]:
        """The passages on the lines at byte ``offsets`` of ``passages.jsonl``, each checked to be
        the one ``ids.npy`` and ``offsets.npy`` put there: ``passages.jsonl`` has no checksum (it
        would be read whole at every open, 13 GB at 21M passages), so a line edited to another
        length moves the lines after it, and an offset then lands inside another line, or on
        another passage."""
        path = self.files["passages"]
        passages = _read_lines(path, offsets)
        if not passages:
            return passages
        pids = np.fromiter((p.id for p in passages), dtype=np.int64, count=len(passages))
        pos = np.minimum(np.searchsorted(self.ids, pids), len(self.ids) - 1)
        moved = (np.asarray(self.ids[pos]) != pids) | (np.asarray(self.offsets[pos]) != np.asarray(offsets))
        if moved.any():
            i = int(np.flatnonzero(moved)[0])
            raise InputError(f"{path}: byte offset {int(offsets[i])}",
                             f"holds passage {int(pids[i])}, which ids.npy and offsets.npy do not place there: "
                             f"{STORE_CHANGED}")
        return passages


#: What to do about a ``passages.jsonl`` changed after its store was built.
STORE_CHANGED = ("the file was changed after the store was built; delete the passage store and build it again with "
                 "build_passage_store.py")


def _read_lines(path: Path, offsets) -> list[Passage]:
    out = []
    with open(path, "rb") as fh:
        for off in offsets:
            fh.seek(int(off))
            line = fh.readline()
            try:
                record = json.loads(line)
            except (UnicodeDecodeError, *JSON_LIMITS):  # JSONDecodeError is a ValueError
                record = None
            if not (isinstance(record, list) and len(record) == 3 and type(record[0]) is int
                    and -(1 << 63) <= record[0] < 1 << 63 and all(isinstance(x, str) for x in record[1:])):
                raise InputError(f"{path}: byte offset {int(off)}",
                                 f"not a passage line [id, text, title] where offsets.npy puts one: {STORE_CHANGED}")
            out.append(Passage(*record))
    return out


def load_passages(corpus: str | os.PathLike, wanted: Iterable[int]) -> dict[int, Passage]:
    """The ``wanted`` passages of ``corpus``: a store directory (random access) or a DPR passage
    TSV (one streaming pass, :func:`dcsr.data.formats.passage_texts`)."""
    if Path(corpus).is_dir():
        return PassageStore(corpus).get(wanted)
    return passage_texts(corpus, set(wanted))
