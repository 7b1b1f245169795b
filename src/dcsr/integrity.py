"""Checksums written when a large artefact is made and checked when it is read.

A FAISS shard index and a ``.npy`` shard (vectors, ids, sentence numbers, question vectors)
end with a fixed 78-byte trailer: ``\\ndcsr-sha256 <64 hex digits>\\n``, the SHA-256 of every
byte before it. The digest travels inside the file because each of these files is a rule's
whole output: a ``<file>.sha256`` beside it would be a file Snakemake does not know about (not
removed when the job reruns, so possibly stale). FAISS and NumPy read a file's structure and
stop, so ``faiss.read_index`` and ``np.load`` (memory-mapped too) read a sealed file unchanged.
Check one by hand: ``head -c -78 FILE | sha256sum`` prints the digest that ``tail -c 65 FILE``
shows.

A file without the trailer (written before checksums were added, or by another tool) is read
unverified, with a warning; a file whose trailer does not match its bytes is an
:class:`~dcsr.errors.InputError`.

A saved bi-encoder records the digests of its weight files in its ``dcsr.json``
(:func:`file_digests`, :func:`check_file_digests`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable, Mapping

from dcsr.errors import InputError

MAGIC = b"\ndcsr-sha256 "
TRAILER_SIZE = len(MAGIC) + 64 + 1
_CHUNK = 1 << 22


def corrupt(path, fix: str) -> InputError:
    """The error for a file whose bytes are not those its checksum was written for."""
    return InputError(str(path), f"does not match the checksum written when it was made; it is corrupt or was "
                                 f"changed: {fix}")


def sha256_of(path: str | os.PathLike, size: int | None = None) -> str:
    """SHA-256 (hex) of the first ``size`` bytes of ``path`` (all of it when None), streamed."""
    h = hashlib.sha256()
    left = os.path.getsize(path) if size is None else size
    with open(path, "rb") as fh:
        while left > 0:
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return h.hexdigest()


def seal(path: str | os.PathLike) -> str:
    """Append the checksum trailer to the file ``path`` (call it on the temporary file, before
    the atomic rename). Returns the digest."""
    digest = sha256_of(path)
    with open(path, "ab") as fh:
        fh.write(MAGIC + digest.encode("ascii") + b"\n")
    return digest


def verify(path: str | os.PathLike, fix: str) -> bool:
    """Check the trailer of ``path``: True when it matches, False when the file has none; a
    trailer that does not match the bytes before it is an :class:`InputError` (``fix`` says
    what to do)."""
    size = os.path.getsize(path)
    if size < TRAILER_SIZE:
        return False
    with open(path, "rb") as fh:
        fh.seek(size - TRAILER_SIZE)
        trailer = fh.read(TRAILER_SIZE)
    if not trailer.startswith(MAGIC):
        return False
    stored = trailer[len(MAGIC):-1]
    if trailer[-1:] != b"\n" or sha256_of(path, size - TRAILER_SIZE).encode("ascii") != stored:
        raise corrupt(path, fix)
    return True


def file_digests(root: str | os.PathLike, names: Iterable[str]) -> dict[str, str]:
    """``{name: sha256}`` of the files ``names`` (paths relative to ``root``)."""
    return {name: sha256_of(Path(root) / name) for name in sorted(names)}


def check_file_digests(root: str | os.PathLike, digests: Mapping[str, str], fix: str) -> None:
    """Every file of ``digests`` (relative to ``root``) exists and has its recorded digest."""
    for name, digest in sorted(digests.items()):
        path = Path(root) / name
        if not path.is_file():
            raise InputError(str(path), f"is missing, but it was written with the model; {fix}")
        if sha256_of(path) != digest:
            raise corrupt(path, fix)
