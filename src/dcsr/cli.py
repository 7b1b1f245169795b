"""Shared plumbing of the workflow scripts: logging to stderr, bad input reported as one
``error:`` line (exit status 2) instead of a traceback, and reading a value chosen on dev."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys

from dcsr.errors import InputError


# Set (to "1") where :func:`script` chose TOKENIZERS_PARALLELISM=false rather than the user: a job
# may then lift it (dcsr.retrieval.embed.parallel_tokenizer, on CUDA); the user's choice stands.
TOKENIZERS_DEFAULTED_ENV = "DCSR_TOKENIZERS_PARALLELISM_DEFAULTED"


def script(main):
    """Decorate a script's ``main()``."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs):
        if "TOKENIZERS_PARALLELISM" not in os.environ:
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
            os.environ[TOKENIZERS_DEFAULTED_ENV] = "1"
        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        try:
            result = main(*args, **kwargs)
            log_usage()
            return result
        except InputError as e:
            _error(str(e))
        except OSError as e:
            # the machine, not the code: a full disk, a quota, a permission, a vanished mount.
            # One line naming the file and what to do; no traceback to read through.
            _error(os_error_line(e))

    return wrapper


def log_usage() -> None:
    """Log the process's exact peak RSS and CPU time (its own and its finished children's,
    from ``getrusage``): Snakemake's benchmark files sample memory every 30 s after a job's
    first 15 s and can miss a peak; benchmarks/rehearsal/rehearsal.py reads this line instead."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    logging.getLogger("dcsr.usage").info(
        "usage: peak_rss_mb=%.1f children_peak_rss_mb=%.1f cpu_s=%.2f", me.ru_maxrss / 1024,
        kids.ru_maxrss / 1024, me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime)


def _error(message: str):
    rank = os.environ.get("RANK", "0")  # under torchrun, say which process failed
    print(f"error{'' if rank == '0' else f' (rank {rank})'}: {message}", file=sys.stderr)
    sys.exit(2)


def os_error_line(e: OSError) -> str:
    """An :class:`OSError` as one line: the file, the system's reason, and for a full disk or
    quota what to do (the output is written atomically, so nothing partial is left)."""
    import errno

    where = e.filename if e.filename is not None else "(no file named)"
    reason = e.strerror or str(e)
    line = f"{where}: {reason}"
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        line += ("; free space on that disk (or point results: or TMPDIR elsewhere) and run again: "
                 "no partial output was kept")
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        line += "; this process may not write there"
    return line


def chosen_value(path: str | os.PathLike, key: str) -> float:
    """``key`` of a choice made on dev questions (choose_temperature's or choose_fusion_weight's
    JSON) as a number; an :class:`InputError` naming the file when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return float(json.load(fh)[key])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(str(path), f"cannot read the chosen {key}: {e}")
