#!/usr/bin/env python
"""Train a DPR bi-encoder (see dcsr.training.loop). Runs as a plain script or under torchrun:

    python workflow/scripts/train_biencoder.py --train T.json --dev D.json --init CKPT \
        --output DIR --checkpoint-dir DIR [--settings JSON_OR_FILE]
    torchrun --nproc_per_node N workflow/scripts/train_biencoder.py ...

Bad input (files, settings keys) prints ``error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from dcsr.cli import script


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train", required=True, help="DPR biencoder JSON with the training records")
    ap.add_argument("--dev", required=True, help="DPR biencoder JSON with the dev records")
    ap.add_argument("--init", required=True, help="base checkpoint: a directory or pkg:NAME")
    ap.add_argument("--output", required=True, help="final model directory (appears only when done)")
    ap.add_argument("--checkpoint-dir", required=True, help="resumable checkpoints (DIR/last)")
    ap.add_argument("--settings", default="{}", help="settings as a JSON string or a JSON/YAML file")
    ap.add_argument("--method", default="dpr", help="dpr (one vector per passage) or dcsr (one per sentence)")
    ap.add_argument("--sentences", default=None, help="DCSR: the corpus's sentence table (else split on the fly)")
    args = ap.parse_args(argv)
    from dcsr.training.methods import builder_class
    from dcsr.training.loop import load_settings, train

    train(load_settings(args.settings), args.train, args.dev, args.init, args.output, args.checkpoint_dir,
          builder_cls=builder_class(args.method, args.sentences))
    return 0


if __name__ == "__main__":
    sys.exit(main())
