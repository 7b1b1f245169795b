"""The retrieval methods a bi-encoder can be trained and indexed with.

``dpr``: one vector per passage (Karpukhin et al. 2020). ``dcsr``: one contextual vector
per sentence, sentence-aware samples, HasAns score normalization (Wu et al. 2022). They
share the model, the training loop, the index and the search; they differ in the
:class:`~dcsr.training.samples.SampleBuilder` (how samples are built and vectors pooled) and in how
the corpus and the questions are encoded (:mod:`dcsr.retrieval.embed`).
"""

from __future__ import annotations

import os

from dcsr.errors import InputError

METHODS = ("dpr", "dcsr")


def builder_class(method: str, sentence_table: str | os.PathLike | None = None):
    """The sample builder class of ``method``; DCSR's reads its sentence spans from
    ``sentence_table`` (the sentence-splitting stage's output)."""
    from dcsr.training.samples import SampleBuilder

    if method == "dpr":
        return SampleBuilder
    if method == "dcsr":
        from dcsr.training.sentence_samples import SentenceSampleBuilder

        return SentenceSampleBuilder.bind(sentence_table=sentence_table)
    raise InputError("method", f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
