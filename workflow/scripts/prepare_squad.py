"""Turn a SQuAD v1.1 JSON file (a local path or an http(s) URL) into DPR's formats.

Writes the corpus (``--corpus-out``, psgs_w100.tsv), the train and dev biencoder JSON and the
test qas TSV, split by article (see :mod:`dcsr.data.squad`). Prints the statistics as JSON on
stdout; progress on stderr.
"""

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlparse

from dcsr.cli import script
from dcsr.data.download import fetch
from dcsr.errors import InputError
from dcsr.data.squad import (DEFAULT_PASSAGE_WORDS, DEFAULT_SEED, DEFAULT_SPLIT, parse_article_range, split_size,
                        squad_to_dpr,
                        write_squad_dpr)


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="SQuAD v1.1 JSON: a local path or an http(s) URL")
    ap.add_argument("--download-dir", default=".", help="where a URL is downloaded to (kept, and reused)")
    ap.add_argument("--sha256", help="expected sha256 of the source file")
    ap.add_argument("--lock", help="the downloads' lock file: a URL's size and sha256 are recorded there at first "
                                   "download and checked on every later use")
    # Unset options take the converter's own defaults (dcsr.data.squad), defined there once.
    ap.add_argument("--passage-words", type=int, default=DEFAULT_PASSAGE_WORDS)
    for s in ("train", "dev", "test"):
        ap.add_argument(f"--{s}", type=split_size, default=DEFAULT_SPLIT[s],
                        help=f"fraction (or, when all three are integers, number) of articles in {s}")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--articles", help="only these articles' questions, START:STOP by position in the file "
                                       "(a domain of article groups; the corpus keeps every article)")
    ap.add_argument("--corpus-out")
    ap.add_argument("--train-out")
    ap.add_argument("--dev-out")
    ap.add_argument("--test-out")
    a = ap.parse_args()
    outs = dict(corpus_out=a.corpus_out, train_out=a.train_out, dev_out=a.dev_out, test_out=a.test_out)
    if not any(outs.values()):
        raise InputError("arguments", "give at least one of --corpus-out, --train-out, --dev-out, --test-out")
    name = Path(urlparse(a.source).path).name or "squad.json"
    path = fetch(a.source, Path(a.download_dir) / name, sha256=a.sha256, lock=a.lock)
    data = squad_to_dpr(path, passage_words=a.passage_words, seed=a.seed,
                        split={"train": a.train, "dev": a.dev, "test": a.test},
                        articles=parse_article_range(a.articles) if a.articles else None)
    write_squad_dpr(data, **outs)
    json.dump(data.stats, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
