#!/usr/bin/env python
"""Train a DPR bi-encoder (see dcsr.training.loop). Runs as a plain script or under torchrun:

    python workflow/scripts/train_biencoder.py --train T.json --dev D.json --init CKPT \
        --output DIR --checkpoint-dir DIR [--settings JSON_OR_FILE]
    torchrun --nproc_per_node N workflow/scripts/train_biencoder.py ...

``--init`` names the checkpoint both encoders start from; separate question and passage
checkpoints (DPR's published pair) are ``--question-init Q --passage-init P`` or
``--init '{"question": Q, "passage": P}'`` (what rules/train.smk passes).

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
    ap.add_argument("--init", default=None, help="base checkpoint of both encoders: a directory, hub id or pkg:NAME; "
                    "or a JSON object {\"question\": CKPT, \"passage\": CKPT}")
    ap.add_argument("--question-init", default=None, help="with --passage-init: the question encoder's checkpoint")
    ap.add_argument("--passage-init", default=None, help="with --question-init: the passage encoder's checkpoint")
    ap.add_argument("--output", required=True, help="final model directory (appears only when done)")
    ap.add_argument("--checkpoint-dir", required=True, help="resumable checkpoints (DIR/last)")
    ap.add_argument("--settings", default="{}", help="settings as a JSON string or a JSON/YAML file")
    ap.add_argument("--run-settings", default="{}", help="settings that change nothing of the model (logging, "
                    "loader workers, checkpoint frequency), over --settings")
    ap.add_argument("--method", default="dpr", help="dpr (one vector per passage) or dcsr (one per sentence)")
    ap.add_argument("--sentences", default=None, help="DCSR: the corpus's sentence table (else split on the fly)")
    ap.add_argument("--code", default=None, help="the training code's digest (the rule's code param): a checkpoint "
                    "of other code is not resumed")
    args = ap.parse_args(argv)
    from dcsr.models.checkpoints import init_from_options
    from dcsr.training.methods import builder_class
    from dcsr.training.loop import train
    from dcsr.training.samples import load_settings

    init = init_from_options(args.init, args.question_init, args.passage_init)
    settings = {**load_settings(args.settings), **load_settings(args.run_settings)}
    train(settings, args.train, args.dev, init, args.output, args.checkpoint_dir,
          builder_cls=builder_class(args.method, args.sentences), code=args.code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
