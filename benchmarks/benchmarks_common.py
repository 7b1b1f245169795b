"""What every benchmark records about the machine it ran on, and the command line shared by the
scripts that judge DPR-format training files as DCSR's training does."""

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def machine() -> str:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{os.cpu_count()} cores, {cpu_model()}, {gpu}, torch {torch.__version__}, {torch.get_num_threads()} threads"


def emit(result: dict, out: str | None) -> None:
    """Print a benchmark's result as JSON, and write it to ``out`` when given."""
    text = json.dumps(result, indent=1)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")


def timed(fn, repeats: int) -> tuple[float, list[float]]:
    """``(seconds of a warm-up call of fn, [seconds of each of repeats more calls])``, each call
    between CUDA synchronizations where a GPU is present."""
    out = []
    for _ in range(repeats + 1):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        out.append(time.perf_counter() - t)
    return out[0], out[1:]


def sentence_builder_cli(description: str) -> tuple[argparse.Namespace, object]:
    """``(arguments, tokenizer)`` for a script that reads DPR-format training files (``files``)
    and judges them with a trained DCSR passage encoder's tokenizer (``--tokenizer``) at
    ``--passage-max-length``, as :class:`~dcsr.training.sentence_samples.SentenceSampleBuilder` does."""
    from transformers import AutoTokenizer

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("files", nargs="+", help="DPR-format training files (the pipeline's bm25/negatives/*-train.json)")
    ap.add_argument("--tokenizer", required=True, help="a model folder's tokenizer (a trained DCSR passage encoder)")
    ap.add_argument("--passage-max-length", type=int, default=192)
    a = ap.parse_args()
    return a, AutoTokenizer.from_pretrained(a.tokenizer)


def sentence_builder(tokenizer, passage_max_length: int, **settings):
    """A :class:`~dcsr.training.sentence_samples.SentenceSampleBuilder` with training's checked
    settings: ``passage_max_length`` and any ``dcsr:`` settings given."""
    from dcsr.training.samples import validate_settings
    from dcsr.training.sentence_samples import SentenceSampleBuilder

    checked = validate_settings({"passage_max_length": passage_max_length, **settings}, SentenceSampleBuilder.SETTINGS)
    return SentenceSampleBuilder(checked, tokenizer=tokenizer)
