"""Checksums written when a large artefact is made and checked when it is read.

A FAISS shard index and a ``.npy`` shard (vectors, ids, sentence numbers, question vectors)
end with a fixed 78-byte trailer: ``\\ndcsr-sha256 <64 hex digits>\\n``, the SHA-256 of every
byte before it. The digest travels inside the file because each of these files is a rule's
whole output: a ``<file>.sha256`` beside it would be a file Snakemake does not know about (not
removed when the job reruns, so possibly stale). FAISS and NumPy read a file's structure and
stop, so ``faiss.read_index`` and ``np.load`` (memory-mapped too) read a sealed file unchanged.
Check one by hand: ``head -c -78 FILE | sha256sum`` prints the digest that ``tail -c 65 FILE``
shows.

The search hits (``.npz``) and a passage store's ``ids.npy`` and ``offsets.npy`` carry it too
(NumPy's zip reader finds an archive's directory from its end, past the trailer).

A file without the trailer (written before checksums were added, or by another tool) is read
unverified, with a warning (:func:`warn_unverified`); a file whose trailer does not match its
bytes is an :class:`~dcsr.errors.InputError`.

A checked file is read once: hashed as it is read (:class:`VerifiedReader`, which FAISS reads
a shard index through), or read into memory and hashed there (:func:`read_verified`,
:func:`load_array`), not hashed in a pass of its own before the reader reads it again (a
search job read its 14 GB shard index twice at 21M passages).

A saved bi-encoder records the digests of its weight files in its ``dcsr.json``
(``weights_sha256``), and of its config and tokenizer files (``files_sha256``)
(:func:`file_digests`, :func:`check_file_digests`). The folder may have been written by someone
else, so a name there that leads out of it (absolute, ``..``, a link) is refused, never read
(:func:`file_inside`).
"""

from __future__ import annotations

import hashlib
import io
import logging
import mmap
import os
import re
import stat
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from dcsr.errors import InputError
from dcsr.fsutil import is_inside

log = logging.getLogger(__name__)

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


def warn_unverified(path: str | os.PathLike, fix: str, what: str = "it is") -> None:
    """The warning for a file read without a checksum to check it against."""
    log.warning("%s has no checksum (written before checksums were added, or by another tool); %s read "
                "unverified: %s to have it checked", path, what, fix)


def _stored_digest(fh, size: int, path, fix: str) -> bytes | None:
    """The digest a file's trailer holds, None without a trailer (``fh`` is left anywhere)."""
    if size < TRAILER_SIZE:
        return None
    fh.seek(size - TRAILER_SIZE)
    trailer = fh.read(TRAILER_SIZE)
    if not trailer.startswith(MAGIC):
        return None
    if trailer[-1:] != b"\n":
        raise corrupt(path, fix)
    return trailer[len(MAGIC):-1]


class VerifiedReader:
    """A file read once from its start, its bytes hashed as they are read: ``read(n)`` gives the
    next at most ``n`` bytes before the trailer (all of the file without one), and
    :meth:`check` hashes what the reader left unread and compares the digest (True), or says
    there was no trailer (False); one that does not match is an :class:`InputError`. For a
    reader that takes a callback, as ``faiss.read_index(faiss.PyCallbackIOReader(r.read))``.
    (Hashing in a thread of its own, beside the reader, was slower on a busy 2-core machine:
    benchmarks/rehearsal/rehearsal.md.)"""

    def __init__(self, path: str | os.PathLike, fix: str):
        self.path, self.fix = path, fix
        self._fh = open(path, "rb")
        try:
            size = os.fstat(self._fh.fileno()).st_size
            self.stored = _stored_digest(self._fh, size, path, fix)
        except BaseException:
            self._fh.close()
            raise
        self.end = size - TRAILER_SIZE if self.stored is not None else size
        self._fh.seek(0)
        self.pos = 0
        self._hash = hashlib.sha256() if self.stored is not None else None

    def read(self, n: int = -1) -> bytes:
        n = self.end - self.pos if n is None or n < 0 else min(int(n), self.end - self.pos)
        data = self._fh.read(n) if n > 0 else b""
        self.pos += len(data)
        if self._hash is not None:
            self._hash.update(data)
        return data

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")[: max(self.end - self.pos, 0)]
        got = self._fh.readinto(view) if len(view) else 0
        self.pos += got
        if self._hash is not None:
            self._hash.update(view[:got])
        return got

    def check(self) -> bool:
        if self._hash is None:
            return False
        while self.pos < self.end:
            if not self.read(_CHUNK):
                break
        if self._hash.hexdigest().encode("ascii") != self.stored:
            raise corrupt(self.path, self.fix)
        return True

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_verified(path: str | os.PathLike, fix: str) -> tuple[bytearray, bool]:
    """``(the bytes of path before its trailer, verified)``, the file read once; a trailer that
    does not match is an :class:`InputError`, a file without one gives ``verified`` False."""
    with VerifiedReader(path, fix) as r:
        buf = bytearray(r.end)
        got = 0
        while got < r.end:
            n = r.readinto(memoryview(buf)[got : got + _CHUNK])
            if not n:
                break
            got += n
        del buf[got:]
        return buf, r.check()


def _npy_from_buffer(buf: bytearray) -> np.ndarray:
    """The array of a ``.npy`` file's bytes, without copying them (``np.load``'s checks: no
    pickled objects; a short file is a ValueError)."""
    fp = io.BytesIO(bytes(memoryview(buf)[: 1 << 17]))
    version = np.lib.format.read_magic(fp)
    if version not in ((1, 0), (2, 0)):  # 3.0: utf-8 field names, rare; np.load reads a copy
        return np.load(io.BytesIO(buf), allow_pickle=False)
    header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = header(fp)
    if dtype.hasobject:
        raise ValueError("the array holds Python objects (a pickle), which are not loaded")
    count = int(np.prod(shape, dtype=np.int64))
    offset = fp.tell()
    if len(buf) - offset < count * dtype.itemsize:
        raise ValueError(f"{len(buf) - offset} bytes of data for {count} values of {dtype}")
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def load_array(path: str | os.PathLike, fix: str, mmap_mode: str | None = None) -> tuple[np.ndarray, bool]:
    """``(np.load of a .npy file, verified)``, its checksum checked (:func:`verify`'s outcomes)
    on one read: read into memory and hashed there; with ``mmap_mode``, hashed through a
    memory map of the file, whose pages the returned memory map then finds in the page cache
    (a file larger than the memory free for the cache is read from disk again). A truncated or
    foreign file raises ValueError, EOFError or OSError, as ``np.load`` does."""
    if mmap_mode is None:
        buf, verified = read_verified(path, fix)
        return _npy_from_buffer(buf), verified
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        stored = _stored_digest(fh, size, path, fix)
        if stored is not None:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                h, view = hashlib.sha256(), memoryview(mm)
                for i in range(0, size - TRAILER_SIZE, _CHUNK):
                    h.update(view[i : min(i + _CHUNK, size - TRAILER_SIZE)])
                view.release()
            if h.hexdigest().encode("ascii") != stored:
                raise corrupt(path, fix)
    return np.load(path, mmap_mode=mmap_mode, allow_pickle=False), stored is not None


def file_digests(root: str | os.PathLike, names: Iterable[str]) -> dict[str, str]:
    """``{name: sha256}`` of the files ``names`` (paths relative to ``root``)."""
    return {name: sha256_of(Path(root) / name) for name in sorted(names)}


_SHA256 = re.compile(r"[0-9a-f]{64}")


def check_digest_map(digests, where: str) -> None:
    """``digests`` is ``{file name: sha256}`` as :func:`file_digests` makes it (names strings,
    digests 64 lowercase hex digits); else an :class:`InputError` at ``where`` (the file and key
    that hold it: it may have been written by someone else)."""
    if not isinstance(digests, Mapping):
        raise InputError(where, f"must be an object {{file: sha256}}, found {type(digests).__name__}; the file was "
                                "changed or not written by this code")
    for name, digest in digests.items():
        if not isinstance(name, str) or not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            shown = repr(digest) if len(repr(digest)) <= 70 else f"{repr(digest)[:60]}..."
            raise InputError(where, f"{name!r}: {shown} is not a SHA-256 digest (64 lowercase hex digits); the file "
                                    "was changed or not written by this code")


def file_inside(root: str | os.PathLike, name: str, where: str) -> Path | None:
    """``root / name`` when ``name`` is a relative path without ``..`` to a regular file inside
    the folder ``root`` (through links that stay inside it; the folder itself may be a link),
    None when there is no such file; a name that is absolute, holds ``..``, or leads out of
    ``root`` is an :class:`InputError` at ``where`` (what named it), and nothing outside ``root``
    is opened."""
    from pathlib import PurePosixPath

    parts = PurePosixPath(name).parts
    if not parts or "\0" in name or PurePosixPath(name).is_absolute() or ".." in parts:
        raise InputError(where, f"names the file {name!r}, which is not a relative path inside the folder {root} "
                                "(absolute, or with '..'); no file outside it is read")
    here = Path(root).joinpath(*parts)
    if not os.path.lexists(here):
        return None
    real_root = os.path.realpath(root)
    real = os.path.realpath(here)
    if not is_inside(real, real_root):
        raise InputError(where, f"names the file {name!r}, which leads outside the folder {root} (through a link); no "
                                "file outside it is read")
    try:
        st = os.stat(real)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(where, f"names {name!r}, which is not a regular file ({here})")
    return here


def check_file_digests(root: str | os.PathLike, digests: Mapping[str, str], fix: str, where: str | None = None) -> None:
    """Every file of ``digests`` (relative to ``root``) exists and has its recorded digest.
    ``digests`` may have been written by someone else (a model folder's ``dcsr.json``): it must
    be :func:`check_digest_map`'s shape and name only files inside ``root``
    (:func:`file_inside`), else an :class:`InputError` at ``where`` (the file and key that hold
    it; ``root`` when None)."""
    where = str(root) if where is None else where
    check_digest_map(digests, where)
    paths = {name: file_inside(root, name, where) for name in sorted(digests)}  # every name, before any read
    for name, path in paths.items():
        digest = digests[name]
        if path is None:
            raise InputError(str(Path(root) / name), f"is missing, but it was written with the model; {fix}")
        if sha256_of(path) != digest:
            raise corrupt(path, fix)
