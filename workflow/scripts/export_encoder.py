#!/usr/bin/env python
"""Write an UNTRAINED bi-encoder (both encoders = the base checkpoint) in the layout of a
trained one, so the "untrained encoder" baseline flows through the same downstream stages:

    python workflow/scripts/export_encoder.py --init CKPT --output DIR [--settings JSON_OR_FILE] [--method dcsr]
    python workflow/scripts/export_encoder.py --question-init Q --passage-init P --output DIR ...

(``--init '{"question": Q, "passage": P}'`` is the same pair, as rules/train.smk passes it.)

Only the settings of ``dcsr.pipeline.config_view.UNTRAINED_KEYS`` matter here (the pipeline passes only
them); a key missing takes its default, and every key given is checked as for training. Bad
input prints ``error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from dcsr.cli import script


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", default=None, help="base checkpoint of both encoders: a directory, hub id or pkg:NAME; "
                    "or a JSON object {\"question\": CKPT, \"passage\": CKPT}")
    ap.add_argument("--question-init", default=None, help="with --passage-init: the question encoder's checkpoint")
    ap.add_argument("--passage-init", default=None, help="with --question-init: the passage encoder's checkpoint")
    ap.add_argument("--output", required=True, help="bi-encoder directory to write")
    ap.add_argument("--settings", default="{}", help="settings as a JSON string or a JSON/YAML file")
    ap.add_argument("--method", default="dpr", help="dpr (one vector per passage) or dcsr (one per sentence)")
    args = ap.parse_args(argv)
    from dcsr.models.checkpoints import init_from_options
    from dcsr.training.methods import builder_class
    from dcsr.training.loop import export_untrained
    from dcsr.training.samples import load_settings

    init = init_from_options(args.init, args.question_init, args.passage_init)
    export_untrained(load_settings(args.settings), init, args.output, builder_cls=builder_class(args.method))
    return 0


if __name__ == "__main__":
    sys.exit(main())
