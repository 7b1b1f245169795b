"""Scoring a run's passages: a streaming pass over the corpus against the passage store (not a test).

``merge_runs`` and ``evaluate_topk`` need the texts of the passages a run retrieved. Before
the store they streamed the whole corpus (``dcsr.data.formats.passage_texts``); now they read them
by id from the corpus's store (``dcsr.data.passage_store``), written once per corpus by the rule
``passage_store``. Measured side by side on one synthetic corpus (SQuAD v1.1 dev's 100-word
passages repeated under fresh ids, ``scale_throughput.synthetic_corpus``), median of
``--repeats``: the store's one-off build, the streaming lookup (``.tsv.gz``, as DPR ships the
corpus, and ``.tsv``), and the store's lookup, for ``--wanted`` ids drawn at random (a run's
hits are spread over the whole corpus).

    python benchmarks/passage-store/passage_store.py --squad dev-v1.1.json \
        --passages 1000000 --wanted 17000 --out benchmarks/out/passage_store.json
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path

import numpy as np

BENCHMARKS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(BENCHMARKS), str(BENCHMARKS / "throughput")]  # benchmarks_common, scale_throughput
from benchmarks_common import emit, machine  # noqa: E402
from scale_throughput import load_avg, synthetic_corpus, timed  # noqa: E402

from dcsr.retrieval.embed import shard_passages  # noqa: E402
from dcsr.data.formats import passage_texts  # noqa: E402
from dcsr.data.passage_store import PassageStore, build_store  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--squad", required=True, help="SQuAD v1.1 JSON (real text for the passages)")
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--wanted", type=int, default=17_000,
                    help="ids looked up (NQ's 3,610 test questions x 100 hits over 21M passages touch at most 1.7%%)")
    ap.add_argument("--shards", type=int, default=22, help="embedding shards (21M passages at 1M per shard: 22)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temporary one)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    load_before = load_avg()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        tsv, gz, _ = synthetic_corpus(args.squad, args.passages, work)
        rng = np.random.default_rng(0)
        wanted = set(int(i) for i in rng.choice(np.arange(1, args.passages + 1), args.wanted, replace=False))
        build_s, build_all, n = timed(lambda: build_store(gz, work / "store"), args.repeats)
        store_bytes = sum(p.stat().st_size for p in (work / "store").iterdir())
        store_s, store_all, got_store = timed(lambda: PassageStore(work / "store").get(wanted), args.repeats)
        gz_s, gz_all, got_gz = timed(lambda: passage_texts(gz, wanted), args.repeats)
        tsv_s, tsv_all, got_tsv = timed(lambda: passage_texts(tsv, wanted), args.repeats)
        assert got_store == got_gz == got_tsv and len(got_store) == len(wanted)
        # one embedding shard's rows (embed_shard): every --shards-th row, from the store and streamed
        shard_store_s, shard_store_all, rows_store = timed(
            lambda: shard_passages(work / "store", 0, args.shards), args.repeats)
        shard_gz_s, shard_gz_all, rows_gz = timed(lambda: shard_passages(gz, 0, args.shards), args.repeats)
        assert rows_store == rows_gz
    result = {
        "benchmark": "passage_store",
        "started": started,
        "machine": machine(),
        "load_average": f"{load_before} -> {load_avg()}",
        "passages": n,
        "wanted": len(wanted),
        "store_build_s": round(build_s, 3), "store_build_all": build_all,
        "store_bytes": store_bytes,
        "lookup_store_s": round(store_s, 4), "lookup_store_all": store_all,
        "lookup_stream_gz_s": round(gz_s, 3), "lookup_stream_gz_all": gz_all,
        "lookup_stream_tsv_s": round(tsv_s, 3), "lookup_stream_tsv_all": tsv_all,
        "shards": args.shards, "shard_passages": len(rows_store[0]),
        "shard_store_s": round(shard_store_s, 3), "shard_store_all": shard_store_all,
        "shard_stream_gz_s": round(shard_gz_s, 3), "shard_stream_gz_all": shard_gz_all,
        "shard_speedup_vs_gz": round(shard_gz_s / shard_store_s, 1),
        "speedup_vs_gz": round(gz_s / store_s, 1),
        "speedup_vs_tsv": round(tsv_s / store_s, 1),
    }
    emit(result, args.out)


if __name__ == "__main__":
    main()
