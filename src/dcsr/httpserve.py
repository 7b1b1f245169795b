"""A small static file server with Range requests, for a local copy of DPR's files.

Serve a folder laid out as under DPR's base URL (``wikipedia_split/psgs_w100.tsv.gz``,
``data/retriever/...``) and point ``downloads.base_url`` at it::

    python -m dcsr.httpserve /data/dpr-mirror --port 8000

Tests serve small stand-ins of the same files, and inject faults (:class:`Faults`): a body cut
after some bytes, server errors, Range requests ignored or answered with other bytes, no
Content-Length.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import os
import re
import shutil
import signal
import threading
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from .fsutil import atomic_open


@dataclass
class Faults:
    """Misbehaviour on purpose, counted over GET requests in the order they arrive."""

    cut_after: int | None = None  # send only this many body bytes, then drop the connection ...
    cut_requests: int = 1  # ... on this many first GET requests
    fail_requests: int = 0  # answer the first GET requests with 503
    ignore_range: bool = False  # answer Range requests with the whole file (200)
    no_length: bool = False  # send no Content-Length: the body ends where the connection closes
    shift_range: int = 0  # answer a Range request with bytes starting this many before those asked for
    gets: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def next_get(self) -> int:
        with self._lock:
            self.gets += 1
            return self.gets


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    range: str | None  # the Range header, if any


def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) inclusive of a single ``bytes=`` range; None if it cannot be satisfied."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
    if not m or m.groups() == ("", ""):
        return None
    first, last = m.groups()
    if first == "":  # the last N bytes
        n = int(last)
        return (max(size - n, 0), size - 1) if n and size else None
    first, last = int(first), min(int(last), size - 1) if last else size - 1
    return (first, last) if first <= last else None


class StaticHandler(http.server.SimpleHTTPRequestHandler):
    """GET and HEAD of files under ``directory``, with single-range requests (206/416)."""

    faults: Faults | None = None
    requests: list | None = None
    protocol_version = "HTTP/1.1"

    def __init__(self, *args, faults=None, requests=None, **kwargs):
        self.faults, self.requests = faults, requests
        super().__init__(*args, **kwargs)

    def do_GET(self):
        self._serve(body=True)

    def do_HEAD(self):
        self._serve(body=False)

    def _serve(self, body: bool):
        rng = self.headers.get("Range")
        if self.requests is not None:
            self.requests.append(Request(self.command, self.path, rng))
        n = self.faults.next_get() if (self.faults and body) else 0
        if self.faults and n <= self.faults.fail_requests:
            return self.send_error(503, "fault injected")
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            return self.send_error(404)
        size = path.stat().st_size
        first, last, status = 0, size - 1, 200
        if rng and not (self.faults and self.faults.ignore_range):
            span = _byte_range(rng, size)
            if span is None:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            (first, last), status = span, 206
            if self.faults and self.faults.shift_range:
                first = max(first - self.faults.shift_range, 0)
        length = last - first + 1 if size else 0
        self.send_response(status)
        self.send_header("Content-Type", self.guess_type(str(path)))
        if self.faults and self.faults.no_length:
            self.send_header("Connection", "close")  # the body ends where the connection does
        else:
            self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        self.end_headers()
        if not body:
            return
        cut = self.faults.cut_after if (self.faults and n <= self.faults.cut_requests) else None
        with open(path, "rb") as fh:
            fh.seek(first)
            if cut is None:
                shutil.copyfileobj(_Limited(fh, length), self.wfile)
                return
            self.wfile.write(fh.read(min(cut, length)))
        self.wfile.flush()
        self.close_connection = True  # the client sees the body end early

    def log_message(self, format, *args):
        pass


class _Limited:
    def __init__(self, fh, n):
        self.fh, self.left = fh, n

    def read(self, size=-1):
        size = self.left if size < 0 else min(size, self.left)
        data = self.fh.read(size)
        self.left -= len(data)
        return data


@contextlib.contextmanager
def serve(directory: str | os.PathLike, port: int = 0, *, host: str = "127.0.0.1", faults: Faults | None = None,
          requests: list | None = None):
    """Serve ``directory`` in a background thread; yields the base URL (``http://host:port``).

    ``port=0`` takes a free port. Each request is appended to ``requests`` (a list) if given.
    """
    handler = partial(StaticHandler, directory=str(directory), faults=faults, requests=requests)
    server = http.server.ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port")
    ap.add_argument("--port-file", help="write the port here once listening (for --port 0)")
    a = ap.parse_args(argv)
    if not Path(a.directory).is_dir():
        ap.error(f"{a.directory}: no such directory")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with serve(a.directory, a.port, host=a.host) as url:
        if a.port_file:
            with atomic_open(a.port_file) as fh:
                fh.write(f"{url.rsplit(':', 1)[1]}\n")
        print(f"serving {Path(a.directory).resolve()} at {url}", flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
