"""Atomic writes: a file or directory appears under its final name only once complete."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to ``final``; rename it onto ``final`` on success.

    On any exception the temporary file or directory is removed and ``final`` is
    left untouched, so a crash never leaves a partial output under the final name.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    os.close(fd)
    os.unlink(tmp)
    tmp = Path(tmp)
    try:
        yield tmp
        if final.is_dir() and not final.is_symlink():
            # Replace a directory: move the old one aside first, then drop it.
            old = final.with_name(f".{final.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
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
