"""What a training checkpoint holds beside the weights, and when it is resumed: the file names
of ``<checkpoint_dir>/last``, the fingerprint of everything that determines the model (a
checkpoint resumes only on an exact match), setting aside a checkpoint that does not match or
cannot be read, recovering one a kill left mid-swap, and every process's random state."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from dcsr.settings import NOT_IN_FINGERPRINT
from dcsr.training.fingerprint import file_identity, init_identity

def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


LAST = "last"
STATE_FILE = "trainer_state.pt"
VALIDATION_FILE = "validation.json"
TRAIN_LOG = "train_log.jsonl"
FINGERPRINT_FILE = "fingerprint.json"
STALE = "stale"


def fingerprint(s: Mapping[str, Any], method: str, train_json: Path, dev_json: Path, init: str,
                inputs: Mapping[str, str], world: int, compute: str | None = None) -> dict:
    """Everything that determines the model a run becomes: the method, every setting but
    :data:`~dcsr.settings.NOT_IN_FINGERPRINT` (the batch as the global batch, which is what
    the loss sees), the content of the training and dev sets and of ``inputs`` (DCSR's
    sentence table), the initial checkpoint, and ``compute``, the precision that ``amp`` resolved
    to on this machine (``auto`` is bf16 on a CPU with AMX or AVX-512 BF16, fp32 on one without). A checkpoint
    resumes only on an exact match."""
    settings = {k: v for k, v in s.items() if k not in NOT_IN_FINGERPRINT + ("batch_size", "dev_batch_size")}
    if s.get("grad_cache_chunk") and s.get("dropout") != 0.0:
        # with dropout on (None: the checkpoint's own, BERT's 0.1), chunks draw other masks than
        # one pass over the batch: the same loss in expectation, not the same model
        settings["grad_cache_chunk"] = s["grad_cache_chunk"]
    return {
        "method": method,
        "settings": {**settings, "global_batch": s["batch_size"] * world,
                     "global_dev_batch": s["dev_batch_size"] * world},
        "training data": file_identity(train_json),
        "dev data": file_identity(dev_json),
        **{name: file_identity(path) for name, path in sorted(inputs.items())},
        "init": init_identity(init),
        **({"compute": compute} if compute is not None else {}),
    }


def _unreadable(state_file: Path) -> str | None:
    """Why a checkpoint's state file cannot be loaded, or None. torch.save writes a zip archive:
    its directory and every member's CRC are checked, which reads the file once without
    unpickling it."""
    import zipfile

    try:
        with zipfile.ZipFile(state_file) as z:
            bad = z.testzip()
        return None if bad is None else f"member {bad} is damaged"
    except (OSError, zipfile.BadZipFile, EOFError) as e:
        return str(e) or type(e).__name__


def _set_aside(checkpoint_dir: Path, last: Path, reason: str, say: Callable[[str], None]) -> None:
    """Move a checkpoint that does not match this run to ``checkpoint_dir/stale/<time>``
    (never deleted: it is a user's data) and say why in one line."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    dest = checkpoint_dir / STALE / stamp
    n = 1
    while dest.exists():
        n += 1
        dest = checkpoint_dir / STALE / f"{stamp}-{n}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(last, dest)
    say(f"checkpoint {last} set aside: it does not match this run ({reason}); moved it to {dest}, "
        "training from the start")


def _recover_last(checkpoint_dir: Path) -> Path | None:
    """``checkpoint_dir/last`` if present. A kill inside atomic_path's directory swap can
    leave only ``.last.old``; it is complete, so it is put back."""
    last = checkpoint_dir / LAST
    old = checkpoint_dir / f".{LAST}.old"
    if not last.exists() and (old / STATE_FILE).is_file():
        os.replace(old, last)
    for stale in checkpoint_dir.glob(f".{LAST}.*.tmp"):  # half-written checkpoints of a killed run
        shutil.rmtree(stale, ignore_errors=True)
    return last if (last / STATE_FILE).is_file() else None
