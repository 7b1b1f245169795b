"""Atomic writes: a file or directory appears under its final name only once complete.

Complete on disk, too: the temporary file (or every file of a temporary directory) is fsynced
before it is renamed onto its final name, and the parent directory after, so that a crash or a
power cut right after a job never leaves an empty or partial output under the final name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

from dcsr.errors import InputError

#: The environment variable that names the results folder to a job (``rules/common.smk`` sets it
#: for Snakemake and exports it in every job's shell): :func:`atomic_path` writes nothing under it
#: through a symbolic link that leads out of it.
RESULTS_ENV = "DCSR_RESULTS"


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


def is_inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies under it (both resolved already: ``os.path.realpath``)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_inside_results(final: str | os.PathLike, results: str | os.PathLike | None = None) -> None:
    """Refuse to write ``final`` when it lies under the results folder (``results``, default the
    :data:`RESULTS_ENV` variable; no check without either) but a folder on its way there is a
    symbolic link that leads out of the results folder: a link planted under results: (by whoever
    wrote that folder before) would otherwise carry an output, or the temporary file beside it,
    into any folder this process may write. The results folder itself may be a link (to scratch
    space, say), and so may a folder under it that leads to another folder under it. ``final``
    itself is not followed: it is replaced by a rename, which replaces a link, not its target."""
    results = os.environ.get(RESULTS_ENV) if results is None else results
    if not results:
        return
    root = os.path.abspath(results)
    path = os.path.abspath(final)
    if not is_inside(path, root) or path == root:
        return
    real_root = os.path.realpath(root)
    parent = os.path.dirname(path)
    if is_inside(os.path.realpath(parent), real_root):
        return
    # name the first link on the way that leads out
    parts = os.path.relpath(parent, root).split(os.sep)
    here = root
    for part in parts:
        here = os.path.join(here, part)
        if os.path.islink(here) and not is_inside(os.path.realpath(here), real_root):
            raise InputError(str(final), f"{here} is a symbolic link to {os.path.realpath(here)}, outside the "
                                         f"results folder {results}; no output is written through a link out of "
                                         "results: (remove the link)")
    raise InputError(str(final), f"leads out of the results folder {results} through a symbolic link "
                                 f"(to {os.path.realpath(parent)}); no output is written through a link out of "
                                 "results: (remove the link)")


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to ``final``; rename it onto ``final`` on success.

    On any exception the temporary file or directory is removed and ``final`` is
    left untouched, so a crash never leaves a partial output under the final name.
    What was written is fsynced before the rename, the parent directory after it.
    Under the results folder, nothing is written through a link that leads out of it
    (:func:`check_inside_results`).
    """
    final = Path(final)
    check_inside_results(final)
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
    lock = folder / ".dcsr-run.lock"
    # never through a link: a lock file planted as a link to a user's file would be truncated
    # and overwritten (O_NOFOLLOW: the open fails on a link, whatever it points to)
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        if os.path.islink(lock):
            raise InputError(str(lock), "is a symbolic link; the lock file of a results folder is never opened "
                                        "through a link: remove it and run again") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(str(lock), "is not a regular file; remove it and run again")
    fh = open(fd, "a+", encoding="utf-8")
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


def check_no_link_out(results: str | os.PathLike) -> None:
    """Refuse a results folder that holds a symbolic link leading out of it (or a dangling one),
    before any job runs. Snakemake itself deletes a job's old outputs, makes their folders and
    lets the job's shell write its log and benchmark file, all through whatever links lie on the
    way, before any write of ours could check (:func:`check_inside_results`); and a job reading
    an input under results: would read wherever a planted link leads. A link from one place in
    the results folder to another is fine, and so is the folder itself being a link."""
    root = os.path.abspath(results)
    if not os.path.isdir(root):
        return
    real_root = os.path.realpath(root)
    for here, dirs, files in os.walk(root):  # followlinks=False: a linked folder is seen, not entered
        for name in dirs + files:
            p = os.path.join(here, name)
            if not os.path.islink(p):
                continue
            target = os.path.realpath(p)
            if not os.path.exists(p):
                raise InputError(p, f"is a symbolic link to {os.readlink(p)}, which does not exist; a results folder "
                                    "holds no dangling links (a job would create its target, wherever it is): "
                                    "remove it and run again")
            if not is_inside(target, real_root):
                raise InputError(p, f"is a symbolic link to {target}, outside the results folder {results}; "
                                    "nothing is read or written through a link out of results: (Snakemake would "
                                    "delete or write files there): remove the link, or copy what it points to")
