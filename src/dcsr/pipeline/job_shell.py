"""What every job's shell command starts with: rules/common.smk's ``shell.prefix``.

- ``set -euo pipefail``: a failing step of a piped command fails the job.
- Without ``--use-conda``, the folder of the Python that runs Snakemake (:func:`running_python`)
  first on ``PATH``: jobs run with the project's venv even when it is not activated.
- The results folder in :data:`dcsr.fsutil.RESULTS_ENV`, so that no write of
  :func:`dcsr.fsutil.atomic_path` follows a link planted under it to a folder outside it.
- ``src/`` first on ``PYTHONPATH``: scripts import the dcsr package whichever environment runs them.
- ``OMP_WAIT_POLICY=PASSIVE``, unless the user's environment sets a policy of its own. torch's
  OpenMP threads (GNU libgomp, which MKL and oneDNN use too) otherwise spin at the end of every
  parallel region before they sleep. Where a job's threads share cores with other work (jobs run
  side by side under ``--cores``, a test suite's workers, a login node), the spinning thread
  holds the core that another thread needs next, and the job's own threads wait for it. On a
  2-core AMD EPYC Zen 1, two 2-thread MiniLM training processes side by side took 1.28x as long
  with the default policy as with PASSIVE; one alone, the same time (benchmarks/throughput/
  throughput.md, "OpenMP's wait policy"). Which thread computes what does not change, so
  neither do the numbers (there: MiniLM's hidden states of 600 real passages, bit for bit).

Snakemake formats the prefix as it formats each command, so its literal braces are doubled.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from dcsr.fsutil import RESULTS_ENV

#: Environment variables a job gets unless the user's environment sets them.
JOB_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE"}


def running_python(executable: str | None = None, prefix: str | None = None) -> Path:
    """The running Python as an absolute path. ``sys.executable`` is relative where Python was
    found through a relative ``PATH`` entry (``PATH=.venv/bin:$PATH snakemake ...``), and
    Snakemake's ``--directory`` then runs the jobs elsewhere, where that path names nothing: the
    jobs fell back to another Python without torch (seen running the GPU kit's DAG on a CPU,
    2026-11-28). Then it is the one in ``sys.prefix``'s ``bin`` (the venv's or installation's)."""
    exe = Path(sys.executable if executable is None else executable)
    return exe if exe.is_absolute() else Path(sys.prefix if prefix is None else prefix) / "bin" / exe.name


def shell_path(path) -> str:
    """``path`` quoted for the shell (a checkout path may hold spaces or quotes), its braces doubled."""
    return _braces(shlex.quote(str(path)))


def _braces(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def job_shell_prefix(src: Path, results: Path, python_bin: Path | None) -> str:
    """The prefix of every job's command: ``src`` is the folder holding the ``dcsr`` package,
    ``results`` the results folder, ``python_bin`` the folder of the Python to put first on
    ``PATH`` (None under ``--use-conda``, where the rule's env has its own)."""
    parts = ["set -euo pipefail"]
    if python_bin is not None:
        parts.append(f'export PATH={shell_path(python_bin)}:"$PATH"')
    parts.append(f"export {RESULTS_ENV}={shell_path(results)}")
    parts.append(f"export PYTHONPATH={shell_path(src)}" + _braces('"${PYTHONPATH:+:$PYTHONPATH}"'))
    for name, value in JOB_DEFAULTS.items():
        parts.append(f"export {name}=" + _braces(f'"${{{name}:-{value}}}"'))
    return "; ".join(parts) + "; "
