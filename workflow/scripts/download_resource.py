"""Download one file of DPR's resource map (or SQuAD v1.1), resuming, and checked against the lock file."""
import argparse
import logging

from dcsr.cli import script
from dcsr.data.download import fetch
from dcsr.pipeline.resources import resource_of_file


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", required=True)
    ap.add_argument("--out", required=True, help="the file, named as published (e.g. psgs_w100.tsv.gz)")
    ap.add_argument("--lock", required=True, help="JSON lock file: size and sha256 of every file downloaded")
    ap.add_argument("--retries", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    logging.getLogger(__name__).info("resource %s", resource_of_file(a.out.rsplit("/", 1)[-1]).key)
    fetch(a.url, a.out, lock=a.lock, retries=a.retries, timeout=a.timeout)


if __name__ == "__main__":
    main()
