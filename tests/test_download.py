"""fetch(): local paths as is; URLs downloaded atomically, retried, checked, against a real HTTP server."""

import hashlib
import http.server
import socket
import threading

import pytest

from dcsr.download import fetch
from dcsr.errors import InputError

BODY = b'{"version": "1.1", "data": []}\n' * 1000


class Handler(http.server.BaseHTTPRequestHandler):
    """/ok: the body; /flaky: HTTP 500 once, then the body; /truncated: half the announced body;
    /missing: 404; /broken: always 500."""

    hits: dict = {}

    def do_GET(self):
        n = self.hits[self.path] = self.hits.get(self.path, 0) + 1
        if self.path == "/missing":
            return self.send_error(404)
        if self.path == "/broken" or (self.path == "/flaky" and n == 1):
            return self.send_error(500)
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY[: len(BODY) // 2] if self.path == "/truncated" else BODY)
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    Handler.hits = {}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def get(url, dest, **kw):
    return fetch(url, dest, progress=False, backoff=0.01, timeout=5, **kw)


def test_download_lands_under_dest_with_nothing_else(server, tmp_path):
    dest = tmp_path / "dl" / "squad.json"
    assert get(f"{server}/ok", dest, sha256=hashlib.sha256(BODY).hexdigest().upper()) == dest
    assert dest.read_bytes() == BODY and [p.name for p in dest.parent.iterdir()] == ["squad.json"]
    assert get(f"{server}/ok", dest) == dest and Handler.hits == {"/ok": 1}  # a complete file is reused


def test_retries_after_a_500(server, tmp_path):
    assert get(f"{server}/flaky", tmp_path / "f.json").read_bytes() == BODY
    assert Handler.hits == {"/flaky": 2}


def test_failure_leaves_no_file_under_the_final_name(server, tmp_path):
    with pytest.raises(InputError, match=r"/truncated: download failed after 3 attempts: IncompleteRead"):
        get(f"{server}/truncated", tmp_path / "t.json", retries=2)
    with pytest.raises(InputError, match=r"/broken: download failed after 2 attempts: HTTP 500"):
        get(f"{server}/broken", tmp_path / "b.json", retries=1)
    assert Handler.hits == {"/truncated": 3, "/broken": 2} and list(tmp_path.iterdir()) == []


def test_client_errors_are_not_retried(server, tmp_path):
    with pytest.raises(InputError, match=r"/missing: download failed: HTTP 404"):
        get(f"{server}/missing", tmp_path / "m.json")
    assert Handler.hits == {"/missing": 1}


def test_sha256_mismatch_names_the_url_and_removes_the_file(server, tmp_path):
    with pytest.raises(InputError, match=rf"^{server}/ok: sha256 mismatch: expected {'0' * 64}, downloaded {hashlib.sha256(BODY).hexdigest()}"):
        get(f"{server}/ok", tmp_path / "s.json", sha256="0" * 64)
    assert list(tmp_path.iterdir()) == []


def test_dead_server_is_a_clear_error(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match=rf"^http://127.0.0.1:{port}/x.json: download failed after 2 attempts: .*Connection refused"):
        get(f"http://127.0.0.1:{port}/x.json", tmp_path / "x.json", retries=1)
    assert list(tmp_path.iterdir()) == []


def test_local_path_is_used_as_is(tmp_path):
    src = tmp_path / "local.json"
    src.write_bytes(BODY)
    assert get(str(src), tmp_path / "elsewhere.json") == src and not (tmp_path / "elsewhere.json").exists()
    with pytest.raises(InputError, match="local.json: sha256 mismatch"):
        get(src, tmp_path / "e.json", sha256="ab" * 32)
    assert src.exists()
    with pytest.raises(InputError, match="nope.json: no such file"):
        get(tmp_path / "nope.json", tmp_path / "e.json")
