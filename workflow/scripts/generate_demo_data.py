"""Generate the offline demo dataset in DPR's formats, deterministically from the seed.

Either everything into one folder (``--out-dir``), or single files, as the pipeline's jobs
do: the corpus (``--corpus-out``) or one domain's splits (``--domain`` with ``--train-out``,
``--dev-out``, ``--test-out``). Prints the summary as JSON on stdout; progress on stderr.
"""

import argparse
import inspect
import json
import sys

from tqdm import tqdm

from dcsr.cli import script
from dcsr.data.formats import write_corpus
from dcsr.errors import InputError
from dcsr.fixtures.scale import sized_corpus
from dcsr.fixtures.synth import DEFAULT_DOMAINS, build_demo, generate_demo, summarize, write_demo


#: the generator's own default seed, for the filler when --seed is not given
GENERATOR_SEED = inspect.signature(build_demo).parameters["seed"].default


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", help="write psgs_w100.tsv and every domain's files here")
    ap.add_argument("--corpus-out", help="write only the corpus, to this path")
    ap.add_argument("--domain", help="write only this domain's splits (with --train-out/--dev-out/--test-out)")
    ap.add_argument("--train-out")
    ap.add_argument("--dev-out")
    ap.add_argument("--test-out")
    # Unset options take the generator's own defaults (dcsr.fixtures.synth), defined there once.
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n-entities", type=int, default=None)
    ap.add_argument("--domains", default="encyclopedia",
                    help=f"comma-separated domain names for --out-dir (known: {','.join(DEFAULT_DOMAINS)})")
    ap.add_argument("--dev-fraction", type=float, default=None)
    ap.add_argument("--test-fraction", type=float, default=None)
    ap.add_argument("--train-per-domain", type=int, default=None, help="cap on training questions per domain")
    ap.add_argument("--passages", type=int, default=None,
                    help="with --corpus-out: top the corpus up to this many passages with generated filler "
                         "(dcsr.fixtures.scale)")
    ap.add_argument("--passages-key", default="generate.passages", help="the config key of --passages, for errors")
    a = ap.parse_args()
    given = dict(seed=a.seed, n_entities=a.n_entities, train_per_domain=a.train_per_domain,
                 dev_fraction=a.dev_fraction, test_fraction=a.test_fraction)
    common = {k: v for k, v in given.items() if v is not None}
    if a.out_dir:
        domains = [d.strip() for d in a.domains.split(",") if d.strip()]
        summary = generate_demo(a.out_dir, domains=domains, **common)
    else:
        if a.domain and not (a.train_out and a.dev_out and a.test_out):
            raise InputError("arguments", "--domain needs --train-out, --dev-out and --test-out")
        if not (a.corpus_out or a.domain):
            raise InputError("arguments", "give --out-dir, --corpus-out or --domain")
        data = build_demo(domains=[a.domain] if a.domain else ["encyclopedia"], **common)
        outs = {a.domain: {"train": a.train_out, "dev": a.dev_out, "test": a.test_out}} if a.domain else None
        if a.passages and a.corpus_out:
            passages = sized_corpus(data.passages, a.passages, common.get("seed", GENERATOR_SEED), a.passages_key)
            corpus = tqdm(passages, total=a.passages, desc="generate corpus", unit=" passages", mininterval=5.0)
            print(f"wrote {write_corpus(a.corpus_out, corpus)} passages to {a.corpus_out}", file=sys.stderr)
            write_demo(data, dataset_outs=outs)
        else:
            write_demo(data, corpus_out=a.corpus_out, dataset_outs=outs)
        summary = summarize(data)
    json.dump(summary, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
