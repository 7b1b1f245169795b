import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# As every pipeline job gets them (dcsr.pipeline.job_shell: OMP_WAIT_POLICY=PASSIVE), before torch
# loads OpenMP: `make test`'s two workers share the cores, and threads spinning at OpenMP's barriers
# hold the cores the other needs. (job_shell imports neither torch nor numpy.)
from dcsr.pipeline.job_shell import JOB_DEFAULTS  # noqa: E402

for _name, _value in JOB_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> Path:
    """A tiny random BERT (MiniLM's vocabulary) saved as a Hugging Face checkpoint."""
    from dcsr.models.checkpoints import VOCAB_OF_TINY, resolve_checkpoint
    from dcsr.models.tiny import make_tiny_bert

    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), resolve_checkpoint(VOCAB_OF_TINY))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture()
def one_thread():
    """One intra-op thread (tests of the tiny model use it): the tiny model gains nothing from
    more, and on a shared machine OpenMP threads contending for busy cores slow its small
    matmuls down many times."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: Test files run first, in this order: the long pipeline runs, longest first (docs/testing.md
#: says what each guards and costs). `make test` runs two pytest-xdist workers, each taking a
#: whole file (--dist loadfile, in this order: --no-loadscope-reorder): the real-text default
#: starts at once on one worker and the other takes the rest. A worker gets a second file before
#: it starts its first, so a file of two quick tests (test_usage_log.py) is the one that waits
#: behind the real-text default. A serial run only sees the order.
FIRST = ("test_demo.py", "test_paper_dag.py", "test_usage_log.py", "test_slurm.py", "test_workflow.py",
         "test_beir.py", "test_dpr_checkpoints.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order
