"""Encoders: the bi-encoder with its pooling and similarity (and its saved ``dcsr.json``,
:mod:`dcsr.models.meta`), DCSR's ``<sent>`` markers and
sentence vectors, resolving and checking checkpoints (``pkg:``, ``tiny``, paths, hub ids),
the tiny random BERT of tests and CI, and the compute precision (fp32/bf16).
"""
