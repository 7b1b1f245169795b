"""Atomic writes: a file or directory appears under its final name only once complete.

Complete on disk, too: the temporary file (or every file of a temporary directory) is fsynced
before it is renamed onto its final name, and the parent directory after, so that a crash or a
power cut right after a job never leaves an empty or partial output under the final name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


def fsync_file(path: str | os.PathLike) -> None:
    """Flush ``path``'s data to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush ``path``'s entries (a rename into it) to disk; best effort: platforms and file
    systems that cannot open or fsync a directory are ignored."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_tree(path: str | os.PathLike) -> None:
    """fsync a file, or every file and folder of a directory (its subfolders first)."""
    path = Path(path)
    if path.is_symlink() or not path.is_dir():
        if path.is_file() and not path.is_symlink():
            fsync_file(path)
        return
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            p = os.path.join(root, name)
            if not os.path.islink(p) and os.path.isfile(p):
                fsync_file(p)
        fsync_dir(root)


def replace_durably(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """``os.replace(src, dst)`` with ``src`` fsynced before and ``dst``'s folder after."""
    fsync_tree(src)
    os.replace(src, dst)
    fsync_dir(Path(dst).parent)


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to ``final``; rename it onto ``final`` on success.

    On any exception the temporary file or directory is removed and ``final`` is
    left untouched, so a crash never leaves a partial output under the final name.
    What was written is fsynced before the rename, the parent directory after it.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    os.close(fd)
    os.unlink(tmp)
    tmp = Path(tmp)
    try:
        yield tmp
        fsync_tree(tmp)
        if final.is_dir() and not final.is_symlink():
            # Replace a directory: move the old one aside first, then drop it.
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            fsync_dir(final.parent)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
            fsync_dir(final.parent)
    except BaseException:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists():
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_open(final: str | os.PathLike, mode: str = "w", **kwargs):
    """Open a temporary file for writing that replaces ``final`` when closed without error."""
    with atomic_path(final) as tmp:
        with open(tmp, mode, **kwargs) as fh:
            yield fh


class ResultsLocked(Exception):
    """Another run holds the lock of the results folder."""


def lock_results(results: str | os.PathLike):
    """Hold an exclusive lock on ``<results>/.dcsr-run.lock`` for the rest of this process (the
    open file is returned: keep it). Snakemake locks its working directory only, so two runs
    started from two directories could otherwise write the same absolute ``results:`` at once,
    each reading the other's half-written files. The kernel drops the lock when the process
    ends, however it ends, so a killed run leaves nothing to clean up."""
    import fcntl

    folder = Path(results)
    folder.mkdir(parents=True, exist_ok=True)
    fh = open(folder / ".dcsr-run.lock", "a+", encoding="utf-8")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise ResultsLocked(f"{folder}: another run is writing these results ({holder}); wait for it to end, "
                            "or give this run another results: folder") from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()} on {os.uname().nodename}\n")
    fh.flush()
    return fh
