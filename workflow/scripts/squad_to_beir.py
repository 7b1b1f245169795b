"""Write SQuAD v1.1 (a local path or an http(s) URL) as a BEIR-format folder: DPR's 100-word
passages as corpus.jsonl, the test articles' questions as queries.jsonl, and qrels/test.tsv from
DPR's answer matching (a passage is relevant when it holds an answer), said so in its README.md
(dcsr.data.beir.squad_to_beir). The article split is prepare_squad.py's, with the same options.

    python workflow/scripts/squad_to_beir.py --source resources/squad/squad1.1-dev-36-articles.json.gz \\
        --output beir/squad-dev36

Prints the statistics as JSON on stdout.
"""

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlparse

from dcsr.cli import script
from dcsr.data.beir import squad_to_beir
from dcsr.data.download import fetch
from dcsr.data.squad import DEFAULT_PASSAGE_WORDS, DEFAULT_SEED, DEFAULT_SPLIT, parse_article_range, split_size


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="SQuAD v1.1 JSON: a local path or an http(s) URL")
    ap.add_argument("--output", required=True, help="the BEIR folder to write")
    ap.add_argument("--download-dir", default=".", help="where a URL is downloaded to (kept, and reused)")
    ap.add_argument("--sha256", help="expected sha256 of the source file")
    ap.add_argument("--passage-words", type=int, default=DEFAULT_PASSAGE_WORDS)
    for s in ("train", "dev", "test"):
        ap.add_argument(f"--{s}", type=split_size, default=DEFAULT_SPLIT[s],
                        help=f"fraction (or, when all three are integers, number) of articles in {s}")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--articles", help="only these articles' questions, START:STOP by position in the file")
    a = ap.parse_args()
    name = Path(urlparse(a.source).path).name or "squad.json"
    path = fetch(a.source, Path(a.download_dir) / name, sha256=a.sha256)
    stats = squad_to_beir(path, a.output, passage_words=a.passage_words, seed=a.seed,
                          split={"train": a.train, "dev": a.dev, "test": a.test},
                          articles=parse_article_range(a.articles) if a.articles else None)
    json.dump(stats, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
