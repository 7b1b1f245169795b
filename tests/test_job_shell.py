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
