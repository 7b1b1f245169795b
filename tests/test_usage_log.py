"""Every workflow script logs its exact peak RSS and CPU time on success (dcsr.cli.log_usage):
the rehearsal's memory column (benchmarks/rehearsal/rehearsal.py) reads it, because Snakemake's benchmark
files sample memory only every 30 s once a job has run 15 s."""

import logging
import re

import numpy as np


def test_a_script_logs_a_peak_that_covers_what_it_held_and_its_cpu_time(caplog):
    from dcsr.cli import script

    @script
    def main():
        a = np.ones(200 * 2**20 // 8)  # 200 MiB, touched
        a.sum()
        return 7

    with caplog.at_level(logging.INFO, logger="dcsr.usage"):
        assert main() == 7
    (line,) = [r.getMessage() for r in caplog.records if r.name == "dcsr.usage"]
    m = re.fullmatch(r"usage: peak_rss_mb=([0-9.]+) children_peak_rss_mb=([0-9.]+) cpu_s=([0-9.]+)", line)
    assert m, line
    assert float(m[1]) >= 200  # the array alone; a peak read as KB or as pages would fail this
    assert float(m[3]) > 0


def test_a_failed_script_logs_no_usage(caplog):
    import pytest

    from dcsr.cli import script
    from dcsr.errors import InputError

    @script
    def main():
        raise InputError("x.tsv", "bad")

    with caplog.at_level(logging.INFO, logger="dcsr.usage"), pytest.raises(SystemExit):
        main()
    assert not [r for r in caplog.records if r.name == "dcsr.usage"]
