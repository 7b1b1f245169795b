import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

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
