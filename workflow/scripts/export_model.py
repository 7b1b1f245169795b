#!/usr/bin/env python
"""Export a trained (or untrained) bi-encoder in the format its family's tools read
(see dcsr.models.export): DPR's Hugging Face format (question_encoder/, ctx_encoder/) for a
CLS + dot-product model, sentence-transformers (question_encoder/, passage_encoder/) for a
mean-pooled or normalized one:

    python workflow/scripts/export_model.py --model results/models/dpr --output results/export/dpr [--name dpr]

A model that neither format holds (DCSR's sentence vectors, a scale other than the family's)
prints ``error: model NAME: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from dcsr.cli import script


@script
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="saved bi-encoder directory (results/models/<model>)")
    ap.add_argument("--output", required=True, help="export directory to write (results/export/<model>)")
    ap.add_argument("--name", default=None, help="the model's name, for messages (default: --model)")
    args = ap.parse_args(argv)
    from dcsr.models.export import export_model

    info = export_model(args.model, args.output, args.name)
    print(f"exported {info['model']} to {args.output} in {info['format']} format "
          f"({info['question_encoder']}/, {info['passage_encoder']}/)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
