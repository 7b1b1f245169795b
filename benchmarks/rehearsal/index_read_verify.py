"""Time to read a sealed FAISS shard index and check its checksum, before and after the check
moved into the read (benchmarks/rehearsal/rehearsal.md, "Reading a shard index once").

- ``before``: ``dcsr.integrity.verify`` (a pass that hashes the file) then ``faiss.read_index``
  of the path (a second pass): what ``read_index`` did until this change.
- ``after``: ``dcsr.retrieval.index.read_index``: FAISS reads through ``VerifiedReader``,
  which hashes the bytes as they pass (one pass).
- ``unverified``: ``faiss.read_index`` alone, the floor.

Each is timed ``--repeats`` times, median reported, with the file in the page cache (``warm``:
read once untimed first) and out of it (``cold``: ``posix_fadvise(DONTNEED)`` before each
try, which drops a file's clean pages without root). ``before, cache not reused`` drops the
pages again between the hash pass and FAISS's read: a shard index that the page cache cannot
hold beside the index itself (14 GB at 21M passages in a job whose memory limit is about
that), where the second pass reads the disk again. ``read_MB``: what the process read
through read(2) (``/proc/self/io`` rchar); ``cpu_s``: the process's CPU time, all threads.

    python benchmarks/rehearsal/index_read_verify.py --n 1000000 --d 384 --dir /tmp/irv
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np


def _rchar() -> int:
    return int(next(line.split()[1] for line in Path("/proc/self/io").read_text().splitlines()
                    if line.startswith("rchar:")))


def _drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/index_read_verify")
    a = ap.parse_args()
    import faiss

    from dcsr.integrity import verify
    from dcsr.retrieval.index import REBUILD_INDEX, read_index, write_index

    faiss.omp_set_num_threads(1)
    folder = Path(a.dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"flat-{a.n}x{a.d}.faiss"
    if not path.is_file():
        index = faiss.IndexFlatIP(a.d)
        rng = np.random.default_rng(0)
        for i in range(0, a.n, 100_000):
            index.add(rng.standard_normal((min(100_000, a.n - i), a.d), dtype=np.float32))
        write_index(index, path)
        del index

    def before():
        verify(path, REBUILD_INDEX)
        return faiss.read_index(str(path))

    def before_uncached():
        verify(path, REBUILD_INDEX)
        _drop_cache(path)  # the hash pass's pages gone before FAISS reads: a file the cache cannot hold
        return faiss.read_index(str(path))

    ways = {"before": before, "after": lambda: read_index(path, use_gpu=False),
            "unverified": lambda: faiss.read_index(str(path))}
    out = {"file": str(path), "bytes": path.stat().st_size, "n": a.n, "d": a.d, "repeats": a.repeats,
           "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "results": {}}
    runs = [(cache, name, read) for cache in ("warm", "cold") for name, read in ways.items()]
    runs.append(("cold", "before, cache not reused", before_uncached))
    for cache, name, read in runs:
        times, reads, cpus = [], [], []
        for _ in range(a.repeats):
            if cache == "cold":
                _drop_cache(path)
            else:
                with open(path, "rb") as fh:
                    while fh.read(1 << 24):
                        pass
            r0, c0, t0 = _rchar(), time.process_time(), time.perf_counter()
            index = read()
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            reads.append(_rchar() - r0)
            assert index.ntotal == a.n
            del index
        out["results"][f"{cache} {name}"] = {"median_s": round(statistics.median(times), 3),
                                             "times_s": [round(t, 3) for t in times],
                                             "cpu_s": round(statistics.median(cpus), 3),
                                             "read_MB": round(statistics.median(reads) / 1e6, 1)}
        print(cache, name, out["results"][f"{cache} {name}"], flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
