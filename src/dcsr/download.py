"""Fetch an input file: a local path as is, or an http(s) URL downloaded atomically.

A download goes to a temporary file beside ``dest`` and is renamed onto ``dest`` only when
complete (and its sha256 checked, when given), so ``dest`` never holds a partial file.
Connection errors, truncated bodies and HTTP 5xx are retried with exponential back-off.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from .errors import InputError
from .fsutil import atomic_path

log = logging.getLogger(__name__)
CHUNK = 1 << 20


def is_url(source: str | os.PathLike) -> bool:
    return str(source).startswith(("http://", "https://"))


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, tmp: Path, timeout: float, progress: bool) -> str:
    """Stream ``url`` into ``tmp``; returns the sha256 of what was written."""
    h, got = hashlib.sha256(), 0
    req = urllib.request.Request(url, headers={"User-Agent": "dcsr"})
    with urllib.request.urlopen(req, timeout=timeout) as resp, open(tmp, "wb") as fh:
        total = int(resp.headers.get("Content-Length") or 0) or None
        with tqdm(total=total, unit="B", unit_scale=True, desc=Path(url).name, file=sys.stderr,
                  disable=not progress) as bar:
            while chunk := resp.read(CHUNK):
                fh.write(chunk)
                h.update(chunk)
                got += len(chunk)
                bar.update(len(chunk))
    if total is not None and got < total:
        raise http.client.IncompleteRead(b"", total - got)
    return h.hexdigest()


def fetch(url_or_path: str | os.PathLike, dest: str | os.PathLike, *, retries: int = 3, timeout: float = 60,
          progress: bool = True, sha256: str | None = None, backoff: float = 1.0) -> Path:
    """Return a local path holding ``url_or_path``.

    A local path is returned as is (checked against ``sha256`` if given, never removed).
    A URL is downloaded to ``dest`` (tries: ``1 + retries``, waiting ``backoff * 2**n``
    seconds between them); a complete ``dest`` that already matches ``sha256`` (or any
    ``dest``, without one) is reused. Failures raise :class:`InputError` naming the URL.
    """
    source, want = str(url_or_path), sha256.lower() if sha256 else None
    if not is_url(source):
        path = Path(source)
        if not path.is_file():
            raise InputError(source, "no such file (give a local path or an http(s) URL)")
        if want and (got := file_sha256(path)) != want:
            raise InputError(source, f"sha256 mismatch: expected {want}, found {got}")
        return path
    dest = Path(dest)
    if dest.is_file() and (want is None or file_sha256(dest) == want):
        log.info("%s: already downloaded to %s", source, dest)
        return dest
    with atomic_path(dest) as tmp:
        for attempt in range(retries + 1):
            try:
                digest = _download(source, tmp, timeout, progress)
                break
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                code = getattr(e, "code", None)
                why = f"HTTP {code} {e.reason}" if code else str(getattr(e, "reason", "") or e) or type(e).__name__
                if (code is not None and code < 500) or attempt == retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise InputError(source, f"download failed{tries}: {why}") from e
                wait = backoff * 2**attempt
                log.warning("%s: %s; retrying in %.1f s (%d/%d)", source, why, wait, attempt + 1, retries)
                time.sleep(wait)
        if want and digest != want:
            raise InputError(source, f"sha256 mismatch: expected {want}, downloaded {digest}; the file was removed")
    log.info("%s: downloaded to %s (sha256 %s)", source, dest, digest)
    return dest
