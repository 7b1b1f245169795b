"""Shared plumbing of the workflow scripts: logging to stderr, bad input reported as one
``error:`` line (exit status 2) instead of a traceback, and reading a value chosen on dev."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys

from dcsr.errors import InputError


def script(main):
    """Decorate a script's ``main()``."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        try:
            return main(*args, **kwargs)
        except InputError as e:
            rank = os.environ.get("RANK", "0")  # under torchrun, say which process failed
            print(f"error{'' if rank == '0' else f' (rank {rank})'}: {e}", file=sys.stderr)
            sys.exit(2)

    return wrapper


def chosen_value(path: str | os.PathLike, key: str) -> float:
    """``key`` of a choice made on dev questions (choose_temperature's or choose_fusion_weight's
    JSON) as a number; an :class:`InputError` naming the file when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return float(json.load(fh)[key])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(str(path), f"cannot read the chosen {key}: {e}")
