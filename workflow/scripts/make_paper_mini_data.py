"""Write miniature stand-ins of DPR's data files and SQuAD v1.1 into one folder, from a seed.

Every file under its DPR (or SQuAD) name and in its format, plus MANIFEST.json (bytes and
sha256 of each); see dcsr.fixtures.mini. Prints a summary as JSON on stdout; progress on stderr.
"""

import argparse
import json
import sys

from dcsr.cli import script
from dcsr.fixtures.mini import DEFAULT_HARD_NEGATIVES, DEFAULT_N_ENTITIES, DEFAULT_SEED, DEFAULT_SIZES, write_paper_mini


@script
def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder to write the files into")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--n-entities", type=int, default=DEFAULT_N_ENTITIES,
                    help=f"entities of the generated world (default {DEFAULT_N_ENTITIES}: about 580 passages)")
    for split, n in DEFAULT_SIZES.items():
        ap.add_argument(f"--{split}-size", type=int, default=n, help=f"at most this many {split} questions per dataset")
    ap.add_argument("--hard-negatives", type=int, default=DEFAULT_HARD_NEGATIVES, help="hard negatives per question")
    a = ap.parse_args()
    sizes = {split: getattr(a, f"{split}_size") for split in DEFAULT_SIZES}
    summary = write_paper_mini(a.out, seed=a.seed, n_entities=a.n_entities, sizes=sizes,
                               hard_negatives=a.hard_negatives)
    json.dump(summary, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
