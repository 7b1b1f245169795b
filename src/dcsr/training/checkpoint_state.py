"""What a training checkpoint holds beside the weights, and when it is resumed: the file names
of ``<checkpoint_dir>/last``, the fingerprint of everything that determines the model (a
checkpoint resumes only on an exact match), setting aside a checkpoint that does not match or
cannot be read, recovering one a kill left mid-swap, and every process's random state, kept as
tensors and plain values so that the state loads with ``weights_only`` (a planted
``trainer_state.pt`` is refused, not unpickled)."""

from __future__ import annotations

import contextlib
import math
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from dcsr.data.literals import read_json_object
from dcsr.errors import InputError
from dcsr.models.meta import check_meta
from dcsr.settings import run_only_keys
from dcsr.training.fingerprint import file_identity, init_identity

def _rng_state() -> dict:
    """This process's random streams (Python's, NumPy's, torch's, every visible CUDA device's) as
    tensors and plain values, so that :func:`load_trainer_state` reads them back without
    unpickling anything else."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": {"version": version, "state": list(internal), "gauss": gauss},
             "numpy": {"kind": str(kind), "keys": [int(k) for k in keys], "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> str | None:
    """Put this process's random streams back to ``state`` (of :func:`_rng_state`, or the tuples
    that checkpoints before it held). Returns a note to show when the CUDA devices saved and
    those visible now differ in number (then the first min of both are restored, and the resumed
    run is not bit for bit an uninterrupted one), else None."""
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss"]) if isinstance(py, Mapping) else py)
    npy = state["numpy"]
    if isinstance(npy, Mapping):
        npy = (npy["kind"], np.asarray(npy["keys"], dtype=np.uint32), npy["pos"], npy["has_gauss"],
               npy["cached_gaussian"])
    np.random.set_state(npy)
    torch.set_rng_state(state["torch"])
    if "cuda" not in state or not torch.cuda.is_available():
        return None
    saved, visible = list(state["cuda"]), torch.cuda.device_count()
    for index, device_state in enumerate(saved[:visible]):
        torch.cuda.set_rng_state(device_state, index)
    if len(saved) == visible:
        return None
    restored = min(len(saved), visible)
    rest = (f", the other {visible - restored} start{'s' if visible - restored == 1 else ''} from the seed"
            if visible > restored else "")
    return (f"the checkpoint holds the random state of {len(saved)} CUDA device{'s' if len(saved) != 1 else ''} "
            f"and {visible} {'is' if visible == 1 else 'are'} visible to this process: restored those of the first "
            f"{restored}{rest}; the resumed run is not bit for bit the one an uninterrupted run would have been")


#: NumPy's array and dtype, in which checkpoints from before :func:`_rng_state` stored plain values
#: held NumPy's random state; rebuilding them calls nothing else.
_OLDER_STATE_GLOBALS = [np.dtype, np.ndarray, type(np.dtype(np.uint32)),
                        (getattr(np, "_core", None) or np.core).multiarray._reconstruct]


#: What a checkpoint's ``trainer_state.pt`` holds (the Trainer's ``save``), and the type of each.
STATE_FIELDS = {"optimizer": dict, "scheduler": dict, "scaler": dict, "step": int, "epoch": int, "position": int,
                "rng": list, "validation": list}


def _planted(state_file: Path, what: str, why: str = "This code writes no such state") -> InputError:
    return InputError(str(state_file), f"{what}: not loaded. {why}, so the file was changed or planted; delete the "
                                       f"checkpoint folder {Path(state_file).parent} (training then starts over) or "
                                       "put back a copy you trust")


def load_trainer_state(state_file: Path, fields: Sequence[str] = tuple(STATE_FIELDS)) -> dict:
    """A checkpoint's ``trainer_state.pt``, loaded with ``weights_only``: tensors and plain values
    only (and the NumPy arrays of older checkpoints). Anything else, which unpickling would run
    (a planted file), is an :class:`~dcsr.errors.InputError` naming the file; nothing of it runs.
    So is whatever else loading raises (the allowed NumPy calls, given a crafted shape or dtype:
    a MemoryError, a TypeError), and a state that is not a dict holding ``fields`` of their
    :data:`STATE_FIELDS` types (the entries of ``rng`` and ``validation`` dicts)."""
    import pickle
    import re

    allow = getattr(torch.serialization, "safe_globals", None)  # a torch without it reads no older state
    try:
        with allow(_OLDER_STATE_GLOBALS) if allow is not None else contextlib.nullcontext():
            state = torch.load(state_file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        found = re.search(r"GLOBAL (\S+) was not an allowed global", str(e))
        what = f" ({found.group(1)})" if found else ""
        raise _planted(state_file, f"holds an object other than tensors and plain values{what}, which loading "
                                   "would run", "The checkpoints of this code hold none") from None
    except Exception as e:  # noqa: BLE001 - whatever a crafted file makes the allowed calls raise
        raise _planted(state_file, f"cannot be loaded as a trainer state ({type(e).__name__}: "
                                   f"{str(e)[:200]})") from None
    if not isinstance(state, dict):
        raise _planted(state_file, f"holds a {type(state).__name__}, not the dict of a trainer state")
    for key in fields:
        kind = STATE_FIELDS[key]
        value = state.get(key)
        if (not isinstance(value, kind) or isinstance(value, bool)
                or (kind is list and not all(isinstance(item, dict) for item in value))):
            found = "nothing" if key not in state else type(value).__name__
            wanted = {dict: "a dict", int: "an integer", list: "a list of dicts"}[kind]
            raise _planted(state_file, f"holds a trainer state whose {key!r} is {found}, not {wanted}")
    return state


LAST = "last"
STATE_FILE = "trainer_state.pt"
VALIDATION_FILE = "validation.json"
TRAIN_LOG = "train_log.jsonl"
FINGERPRINT_FILE = "fingerprint.json"
STALE = "stale"
#: ``last/best``: the encoders of the best validation so far, under ``model_from: best`` when
#: they are not ``last``'s own (hard links to the checkpoint that held them, or copies).
BEST = "best"


def fingerprint(s: Mapping[str, Any], method: str, train_json: Path, dev_json: Path, init: str,
                inputs: Mapping[str, str], world: int, compute: str | None = None, code: str | None = None) -> dict:
    """Everything that determines the model a run becomes: the method, every setting but
    :func:`~dcsr.settings.run_only_keys` (the batch as the global batch, which is what
    the loss sees), the content of the training and dev sets and of ``inputs`` (DCSR's
    sentence table), the initial checkpoint, and ``compute``, the precision that ``amp`` resolved
    to on this machine (``auto`` is bf16 on a CPU with AMX or AVX-512 BF16, fp32 on one without),
    and ``code``, the digest of the training code and of the packages that change its numbers
    (the rule's ``code`` param: a job Snakemake reruns for a code change trains anew, rather than
    resume the old code's finished checkpoint). A checkpoint resumes only on an exact match."""
    settings = {k: v for k, v in s.items() if k not in run_only_keys(s) + ("batch_size", "dev_batch_size")}
    return {
        "method": method,
        "settings": {**settings, "global_batch": s["batch_size"] * world,
                     "global_dev_batch": s["dev_batch_size"] * world},
        "training data": file_identity(train_json),
        "dev data": file_identity(dev_json),
        **{name: file_identity(path) for name, path in sorted(inputs.items())},
        "init": init_identity(init),
        **({"compute": compute} if compute is not None else {}),
        **({"code": code} if code is not None else {}),
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


def best_validation(history: Sequence[Mapping[str, Any]], start_epoch: int) -> int | None:
    """The index in ``history`` of DPR's best validation checkpoint (``train_dense_encoder``'s
    ``best_cp_name``): each validation's loss is its average rank from ``start_epoch``
    (``val_av_rank_start_epoch``) on and its NLL before; the best is reset at ``start_epoch``, so
    a run that reached it picks the lowest average rank from there on, one that did not the lowest
    NLL; the first of equals. A NaN never is the best, as DPR's ``<`` never takes one: ranks that
    are all NaN leave the best NLL's, and None when no validation is a number (an empty history
    too). (DPR's test, ``loss < (best or loss + 1)``, takes any later validation after a best of
    exactly 0.0; here 0.0 stays the best.)"""
    def lowest(key: str, indices) -> int | None:
        found = [i for i in indices if math.isfinite(history[i][key])]
        return min(found, key=lambda i: (history[i][key], i)) if found else None

    ranked = lowest("average_rank", [i for i, h in enumerate(history) if h["epoch"] >= start_epoch])
    if ranked is not None:
        return ranked
    return lowest("nll_loss", [i for i, h in enumerate(history) if h["epoch"] < start_epoch])


def _refuse_link(path: Path) -> None:
    """A link in a checkpoint is none of this code's: an :class:`InputError`, not followed."""
    if path.is_symlink():
        raise InputError(str(path), "a checkpoint holds a link; this code writes none: not followed")


def _link_or_copy(src: Path, dst: Path) -> None:
    """``src`` (a file or a tree) at ``dst``, each file hard-linked (checkpoints are replaced
    whole, never written in place), copied where the file system has no hard links."""
    _refuse_link(src)
    if src.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
        for child in sorted(src.iterdir()):
            _link_or_copy(child, dst / child.name)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def keep_best(dest: Path, previous: Path | None, best_step: int, encoder_files: Sequence[str]) -> None:
    """Put the best validation's encoders (of step ``best_step``) into ``dest`` (a new
    checkpoint's ``best/``, or the model folder), from checkpoint ``previous``: its ``best/`` when
    that holds them, else ``previous`` itself when it was written at ``best_step``
    (``encoder_files``: the encoders' folders, then ``dcsr.json``, whose step tells). One of them
    does, as a checkpoint is written after every validation; a checkpoint with neither, or with a
    link in them, is an error, and so is a ``dcsr.json`` that is not a model's (read strictly and
    checked: :func:`dcsr.models.meta.check_meta`)."""
    meta = encoder_files[-1]
    for source in ((previous / BEST, previous) if previous is not None else ()):
        _refuse_link(source)
        _refuse_link(source / meta)
        file = source / meta
        if file.is_file() and check_meta(read_json_object(file), file).get("step") == best_step:
            dest.mkdir(parents=True, exist_ok=True)
            for name in encoder_files:
                _link_or_copy(source / name, dest / name)
            return
    raise InputError(str(previous), f"holds no encoders of step {best_step}, the best validation's "
                                    "(model_from: best); delete the checkpoint folder to train again")
