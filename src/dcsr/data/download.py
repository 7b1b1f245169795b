"""Fetch an input file: a local path as is, or a URL downloaded resumably, checked, and atomically.

A download goes to ``<dest>.part`` and is renamed onto ``dest`` only when complete and checked,
so ``dest`` never holds a partial or wrong file. Connection errors, truncated bodies and HTTP
5xx are retried with exponential back-off; each retry (and a later run) resumes the ``.part``
with an HTTP Range request, and ``If-Range`` with the ETag (or Last-Modified) its first bytes
came with (kept beside it in ``<dest>.part.validator``), so that a file changed on the server in
between is fetched whole, never joined to the old one's start. A failed download keeps its
``.part`` for that reason; a download that fails its check is deleted.

A body that ends before its announced length (``Content-Length``, or the total of a
``Content-Range``) is incomplete, never complete: it is retried, and the last failure names the URL
and both byte counts. A body without an announced length ends where the server closes the
connection, so a cut cannot be told from the end: such a download is *unverified* unless a
sha256 (given, or in the lock file) checks it, and the log says so, once.

DPR publishes no checksums, so a *lock file* (JSON, ``{file name: {url, size, sha256, verified,
...}}``) records them at a file's first download, and every later download or reuse of the file is
checked against it, as a package manager's lock file pins what it fetched. ``verified`` says how
that first download was checked: ``true`` with ``verified_by`` (``size``: the announced length
was received; ``sha256``: the configured checksum matched), or ``false`` with a ``reason`` (entries
written before it existed have neither). Concurrent jobs share the lock file: each update re-reads
it under an ``fcntl`` lock and rewrites it atomically. Files are fsynced before they are renamed
into place.

Hand-written on urllib: pooch has no Range resume, shared sha256 lock or file:// URLs, and requests no file:// URLs.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import logging
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from dcsr.data.literals import read_json_object
from dcsr.errors import InputError
from dcsr.fsutil import atomic_open, replace_durably
from dcsr.integrity import sha256_of

log = logging.getLogger(__name__)
CHUNK = 1 << 20
MAX_WAIT = 60.0  # seconds: the longest back-off between two tries


def is_url(source: str | os.PathLike) -> bool:
    return str(source).startswith(("http://", "https://", "file://"))


def part_path(dest: str | os.PathLike) -> Path:
    """Where ``dest`` is downloaded to until complete."""
    dest = Path(dest)
    return dest.with_name(dest.name + ".part")


@contextlib.contextmanager
def exclusive(path: str | os.PathLike):
    """Hold an exclusive ``flock`` on the file ``path`` (created, and removed on exit).

    The holder removes the file while still holding the lock, so a process that was waiting on
    the removed file re-checks that it locked the file now under that name, and retries if not.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        try:  # never through a link: one planted under this name would have its target created
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError:
            if os.path.islink(path):
                raise InputError(str(path), "is a symbolic link; a download's lock file is never opened through "
                                            "a link: remove it and run again") from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                current = False
            if current:
                try:
                    yield
                finally:
                    os.unlink(path)
                return
        finally:
            os.close(fd)


def _flock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.flock")


# ------------------------------------------------------------------ lock file
def read_lock(lock: str | os.PathLike) -> dict:
    """``{file name: {"url", "size", "sha256", "verified", ...}}`` (empty when there is no lock file yet)."""
    lock = Path(lock)
    if not lock.exists():
        return {}
    # copied between machines, so read strictly: not UTF-8, malformed, a key given twice, nested
    # past the reader's limits, not an object: an InputError naming the file
    entries = read_json_object(lock, "a JSON object {file name: {url, size, sha256}}")
    for name, entry in entries.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("size"), int)
                and re.fullmatch(r"[0-9a-f]{64}", str(entry.get("sha256", "")))):
            raise InputError(str(lock), f"entry {name!r} needs an integer 'size' and a lowercase hex 'sha256'")
        if not isinstance(entry.get("verified", False), bool):
            raise InputError(str(lock), f"entry {name!r}: 'verified' must be true or false")
    return entries


def record_in_lock(lock: str | os.PathLike, name: str, entry: dict) -> None:
    """Add ``name``'s entry, keeping every other job's entries (re-read under the lock)."""
    lock = Path(lock)
    with exclusive(_flock_path(lock)):
        entries = read_lock(lock)
        entries[name] = entry
        with atomic_open(lock, "w") as fh:
            json.dump(dict(sorted(entries.items())), fh, indent=1)
            fh.write("\n")


def _check_against_lock(path: Path, name: str, entry: dict, lock: Path, what: str) -> None:
    size, digest = path.stat().st_size, sha256_of(path)
    if size != entry["size"] or digest != entry["sha256"]:
        raise InputError(str(path), f"{what} has sha256 {digest} ({size} bytes), but {lock} records "
                                    f"{entry['sha256']} ({entry['size']} bytes) for {name}")


# ------------------------------------------------------------------ download
class _Incomplete(Exception):
    """The body ended before its announced length, or a partial answer did not fit the request
    (retried, and resumed)."""


UNVERIFIED = ("the server sent no Content-Length and no sha256 was given, so a body cut short "
              "could not be told from a complete one")
RESUMED_UNVALIDATED = ("it was resumed from a .part without a validator of its first bytes (ETag or Last-Modified), "
                       "so it cannot be told whether the file changed on the server between its parts")
FOUND_IN_PLACE = "it was found in place, not downloaded, and no sha256 was given to check it against"


def _length(value: str | None) -> int | None:
    """A ``Content-Length`` header's value, or None if absent (or not a number)."""
    try:
        n = int((value or "").strip())
    except ValueError:
        return None
    return n if n >= 0 else None


def _content_range(value: str | None) -> tuple[int | None, int | None]:
    """(first byte, total size) of a ``Content-Range`` header (``bytes 10-99/100``, ``bytes */100``)."""
    m = re.fullmatch(r"bytes (?:(\d+)-\d+|\*)/(\d+|\*)", (value or "").strip())
    if not m:
        return None, None
    first, total = m.groups()
    return (int(first) if first else None), (int(total) if total != "*" else None)


def validator_path(part: Path) -> Path:
    """Where the validator of the file a ``.part`` holds the start of is kept: the ``ETag`` (or
    ``Last-Modified``) the server sent with its first bytes, so that a resume asks for the rest
    of that same file (``If-Range``)."""
    return part.with_name(part.name + ".validator")


def _validator(headers) -> str | None:
    """A response's strong ``ETag``, else its ``Last-Modified`` (what ``If-Range`` takes); None if neither."""
    etag = (headers.get("ETag") or "").strip()
    if etag and not etag.startswith("W/"):  # a weak tag may not be used in If-Range (RFC 9110, 13.1.5)
        return etag
    return (headers.get("Last-Modified") or "").strip() or None


def _read_validator(part: Path, url: str) -> str | None:
    """The validator recorded for ``part`` from ``url``; None when there is none (a ``.part`` of an
    older version, a server that sent none), or it is a link, of another URL (a mirror's tags
    say nothing of another server's file), or not a header value."""
    path = validator_path(part)
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = data.get("validator") if isinstance(data, dict) and data.get("url") == url else None
    return value if isinstance(value, str) and re.fullmatch(r"[\x20-\x7e]{1,300}", value) else None


def _write_validator(part: Path, url: str, validator: str) -> None:
    with atomic_open(validator_path(part), "w", encoding="utf-8") as fh:
        json.dump({"url": url, "validator": validator}, fh)


def _start_over(part: Path) -> None:
    part.unlink(missing_ok=True)
    validator_path(part).unlink(missing_ok=True)


def _download(url: str, part: Path, timeout: float, progress: bool, state: dict | None = None) -> int | None:
    """Stream ``url`` into ``part``, continuing after the bytes already there when the server
    answers a Range request with 206 (and starting over when it answers 200).

    A resume asks for the rest of the file the ``.part`` began (``If-Range`` with the validator
    the first bytes came with, :func:`validator_path`): a server whose file changed since sends
    it whole (200), and a 206 whose validator differs from the recorded one (a server that
    ignores ``If-Range``) is started over, so two versions are never joined. A resume without a
    recorded validator sets ``state["unvalidated"]``: the caller cannot call its size a check.

    Returns the file's size as the server announced it (``part`` then holds exactly that many
    bytes), or None when it announced none. Raises :class:`_Incomplete` when the body ended early.
    """
    state = {} if state is None else state
    offset = part.stat().st_size if part.exists() else 0
    validator = _read_validator(part, url) if offset else None
    headers = {"User-Agent": "dcsr"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
        if validator:
            headers["If-Range"] = validator
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code != 416 or not offset:
            raise
        # the .part reaches (or passes) the end of the file
        now = _validator(e.headers)
        if _content_range(e.headers.get("Content-Range"))[1] == offset and not (validator and now and now != validator):
            state["unvalidated"] = state.get("unvalidated") or not validator
            return offset
        log.warning("%s: %s is longer than the file, or of another version of it; starting over", url, part)
        _start_over(part)
        return _download(url, part, timeout, progress, state)
    with resp:
        length = _length(resp.headers.get("Content-Length"))
        first, total = _content_range(resp.headers.get("Content-Range"))
        now = _validator(resp.headers)
        if getattr(resp, "status", None) == 206:
            if first != offset:  # not the bytes asked for: start over, without a Range
                _start_over(part)
                raise _Incomplete(f"HTTP 206 with Content-Range {resp.headers.get('Content-Range')!r} "
                                  f"in answer to a request for bytes {offset}-")
            if offset and validator and now and now != validator:
                log.warning("%s: the file changed on the server since %s began (%s, now %s); starting over",
                            url, part, validator, now)
                _start_over(part)
                return _download(url, part, timeout, progress, state)
            if offset:
                if not validator:
                    state["unvalidated"] = True
                    log.warning("%s: resuming %s after %d bytes without a validator of its first bytes (ETag or "
                                "Last-Modified): it cannot be told whether the file changed in between", url, part,
                                offset)
                else:
                    log.info("%s: resuming after %d bytes", url, offset)
            mode = "ab"
            total = total if total is not None else (offset + length if length is not None else None)
        else:
            offset, mode, total = 0, "wb", length
            state["unvalidated"] = False
            validator_path(part).unlink(missing_ok=True)  # the old bytes' until the .part is emptied below
        got = offset
        # in a rule's log (not a terminal), a line every 30 s rather than every 0.1 s of a 13 GB download
        with open(part, mode) as fh, tqdm(total=total, initial=offset, unit="B", unit_scale=True,
                                          desc=part.name.removesuffix(".part"), file=sys.stderr,
                                          mininterval=0.1 if sys.stderr.isatty() else 30,
                                          disable=not progress) as bar:
            if mode == "wb" and now:  # the .part now holds nothing of another version (its old validator is gone)
                _write_validator(part, url, now)
            while chunk := resp.read(CHUNK):
                fh.write(chunk)
                got += len(chunk)
                bar.update(len(chunk))
    if total is not None and got != total:
        raise _Incomplete(f"the response ended after {got} of {total} bytes" if got < total
                          else f"the response sent {got} bytes, more than the {total} it announced")
    return total


def _download_with_retries(url: str, part: Path, retries: int, timeout: float, progress: bool,
                           backoff: float, state: dict | None = None) -> int | None:
    """:func:`_download`, retried; failures as :class:`InputError` naming ``url``."""
    for attempt in range(retries + 1):
        try:
            return _download(url, part, timeout, progress, state)
        except (urllib.error.URLError, http.client.HTTPException, OSError, _Incomplete) as e:
            code = getattr(e, "code", None)
            why = f"HTTP {code} {e.reason}" if code else str(getattr(e, "reason", "") or e) or type(e).__name__
            retryable = code is None or code >= 500 or code in (408, 429)
            if not retryable or attempt == retries:
                if part.exists() and part.stat().st_size == 0:
                    _start_over(part)
                tries = f" after {attempt + 1} attempts" if attempt else ""
                kept = f" ({part} is kept: the next try resumes it)" if part.exists() else ""
                raise InputError(url, f"download failed{tries}: {why}{kept}") from e
            wait = min(backoff * 2**attempt, MAX_WAIT)
            log.warning("%s: %s; retrying in %.1f s (%d/%d)", url, why, wait, attempt + 1, retries)
            time.sleep(wait)


def fetch(url_or_path: str | os.PathLike, dest: str | os.PathLike, *, retries: int = 3, timeout: float = 60,
          progress: bool = True, sha256: str | None = None, backoff: float = 1.0,
          lock: str | os.PathLike | None = None) -> Path:
    """Return a local path holding ``url_or_path``.

    A local path is returned as is (checked against ``sha256`` if given, never removed).
    A URL (http, https or file) is downloaded to ``dest`` through ``<dest>.part`` (tries:
    ``1 + retries``, waiting ``backoff * 2**n`` seconds between them, each resuming the last).
    A complete ``dest`` that already matches ``sha256`` (or any ``dest``, without one) is reused.

    A body shorter than its announced length is an error (after the retries); one without an
    announced length and without ``sha256`` is accepted as *unverified*, and logged so (a warning).

    With ``lock`` (a JSON lock file), ``dest``'s size and sha256 are recorded there under its
    file name when first downloaded (or first seen), with how the download was verified
    (``verified``, ``verified_by`` or ``reason``), and checked on every later download or
    reuse: a mismatch raises :class:`InputError` naming the file and both digests, and a
    mismatching download is deleted, never renamed onto ``dest``. Other failures raise
    :class:`InputError` naming the URL.
    """
    source, want = str(url_or_path), sha256.lower() if sha256 else None
    if not is_url(source):
        path = Path(source)
        if not path.is_file():
            raise InputError(source, "no such file (give a local path or an http(s) URL)")
        if want and (got := sha256_of(path)) != want:
            raise InputError(source, f"sha256 mismatch: expected {want}, found {got}")
        return path
    dest, lock = Path(dest), (Path(lock) if lock is not None else None)
    # one job per file at a time: two would append to the same .part
    with exclusive(_flock_path(dest)):
        entry = read_lock(lock).get(dest.name) if lock else None
        if dest.is_file() and (want is None or sha256_of(dest) == want):
            if entry:
                _check_against_lock(dest, dest.name, entry, lock, "the existing file")
            elif lock:
                checked = _verification(["sha256"] if want else [], FOUND_IN_PLACE)
                record_in_lock(lock, dest.name, {"url": source, "size": dest.stat().st_size,
                                                 "sha256": sha256_of(dest), **checked})
                if want:
                    log.info("%s: recorded the existing file in %s (verified: sha256)", dest, lock)
                else:
                    log.warning("%s: recorded the existing file in %s as unverified: %s", dest, lock, FOUND_IN_PLACE)
            log.info("%s: already downloaded to %s", source, dest)
            return dest
        part = part_path(dest)
        if part.is_symlink():  # a .part is appended to: through a link, any file this process may write
            raise InputError(str(part), f"is a symbolic link to {os.readlink(part)}; a download is never written "
                                        "through a link: remove it and run again")
        if entry and part.exists() and part.stat().st_size > entry["size"]:
            _start_over(part)  # longer than the file it is a part of
        state: dict = {}
        total = _download_with_retries(source, part, retries, timeout, progress, backoff, state)
        size, digest = part.stat().st_size, sha256_of(part)
        if total is not None and size != total:  # _download checks this; a last guard before the rename
            _start_over(part)
            raise InputError(source, f"the download has {size} bytes, but the server announced {total}; "
                                     f"the file was removed")
        if want and digest != want:
            _start_over(part)
            raise InputError(source, f"sha256 mismatch: expected {want}, downloaded {digest}; the file was removed")
        if entry:
            try:
                _check_against_lock(part, dest.name, entry, lock, f"the download from {source}")
            except InputError as e:
                _start_over(part)
                raise InputError(str(dest), f"{e.problem}; the download was removed (if the file changed on "
                                            f"purpose, delete its entry from {lock})") from None
        sized = total is not None and not state.get("unvalidated")
        by = (["size"] if sized else []) + (["sha256"] if want else [])
        checked = _verification(by, UNVERIFIED if total is None else RESUMED_UNVALIDATED)
        replace_durably(part, dest)
        validator_path(part).unlink(missing_ok=True)
        if lock and not entry:
            record_in_lock(lock, dest.name, {"url": source, "size": size, "sha256": digest, **checked})
    done = f"{source}: downloaded to {dest} ({size} bytes, sha256 {digest})"
    if entry:
        log.info("%s, checked against %s", done, lock)
    elif checked["verified"]:
        log.info("%s, verified: %s", done, " and ".join(checked["verified_by"]))
    else:  # one line, a warning: the file may be cut short, or joined from two versions
        log.warning("%s, NOT verified: %s%s", done, checked["reason"], f"; recorded as unverified in {lock}" if lock else "")
    return dest


def _verification(by: list[str], reason: str) -> dict:
    """The lock entry's fields saying whether, and how, a file was checked when first recorded."""
    return {"verified": True, "verified_by": by} if by else {"verified": False, "reason": reason}
