"""Where a corpus-embedding job's time goes: ``torch.profiler`` over the pipeline's own encode path
(``dcsr.retrieval.embed.encode_texts``: batches of 64 sorted by length) with ``dpr-a``'s passage
encoder on the first 128 passages of the demo's corpus, one thread by default
(benchmarks/demo/demo.md, "Where an embedding job's time goes").

    python benchmarks/demo/prof_embed.py [--model results/models/dpr-a] \\
        [--corpus results/data/squad/psgs_w100.tsv] [--passages 128] [--precision fp32] [--threads 1]

``--model`` is a bi-encoder folder of the pipeline (``snakemake --cores 2 --profile profiles/local
results/models/dpr-a`` makes the demo's; ``results/models/untrained`` is the same network,
untrained). ``--precision`` is ``embed.precision`` (fp32, bf16, auto). It prints the time of the
profiled pass and the profiler's table sorted by self CPU time.
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="results/models/dpr-a")
    ap.add_argument("--corpus", default="results/data/squad/psgs_w100.tsv")
    ap.add_argument("--passages", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rows", type=int, default=25, help="rows of the profiler's table")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from dcsr.data.formats import iter_passages
    from dcsr.retrieval.embed import _load_for_inference, encode_texts

    dev, tokenizer, model, meta, precision = _load_for_inference(a.model, "cpu", a.precision, compile=False)
    passages = list(itertools.islice(iter_passages(a.corpus), a.passages))
    max_length = int(meta.get("passage_max_length", 256))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        encode_texts(model, tokenizer, [p.text for p in passages], [p.title for p in passages], "passage", max_length,
                     a.batch_size, dev, precision=precision, progress=False)
        seconds = time.perf_counter() - t
    print(f"{len(passages)} passages of {a.corpus} with {a.model}'s passage encoder, {precision}, batch "
          f"{a.batch_size}, length {max_length}, {torch.get_num_threads()} thread(s): {seconds:.2f} s (profiled)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.rows))


if __name__ == "__main__":
    main()
