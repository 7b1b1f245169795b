"""The prefix of every job's shell command (dcsr.pipeline.job_shell), run by bash as Snakemake runs
it: formatted (its doubled braces made single), then the job's command. (That the wait policy
changes no number was checked once on real passages: benchmarks/throughput/throughput.md.)"""

import os
import subprocess
from pathlib import Path

import pytest

from dcsr.fsutil import RESULTS_ENV
from dcsr.pipeline.job_shell import job_shell_prefix

SHOW = f'printf "%s\\n" "$OMP_WAIT_POLICY" "$PYTHONPATH" "${RESULTS_ENV}" "$(command -v python)"'


def _job_env(prefix: str, env: dict) -> list[str]:
    r = subprocess.run(["bash", "-c", prefix.format() + SHOW],
                       capture_output=True, text=True, env=env, check=True)
    return r.stdout.splitlines()


@pytest.mark.parametrize("user_policy", [None, "ACTIVE"])
def test_a_job_waits_passively_unless_its_user_chose_a_policy(tmp_path, user_policy):
    odd = tmp_path / "a b 'q' {x} $(touch INJECTED)"
    (odd / "bin").mkdir(parents=True)
    (odd / "bin" / "python").write_text("#!/bin/sh\n")
    (odd / "bin" / "python").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = "/elsewhere"
    if user_policy:
        env["OMP_WAIT_POLICY"] = user_policy
    policy, pythonpath, results, python = _job_env(job_shell_prefix(odd / "src", odd / "results", odd / "bin"), env)
    assert policy == (user_policy or "PASSIVE")
    assert pythonpath == f"{odd / 'src'}:/elsewhere"
    assert results == str(odd / "results")
    assert python == str(odd / "bin" / "python")
    assert not list(tmp_path.rglob("INJECTED")) and not Path("INJECTED").exists()


def test_under_conda_the_rules_env_keeps_its_python(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "PYTHONPATH")}
    policy, pythonpath, _, python = _job_env(job_shell_prefix(tmp_path / "src", tmp_path / "r", None), env)
    assert (policy, pythonpath) == ("PASSIVE", str(tmp_path / "src"))
    assert python == subprocess.run(["bash", "-c", "command -v python"], capture_output=True, text=True, env=env).stdout.strip()


def test_the_jobs_python_is_absolute_when_snakemake_was_found_through_a_relative_path(tmp_path):
    """`PATH=.venv/bin:$PATH snakemake --directory elsewhere`: Python's sys.executable is then
    relative, and the jobs, run elsewhere, found another Python (the GPU kit's trial, 2026-11-28)."""
    import sys

    from dcsr.pipeline.job_shell import running_python

    assert running_python("/opt/env/bin/python", "/ignored") == Path("/opt/env/bin/python")
    assert running_python(".venv/bin/python", "/work/x/.venv") == Path("/work/x/.venv/bin/python")
    repo = Path(__file__).resolve().parents[1]
    venv_bin = Path(sys.executable).parent
    # as a user types it: a relative PATH entry, then a chdir (Snakemake's --directory)
    (tmp_path / "work").mkdir()
    (tmp_path / "venv").symlink_to(venv_bin.parent)
    r = subprocess.run(["bash", "-c", f'cd {tmp_path} && PATH=venv/bin:"$PATH" python -c '
                                      f'"import os, sys; os.chdir(\'work\'); sys.path.insert(0, \'{repo / "src"}\'); '
                                      f'from dcsr.pipeline.job_shell import running_python as r; '
                                      f'print(sys.executable); print(r()); print(os.path.exists(r()))"'],
                       capture_output=True, text=True, check=True)
    exe, found, exists = r.stdout.split()
    assert exe == "venv/bin/python" and Path(found).is_absolute() and exists == "True"
    assert Path(found).parent.resolve() == venv_bin.resolve()
