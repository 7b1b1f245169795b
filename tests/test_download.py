"""fetch(): local paths as is; URLs downloaded atomically, retried, resumed, checked against a lock file;
the resource map; the download rule. All against real HTTP servers on 127.0.0.1."""

import hashlib
import http.server
import socket
import threading

import pytest

from dcsr.data.download import fetch
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
    half = len(BODY) // 2
    with pytest.raises(InputError) as e:
        get(f"{server}/truncated", tmp_path / "t.json", retries=2)
    assert str(e.value) == (f"{server}/truncated: download failed after 3 attempts: the response ended after "
                            f"{half} of {len(BODY)} bytes ({tmp_path / 't.json.part'} is kept: the next try resumes it)")
    with pytest.raises(InputError, match=r"/broken: download failed after 2 attempts: HTTP 500"):
        get(f"{server}/broken", tmp_path / "b.json", retries=1)
    # the truncated body is kept beside, never under, the final name: a re-run resumes it
    assert Handler.hits == {"/truncated": 3, "/broken": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json.part"]
    assert (tmp_path / "t.json.part").read_bytes() == BODY[: len(BODY) // 2]


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


# ------------------------------------------------------------------ DPR's files from a local mirror
import concurrent.futures  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402

from dcsr.data.download import read_lock  # noqa: E402
from dcsr.integrity import sha256_of  # noqa: E402
from dcsr.data.formats import QA, Passage, iter_passages, read_qas, write_corpus, write_qas  # noqa: E402
from dcsr.fixtures.httpserve import Faults, serve  # noqa: E402
from dcsr.pipeline.resources import (RESOURCES, download_settings, resource_files, resource_of_file,  # noqa: E402
                            resource_url)

CORPUS = "psgs_w100.tsv.gz"
CORPUS_PATH = "wikipedia_split/psgs_w100.tsv.gz"


@pytest.fixture
def mirror(tmp_path_factory):
    """A folder laid out as DPR's base URL, with a small corpus (gzipped TSV) and NQ's test questions."""
    root = tmp_path_factory.mktemp("mirror")
    rng = random.Random(0)
    words = [f"w{i}" for i in range(500)]
    tsv = tmp_path_factory.mktemp("corpus") / "psgs_w100.tsv"
    write_corpus(tsv, (Passage(i, " ".join(rng.choices(words, k=100)), f"Title {i}") for i in range(1, 201)))
    (root / "wikipedia_split").mkdir(parents=True)
    (root / CORPUS_PATH).write_bytes(gzip.compress(tsv.read_bytes(), mtime=0))
    write_qas(root / "data" / "retriever" / "nq-test.qa.csv", [QA("who wrote w1?", ["w2"]), QA("when was w3?", ["w4", "w5"])])
    return root


def fetch_resource(url, dest, lock, **kw):
    return fetch(url, dest, lock=lock, progress=False, backoff=0.01, timeout=5, **kw)


def test_resource_map_has_every_file_the_issue_lists():
    datasets = ("nq", "trivia", "squad1", "webquestions", "curatedtrec")
    want = {CORPUS, "biencoder-nq-adv-hn-train.json.gz", "train-v1.1.json", "dev-v1.1.json"}
    want |= {f"biencoder-{d}-{s}.json.gz" for d in datasets for s in ("train", "dev")}
    # DPR ships TriviaQA's test questions gzipped, the others plain
    want |= {f"{d}-test.qa.csv" + (".gz" if d == "trivia" else "") for d in datasets}
    assert set(resource_files()) == want and len(RESOURCES) == len(want)
    assert len({r.key for r in RESOURCES}) == len(RESOURCES)
    defaults = download_settings({})
    assert resource_of_file(CORPUS).key == "data.wikipedia_split.psgs_w100"
    assert resource_url(resource_of_file(CORPUS), defaults) == "https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz"
    webq = resource_of_file("biencoder-webquestions-train.json.gz")
    assert webq.key == "data.retriever.webq-train"
    assert resource_url(webq, defaults) == "https://dl.fbaipublicfiles.com/dpr/data/retriever/biencoder-webquestions-train.json.gz"
    assert resource_of_file("nq-test.qa.csv").key == "data.retriever.qas.nq-test"
    assert resource_of_file("biencoder-nq-adv-hn-train.json.gz").key == "data.retriever.nq-adv-hn-train"
    assert resource_url(resource_of_file("dev-v1.1.json"), defaults) == "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json"
    # a mirror replaces the base URL, paths stay DPR's
    mirror = download_settings({"base_url": "http://127.0.0.1:8000/dpr/", "dir": "dl"})
    assert resource_url(resource_of_file("nq-test.qa.csv"), mirror) == "http://127.0.0.1:8000/dpr/data/retriever/nq-test.qa.csv"
    assert mirror["lock"] == "dl/downloads.lock.json" and mirror["retries"] == defaults["retries"]
    with pytest.raises(InputError, match="nq-test.csv: not a known resource"):
        resource_of_file("nq-test.csv")


def test_download_records_size_and_sha256_in_the_lock(mirror, tmp_path):
    dest, lock, requests = tmp_path / "dl" / CORPUS, tmp_path / "dl" / "downloads.lock.json", []
    with serve(mirror, requests=requests) as url:
        assert fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock) == dest
        assert dest.read_bytes() == (mirror / CORPUS_PATH).read_bytes()
        assert read_lock(lock) == {CORPUS: {"url": f"{url}/{CORPUS_PATH}", "size": dest.stat().st_size,
                                            "sha256": hashlib.sha256(dest.read_bytes()).hexdigest(),
                                            "verified": True, "verified_by": ["size"]}}
        assert sorted(p.name for p in dest.parent.iterdir()) == ["downloads.lock.json", CORPUS]
        # reused (and checked against the lock) without asking the server again
        assert fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock) == dest and len(requests) == 1
    assert [p.id for p in iter_passages(dest)] == list(range(1, 201))  # read as it came, gzipped


def test_a_cut_download_resumes_with_a_range_request(mirror, tmp_path):
    size, dest, requests = (mirror / CORPUS_PATH).stat().st_size, tmp_path / CORPUS, []
    with serve(mirror, faults=Faults(cut_after=size // 3), requests=requests) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, tmp_path / "lock.json")
    assert [r.range for r in requests] == [None, f"bytes={size // 3}-"]
    assert dest.read_bytes() == (mirror / CORPUS_PATH).read_bytes() and not (tmp_path / f"{CORPUS}.part").exists()


def test_a_rerun_resumes_the_part_a_failed_run_kept(mirror, tmp_path):
    size, dest, lock, requests = (mirror / CORPUS_PATH).stat().st_size, tmp_path / CORPUS, tmp_path / "lock.json", []
    with serve(mirror, faults=Faults(cut_after=1000), requests=requests) as url:
        with pytest.raises(InputError, match=rf"{CORPUS_PATH}: download failed: the response ended after 1000 of {size} bytes \(.*part is kept"):
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, retries=0)
        assert not dest.exists() and not lock.exists() and (tmp_path / f"{CORPUS}.part").stat().st_size == 1000
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, retries=0)
    assert [r.range for r in requests] == [None, "bytes=1000-"]
    assert dest.read_bytes() == (mirror / CORPUS_PATH).read_bytes() and read_lock(lock)[CORPUS]["size"] == size


def test_a_server_that_ignores_range_is_read_from_the_start(mirror, tmp_path):
    dest = tmp_path / CORPUS
    with serve(mirror, faults=Faults(cut_after=1000, ignore_range=True)) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, None)
    assert dest.read_bytes() == (mirror / CORPUS_PATH).read_bytes()


def test_a_download_that_differs_from_the_lock_never_lands(mirror, tmp_path):
    dest, lock = tmp_path / CORPUS, tmp_path / "lock.json"
    with serve(mirror) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock)
        recorded = lock.read_text()
        old = sha256_of(dest)
        dest.unlink()
        # the mirror now serves other bytes of the same size
        data = bytearray((mirror / CORPUS_PATH).read_bytes())
        data[100] ^= 0xFF
        (mirror / CORPUS_PATH).write_bytes(data)
        new = hashlib.sha256(data).hexdigest()
        with pytest.raises(InputError, match=rf"^{dest}: the download from {url}/{CORPUS_PATH} has sha256 {new} "
                                             rf"\({len(data)} bytes\), but {lock} records {old} \({len(data)} bytes\)"):
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["lock.json"] and lock.read_text() == recorded


def test_an_existing_file_is_checked_against_the_lock(mirror, tmp_path):
    dest, lock, requests = tmp_path / CORPUS, tmp_path / "lock.json", []
    with serve(mirror, requests=requests) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock)
        good = sha256_of(dest)
        dest.write_bytes(dest.read_bytes()[:-1])
        with pytest.raises(InputError, match=rf"^{dest}: the existing file has sha256 {sha256_of(dest)} "
                                             rf"\(\d+ bytes\), but {lock} records {good}"):
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock)
        # a file put there by hand, with no entry yet, is recorded as it is
        qas = tmp_path / "nq-test.qa.csv"
        qas.write_bytes((mirror / "data/retriever/nq-test.qa.csv").read_bytes())
        fetch_resource(f"{url}/data/retriever/nq-test.qa.csv", qas, lock)
    assert len(requests) == 1 and read_lock(lock)["nq-test.qa.csv"]["sha256"] == sha256_of(qas)
    assert read_lock(lock)["nq-test.qa.csv"]["verified"] is False
    assert read_lock(lock)["nq-test.qa.csv"]["reason"].startswith("it was found in place, not downloaded")


def test_a_dead_server_fails_after_its_retries_naming_the_url(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/{CORPUS_PATH}"
    started = time.monotonic()
    with pytest.raises(InputError, match=rf"^{url}: download failed after 3 attempts: .*Connection refused$"):
        fetch(url, tmp_path / CORPUS, lock=tmp_path / "lock.json", retries=2, backoff=0.05, progress=False)
    assert time.monotonic() - started >= 0.05 + 0.1  # backed off 0.05 s, then 0.1 s
    assert list(tmp_path.iterdir()) == []  # nothing received: no file, no .part, no lock


def test_concurrent_downloads_share_the_lock_file(mirror, tmp_path):
    names = [f"q{i}.qa.csv" for i in range(8)]
    for n in names:
        write_qas(mirror / n, [QA(f"question {n}?", ["a"])])
    lock = tmp_path / "lock.json"
    with serve(mirror) as url, concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: fetch_resource(f"{url}/{n}", tmp_path / n, lock), names))
    assert sorted(read_lock(lock)) == names
    assert all(read_lock(lock)[n]["sha256"] == sha256_of(tmp_path / n) for n in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names + ["lock.json"])  # no .flock left


def test_the_server_answers_head_and_ranges(mirror):
    data = (mirror / CORPUS_PATH).read_bytes()

    def get(url, rng=None, method="GET"):
        req = urllib.request.Request(url, headers={"Range": rng} if rng else {}, method=method)
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, r.read()

    with serve(mirror) as url:
        status, headers, body = get(f"{url}/{CORPUS_PATH}", method="HEAD")
        assert (status, int(headers["Content-Length"]), body) == (200, len(data), b"")
        status, headers, body = get(f"{url}/{CORPUS_PATH}", "bytes=10-19")
        assert (status, headers["Content-Range"], body) == (206, f"bytes 10-19/{len(data)}", data[10:20])
        assert get(f"{url}/{CORPUS_PATH}", "bytes=-5")[2] == data[-5:]
        with pytest.raises(urllib.error.HTTPError) as e:
            get(f"{url}/{CORPUS_PATH}", f"bytes={len(data)}-")
        assert e.value.code == 416 and e.value.headers["Content-Range"] == f"bytes */{len(data)}"
        with pytest.raises(urllib.error.HTTPError, match="404"):
            get(f"{url}/data/retriever/nope.qa.csv")


def test_the_server_command_serves_a_local_copy(mirror, tmp_path):
    port_file = tmp_path / "port"
    proc = subprocess.Popen([sys.executable, "-m", "dcsr.fixtures.httpserve", str(mirror), "--port", "0", "--port-file", str(port_file)],
                            stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(200):
            if port_file.exists():
                break
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text().strip()}"
        fetch_resource(f"{url}/data/retriever/nq-test.qa.csv", tmp_path / "nq-test.qa.csv", None)
        assert read_qas(tmp_path / "nq-test.qa.csv")[1] == QA("when was w3?", ["w4", "w5"])
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0 and out.startswith(f"serving {mirror} at {url}")


def test_download_rule_fetches_a_resource_from_the_configured_base_url(repo, mirror, tmp_path):
    dl = tmp_path / "downloads"
    with serve(mirror) as url:
        over = tmp_path / "over.yaml"
        over.write_text(yaml.safe_dump({"results": str(tmp_path / "results"),
                                        "downloads": {"dir": str(dl), "base_url": url, "retries": 1, "timeout": 5}}))
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        r = subprocess.run([str(Path(sys.executable).parent / "snakemake"), "--snakefile", str(repo / "Snakefile"),
                            "--directory", str(tmp_path), "--cores", "1", str(dl / "nq-test.qa.csv"),
                            "--configfile", str(repo / "config" / "generated.yaml"), str(over)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    got = dl / "nq-test.qa.csv"
    assert got.read_bytes() == (mirror / "data/retriever/nq-test.qa.csv").read_bytes()
    assert json.loads((dl / "downloads.lock.json").read_text()) == {
        "nq-test.qa.csv": {"url": f"{url}/data/retriever/nq-test.qa.csv", "size": got.stat().st_size, "sha256": sha256_of(got),
                           "verified": True, "verified_by": ["size"]}}
    log = (tmp_path / "results" / "logs" / "download_resource" / "nq-test.qa.csv.log").read_text()
    assert f"{url}/data/retriever/nq-test.qa.csv: downloaded to {got}" in log
    assert (tmp_path / "results" / "benchmarks" / "download_resource" / "nq-test.qa.csv.tsv").exists()
    assert sorted(p.name for p in dl.iterdir()) == ["downloads.lock.json", "nq-test.qa.csv"]


def test_a_complete_part_is_checked_and_kept_and_a_too_long_one_replaced(mirror, tmp_path):
    data, requests = (mirror / CORPUS_PATH).read_bytes(), []
    with serve(mirror, requests=requests) as url:
        # killed after the last byte, before the rename: the server answers 416, nothing is fetched again
        (tmp_path / f"{CORPUS}.part").write_bytes(data)
        fetch_resource(f"{url}/{CORPUS_PATH}", tmp_path / CORPUS, None)
        # a .part longer than the file (it changed on the server): fetched again from the start
        (tmp_path / "b" / f"{CORPUS}.part").parent.mkdir()
        (tmp_path / "b" / f"{CORPUS}.part").write_bytes(data + b"extra")
        fetch_resource(f"{url}/{CORPUS_PATH}", tmp_path / "b" / CORPUS, None)
    assert (tmp_path / CORPUS).read_bytes() == (tmp_path / "b" / CORPUS).read_bytes() == data
    assert [r.range for r in requests] == [f"bytes={len(data)}-", f"bytes={len(data) + 5}-", None]


def test_server_errors_are_retried_and_file_urls_work(mirror, tmp_path):
    requests = []
    with serve(mirror, faults=Faults(fail_requests=2), requests=requests) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", tmp_path / CORPUS, None)
    assert len(requests) == 3 and (tmp_path / CORPUS).read_bytes() == (mirror / CORPUS_PATH).read_bytes()
    # a local copy needs no server: base_url file:///data/dpr
    fetch_resource((mirror / CORPUS_PATH).as_uri(), tmp_path / "f" / CORPUS, tmp_path / "f" / "lock.json")
    assert (tmp_path / "f" / CORPUS).read_bytes() == (mirror / CORPUS_PATH).read_bytes()


# ------------------------------------------------------------------ short bodies, unverified downloads
import logging  # noqa: E402


def test_a_body_shorter_than_its_content_length_fails_and_leaves_no_file(mirror, tmp_path, caplog):
    size, dest, lock = (mirror / CORPUS_PATH).stat().st_size, tmp_path / CORPUS, tmp_path / "lock.json"
    part = tmp_path / f"{CORPUS}.part"
    # every GET is cut after 1000 bytes (and the server ignores Range: each try starts over)
    with serve(mirror, faults=Faults(cut_after=1000, cut_requests=99, ignore_range=True)) as url:
        with pytest.raises(InputError) as e:
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, retries=1)
    assert str(e.value) == (f"{url}/{CORPUS_PATH}: download failed after 2 attempts: the response ended after 1000 "
                            f"of {size} bytes ({part} is kept: the next try resumes it)")
    # nothing under the final name, no lock entry, no temporary file: only the .part a re-run resumes,
    # and the validator of its bytes
    assert not dest.exists() and not lock.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [part.name, f"{part.name}.validator"]
    assert part.stat().st_size == 1000
    assert not [r for r in caplog.records if "downloaded to" in r.getMessage()]


def test_a_body_without_content_length_is_recorded_as_unverified(mirror, tmp_path, caplog):
    data = (mirror / CORPUS_PATH).read_bytes()
    dest, lock = tmp_path / CORPUS, tmp_path / "lock.json"
    with caplog.at_level(logging.INFO, logger="dcsr.data.download"), serve(mirror, faults=Faults(no_length=True)) as url:
        assert fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock) == dest
    digest = hashlib.sha256(data).hexdigest()
    assert dest.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["lock.json", CORPUS]
    assert read_lock(lock) == {CORPUS: {
        "url": f"{url}/{CORPUS_PATH}", "size": len(data), "sha256": digest, "verified": False,
        "reason": "the server sent no Content-Length and no sha256 was given, so a body cut short could not be "
                  "told from a complete one"}}
    said = [r for r in caplog.records if "verified" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in said] == [(
        "WARNING", f"{url}/{CORPUS_PATH}: downloaded to {dest} ({len(data)} bytes, sha256 {digest}), NOT verified: the "
                   f"server sent no Content-Length and no sha256 was given, so a body cut short could not be told from "
                   f"a complete one; recorded as unverified in {lock}")]


def test_a_cut_body_without_content_length_cannot_be_told_and_is_unverified(mirror, tmp_path):
    """The limit of what a client can know: the body ends where the connection closes."""
    dest, lock = tmp_path / CORPUS, tmp_path / "lock.json"
    with serve(mirror, faults=Faults(no_length=True, cut_after=1000)) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock)
    assert dest.stat().st_size == 1000 and read_lock(lock)[CORPUS]["verified"] is False


def test_a_sha256_verifies_a_body_without_content_length(mirror, tmp_path, caplog):
    data = (mirror / CORPUS_PATH).read_bytes()
    dest, lock = tmp_path / CORPUS, tmp_path / "lock.json"
    with caplog.at_level(logging.INFO, logger="dcsr.data.download"), serve(mirror, faults=Faults(no_length=True)) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, sha256=hashlib.sha256(data).hexdigest())
    # a cut body is then caught by the checksum, and never lands
    with serve(mirror, faults=Faults(no_length=True, cut_after=1000)) as url:
        with pytest.raises(InputError, match=r"sha256 mismatch: .*; the file was removed$"):
            fetch_resource(f"{url}/{CORPUS_PATH}", tmp_path / "b" / CORPUS, None, sha256=hashlib.sha256(data).hexdigest())
    assert list((tmp_path / "b").iterdir()) == []
    assert read_lock(lock)[CORPUS] | {"url": None} == {"url": None, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                                      "verified": True, "verified_by": ["sha256"]}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_lock_entries_without_the_verified_field_are_still_read_and_checked(mirror, tmp_path):
    data = (mirror / CORPUS_PATH).read_bytes()
    dest, lock = tmp_path / CORPUS, tmp_path / "lock.json"
    lock.write_text(json.dumps({CORPUS: {"url": "x", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}))
    with serve(mirror) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock)
    assert dest.read_bytes() == data and "verified" not in read_lock(lock)[CORPUS]
    lock.write_text(json.dumps({CORPUS: {"url": "x", "size": 1, "sha256": "0" * 64, "verified": "yes"}}))
    with pytest.raises(InputError, match=rf"^{lock}: entry '{CORPUS}': 'verified' must be true or false$"):
        read_lock(lock)


@pytest.mark.parametrize("content, found", [
    (b"\xff", ":1: not UTF-8 text (byte 0xff at byte offset 0)"),
    (b"[" * 100000, ": the JSON holds arrays or objects nested too deeply to read"),
    (b'{"a": {"size": 1, "sha256": "%s"}, "a": {"size": 2, "sha256": "%s"}}' % (b"0" * 64, b"1" * 64),
     ": duplicate key 'a' in a JSON object"),
    (b'{"a": 1', ":1: malformed JSON: Expecting ',' delimiter (column 8)"),
    (b"[]", ": expected a JSON object {file name: {url, size, sha256}}, found an array"),
])
def test_a_lock_file_that_is_no_json_object_is_an_input_error_naming_it(tmp_path, content, found):
    """The lock file travels between machines: bytes that are not UTF-8 (UnicodeDecodeError), a
    run of '[' (RecursionError) were tracebacks, and a key given twice lost its first entry
    silently; each is an InputError naming the file."""
    lock = tmp_path / "lock.json"
    lock.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_lock(lock)
    assert str(e.value).startswith(f"{lock}{found}")


def test_a_partial_answer_with_other_bytes_than_asked_for_is_never_appended(mirror, tmp_path):
    data, dest, requests = (mirror / CORPUS_PATH).read_bytes(), tmp_path / CORPUS, []
    (tmp_path / f"{CORPUS}.part").write_bytes(data[:1000])
    # asked for bytes 1000-, the server sends 500- (and says so in Content-Range): start over
    with serve(mirror, faults=Faults(shift_range=500), requests=requests) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, tmp_path / "lock.json", retries=1)
    assert [r.range for r in requests] == ["bytes=1000-", None]
    assert dest.read_bytes() == data and read_lock(tmp_path / "lock.json")[CORPUS]["verified_by"] == ["size"]


def test_a_part_or_lock_file_planted_as_a_link_is_refused_and_its_target_untouched(server, tmp_path):
    """``<dest>.part`` is appended to and then renamed onto ``dest``: planted as a link to a user's
    file, the download would overwrite that file. Neither it nor the download's ``.flock`` file is
    opened through a link; the run stops naming it, and the file it points to keeps its bytes."""
    from dcsr.data.download import part_path

    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    dest = tmp_path / "dl" / "psgs_w100.tsv.gz"
    dest.parent.mkdir()
    part_path(dest).symlink_to(victim)
    with pytest.raises(InputError) as e:
        get(f"{server}/ok", dest)
    assert str(e.value) == (f"{part_path(dest)}: is a symbolic link to {victim}; a download is never written "
                            "through a link: remove it and run again")
    part_path(dest).unlink()
    flock = dest.parent / f".{dest.name}.flock"
    flock.symlink_to(victim)
    with pytest.raises(InputError, match=r"\.flock: is a symbolic link; a download's lock file is never opened"):
        get(f"{server}/ok", dest)
    assert victim.read_text() == "keep me\n" and not dest.exists() and Handler.hits == {}
    flock.unlink()
    assert get(f"{server}/ok", dest) == dest and dest.read_bytes() == BODY


def _cut_then_changed(mirror, tmp_path, ignore_if_range=False, only_last_modified=False):
    """A download cut after 1000 bytes (its .part kept), then the server's file replaced by another
    of the same size, and fetched again from the same URL; ``(requests of the re-run, the new bytes)``."""
    path, dest, lock = mirror / CORPUS_PATH, tmp_path / CORPUS, tmp_path / "lock.json"
    faults, requests = Faults(cut_after=1000, only_last_modified=only_last_modified), []
    with serve(mirror, faults=faults, requests=requests) as url:
        with pytest.raises(InputError, match="part is kept"):
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, retries=0)
        new = bytes(reversed(path.read_bytes()))
        path.write_bytes(new)
        os.utime(path, (path.stat().st_mtime + 60,) * 2)
        faults.ignore_if_range = ignore_if_range
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, retries=0)
    return requests[1:], new


@pytest.mark.parametrize("ignore_if_range, only_last_modified", [(False, False), (True, False), (False, True)])
def test_a_file_that_changed_between_the_parts_is_fetched_whole_never_joined(mirror, tmp_path, ignore_if_range,
                                                                            only_last_modified):
    """A resume asks with If-Range for the rest of the version its first bytes came from: the
    server whose file changed sends the new one whole (200), and a 206 whose ETag is not the
    first bytes' (a server that ignores If-Range) is started over. Before, the old 1000 bytes
    were joined to the new file's rest, of the announced size, and recorded as verified."""
    requests, new = _cut_then_changed(mirror, tmp_path, ignore_if_range, only_last_modified)
    assert requests[0].range == "bytes=1000-"
    assert requests[0].if_range.endswith(" GMT") if only_last_modified else requests[0].if_range.startswith('"')
    assert [r.range for r in requests] == (["bytes=1000-", None] if ignore_if_range else ["bytes=1000-"])
    dest = tmp_path / CORPUS
    assert dest.read_bytes() == new and sorted(p.name for p in tmp_path.iterdir()) == ["lock.json", CORPUS]
    assert read_lock(tmp_path / "lock.json")[CORPUS]["verified_by"] == ["size"]


def test_a_complete_part_of_another_version_is_fetched_again(mirror, tmp_path):
    """A .part as long as the file, of a version the server no longer has: the server that ignores
    If-Range answers 416 with the new ETag, and the file is fetched again from the start."""
    path, dest = mirror / CORPUS_PATH, tmp_path / CORPUS
    with serve(mirror) as url:
        fetch_resource(f"{url}/{CORPUS_PATH}", dest, None)
        dest.rename(tmp_path / f"{CORPUS}.part")  # as if killed before the rename, its validator beside it
        (tmp_path / f"{CORPUS}.part.validator").write_text(json.dumps({"url": f"{url}/{CORPUS_PATH}",
                                                                       "validator": '"old-tag"'}))
        new = bytes(reversed(path.read_bytes()))
        path.write_bytes(new)
        requests = []
    with serve(mirror, faults=Faults(ignore_if_range=True), requests=requests) as url2:
        (tmp_path / f"{CORPUS}.part.validator").write_text(json.dumps({"url": f"{url2}/{CORPUS_PATH}",
                                                                       "validator": '"old-tag"'}))
        fetch_resource(f"{url2}/{CORPUS_PATH}", dest, None)
    assert [(r.range, r.if_range) for r in requests] == [(f"bytes={len(new)}-", '"old-tag"'), (None, None)]
    assert dest.read_bytes() == new and sorted(p.name for p in tmp_path.iterdir()) == [CORPUS]


def test_a_resume_without_a_validator_is_not_called_verified(mirror, tmp_path, caplog):
    """A server that sends neither ETag nor Last-Modified: a resumed file's size checks nothing of
    its first part, so the lock records it as unverified (a sha256 still verifies it)."""
    data = (mirror / CORPUS_PATH).read_bytes()
    for sub, sha in (("a", None), ("b", hashlib.sha256(data).hexdigest())):
        dest, lock = tmp_path / sub / CORPUS, tmp_path / sub / "lock.json"
        with serve(mirror, faults=Faults(cut_after=1000, no_validators=True)) as url:
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, lock, retries=1, sha256=sha)
        assert dest.read_bytes() == data
        entry = read_lock(lock)[CORPUS]
        if sha:
            assert entry["verified_by"] == ["sha256"]
        else:
            assert not entry["verified"] and "resumed from a .part without a validator" in entry["reason"]
    assert "without a validator of its first bytes" in caplog.text
    assert "NOT verified: it was resumed from a .part without a validator" in caplog.text


def test_a_validator_file_that_is_not_ours_is_not_sent(mirror, tmp_path):
    """The .part's validator is read as data: one that is no JSON, was recorded for another URL or
    holds a line break is not sent (the resume is then unvalidated)."""
    from dcsr.data.download import validator_path

    data, dest = (mirror / CORPUS_PATH).read_bytes(), tmp_path / CORPUS
    part = tmp_path / f"{CORPUS}.part"
    for planted in ("not json", '{"url": "http://elsewhere/x", "validator": "\\"1\\""}',
                    '{"url": "%s", "validator": "\\"1\\"\\r\\nX-Injected: 1"}'):
        part.write_bytes(data[:1000])
        requests = []
        with serve(mirror, requests=requests) as url:
            validator_path(part).write_text(planted.replace("%s", f"{url}/{CORPUS_PATH}"))
            fetch_resource(f"{url}/{CORPUS_PATH}", dest, None)
        assert [(r.range, r.if_range) for r in requests] == [("bytes=1000-", None)]
        assert dest.read_bytes() == data and not validator_path(part).exists()
        dest.unlink()
