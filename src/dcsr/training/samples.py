"""What training reads and builds: the checked training settings, and the samples and batches.

Sample building is the replaceable part: :class:`SampleBuilder` turns a training record into
a question, its passages and the index of the positive vector (DPR: the first positive, one
hard negative shuffled every epoch); DCSR subclasses it (:mod:`dcsr.training.sentence_samples`:
sentence markers, ``pool_positions``, sentence-level ``positive_index``) and passes the class
to :func:`dcsr.training.loop.train` without touching the loop.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch import Tensor

from dcsr.data.answers import encoder_question
from dcsr.data.formats import iter_biencoder
from dcsr.errors import InputError
from dcsr.models.biencoder import BiEncoder, tokenize_passages, tokenize_questions
from dcsr.settings import TRAIN, Setting, Settings, check_train_combination, filled

# ---------------------------------------------------------------------- settings


def validate_settings(settings: Mapping[str, Any] | None, extra: Mapping[str, Setting] | None = None) -> Settings:
    """The full settings: the given ones checked against :data:`dcsr.settings.TRAIN` (plus
    ``extra``, the keys a :class:`SampleBuilder` adds) and every default filled in. An
    :class:`InputError` names any unknown key (and the closest valid one), wrong type or
    out-of-range value."""
    full = filled({**TRAIN, **(extra or {})}, settings, "settings")
    check_train_combination(full, "settings")
    if full["dev_batch_size"] is None:
        full["dev_batch_size"] = full["batch_size"]
    return Settings(full)


def load_settings(arg: str | None) -> dict:
    """Settings from a JSON string, or from a JSON/YAML file if ``arg`` names one."""
    if arg is None or not str(arg).strip():
        return {}
    text, where = arg, "--settings"
    if os.path.isfile(arg):
        where = arg
        if arg.endswith((".yaml", ".yml")):
            from dcsr.yamlutil import strict_load

            return _settings_mapping(strict_load(Path(arg)), where)
        with open(arg, encoding="utf-8") as fh:
            text = fh.read()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(where, f"settings are neither an existing file nor valid JSON: {e.msg}")
    return _settings_mapping(value, where)


def _settings_mapping(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(where, f"settings must be a JSON object, found {type(value).__name__}")
    return value


# ---------------------------------------------------------------------- samples


@dataclass
class Sample:
    """One question and its passages; ``positive`` indexes ``passages``."""

    question: str
    passages: list[dict]
    positive: int = 0
    extra: dict = field(default_factory=dict)


@dataclass
class Batch:
    """A tokenized batch. ``q``: question inputs ``[B, Lq]``; ``p``: passage inputs ``[P, Lp]``
    (and, for DCSR, ``pool_positions``); ``positive_index`` ``[B]`` long: for each question
    the row of its positive among the vectors the passage encoder returns for ``p``."""

    q: dict
    p: dict
    positive_index: Tensor
    size: int

    def to(self, device: torch.device) -> "Batch":
        move = lambda d: {k: (v.to(device) if isinstance(v, Tensor) else v) for k, v in d.items()}  # noqa: E731
        return Batch(move(self.q), move(self.p), self.positive_index.to(device), self.size)


def sample_rng(seed: int, epoch: int, index: int) -> random.Random:
    """The RNG of one training sample: a function of (seed, epoch, record index) only, so that
    negatives do not depend on the number of processes, the batch size or a resume."""
    return random.Random(f"{seed}:{epoch}:{index}")


class SampleBuilder:
    """DPR's ``BiEncoder.create_biencoder_input``: questions, their passages, positive indices.

    Per question the passages are ``[positive, other negatives..., hard negatives...]`` (DPR's
    order; with the default ``other_negatives=0`` a batch is ``[pos_1, hn_1, pos_2, hn_2, ...]``)
    and the target of question i is the row of its positive in the concatenation.
    Subclasses (DCSR) override :meth:`sample` and/or :meth:`collate`, and may declare extra
    settings keys in ``SETTINGS`` (``{key: dcsr.settings.Setting}``).
    """

    method = "dpr"
    SETTINGS: dict[str, Setting] = {}

    def __init__(self, settings: Mapping[str, Any]):
        self.settings = dict(settings)
        self.hard_negatives = settings["hard_negatives"]
        self.other_negatives = settings["other_negatives"]
        self.shuffle_positives = settings["shuffle_positives"]
        self.question_max_length = settings["question_max_length"]
        self.passage_max_length = settings["passage_max_length"]
        self.question_text = settings["question_text"]

    def question(self, record: Mapping[str, Any]) -> str:
        """The record's question as the question encoder sees it (``question_text``)."""
        return encoder_question(record["question"], self.question_text)

    def setup(self, tokenizer, model: BiEncoder) -> None:
        """Called once with the tokenizer and the bi-encoder before training or export (DCSR
        binds its tokenizer and makes sure ``<sent>`` has an embedding row)."""

    @classmethod
    def input_files(cls) -> dict[str, str]:
        """Files besides the training and dev sets that determine the trained model, by name
        (DCSR: its sentence table); they enter the checkpoint's fingerprint."""
        return {}

    def prepare_records(self, records: list[dict], where: str, log: Callable[[str], None]) -> list[dict]:
        """The records of ``where`` (a file) that can be trained on; DPR keeps them all."""
        return records

    def slim(self, record: dict) -> dict:
        """``record`` as training holds it: where ``other_negatives`` is 0 and the record has hard
        negatives, its random negatives (``negative_ctxs``, 50 a question in DPR's files) are
        never read, only shuffled, and a shuffle draws by their count alone: each becomes
        ``None``, so that every process of a run does not hold their text. The draws, and so
        the samples, are those of the whole record. Training records only: validation draws
        ``other_negatives`` of its own (DPR's average rank)."""
        if self.other_negatives == 0 and record.get("hard_negative_ctxs") and record.get("negative_ctxs"):
            record["negative_ctxs"] = [None] * len(record["negative_ctxs"])
        return record

    def sample(self, record: Mapping[str, Any], rng: random.Random, shuffle: bool = True,
               hard_negatives: int | None = None, other_negatives: int | None = None) -> Sample:
        """One training sample from a biencoder record (``shuffle=False`` for validation)."""
        n_hard = self.hard_negatives if hard_negatives is None else hard_negatives
        n_other = self.other_negatives if other_negatives is None else other_negatives
        positives = record["positive_ctxs"]
        if shuffle and self.shuffle_positives:
            positive = positives[rng.randrange(len(positives))]
        else:
            positive = positives[0]
        others = list(record.get("negative_ctxs", []))
        hard = list(record.get("hard_negative_ctxs", []))
        if shuffle:
            rng.shuffle(others)
            rng.shuffle(hard)
        if not hard:  # DPR's hard_neg_fallback: random negatives stand in for missing BM25 ones
            hard = others[:n_hard]
        passages = [positive] + others[:n_other] + hard[:n_hard]
        return Sample(self.question(record), passages, 0)

    def collate(self, tokenizer, samples: Sequence[Sample]) -> Batch:
        """Tokenize samples into a :class:`Batch` (passages of all samples concatenated)."""
        questions, titles, texts, positive_index = [], [], [], []
        for s in samples:
            positive_index.append(len(texts) + s.positive)
            questions.append(s.question)
            titles.extend(p.get("title", "") for p in s.passages)
            texts.extend(p["text"] for p in s.passages)
        q = dict(tokenize_questions(tokenizer, questions, self.question_max_length))
        p = dict(tokenize_passages(tokenizer, titles, texts, self.passage_max_length))
        return Batch(q, p, torch.tensor(positive_index, dtype=torch.long), len(samples))

    def build(self, tokenizer, records: Sequence[Mapping[str, Any]], rngs: Sequence[random.Random],
              shuffle: bool = True, **kw) -> Batch:
        return self.collate(tokenizer, [self.sample(r, g, shuffle, **kw) for r, g in zip(records, rngs)])


def build_samples(records: Sequence[Mapping[str, Any]], settings: Mapping[str, Any] | None = None,
                  epoch: int = 0, indices: Sequence[int] | None = None, shuffle: bool = True,
                  builder: SampleBuilder | None = None) -> list[Sample]:
    """The samples of ``records`` (``indices`` into them, default all) in ``epoch``."""
    if builder is None:
        builder = SampleBuilder(validate_settings(settings))
    seed = builder.settings["seed"]
    indices = range(len(records)) if indices is None else indices
    return [builder.sample(records[i], sample_rng(seed, epoch, i), shuffle) for i in indices]


def read_training_records(path, builder: SampleBuilder, say: Callable[[str], None]) -> list[dict]:
    """The training records of ``path`` as every process holds them: streamed, each slimmed as
    it is read (:meth:`SampleBuilder.slim`: the random negatives training never reads are not
    kept), those without a positive left out (:func:`with_positives`)."""
    return with_positives([builder.slim(r) for r in iter_biencoder(path, require_positive=False)], path, say)


def with_positives(records: list[dict], path, say: Callable[[str], None]) -> list[dict]:
    """The records that have a positive passage, as DPR's ``JsonQADataset`` keeps them (its
    TriviaQA, WebQuestions and CuratedTREC files hold questions whose positive was not found);
    how many were left out is said. A file without any is an :class:`InputError`."""
    kept = [r for r in records if r["positive_ctxs"]]
    if records and not kept:
        raise InputError(str(path), f"none of its {len(records)} records has a positive passage ('positive_ctxs'); "
                                    "training needs at least one")
    if len(kept) < len(records):
        say(f"{path}: {len(records) - len(kept)} of {len(records)} records have no positive passage and are left "
            "out, as DPR's training leaves them out")
    return kept
