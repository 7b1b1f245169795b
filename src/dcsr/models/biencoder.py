"""DPR's bi-encoder: two BERT-style encoders, a pooled vector per text, dot-product scores.

Layout of a saved bi-encoder (what :func:`save_biencoder` writes, :func:`load_biencoder`
reads, and every downstream stage consumes)::

    out_dir/question_encoder/   Hugging Face ``save_pretrained`` model + tokenizer
    out_dir/passage_encoder/    Hugging Face ``save_pretrained`` model + tokenizer
    out_dir/dcsr.json           meta: pooling, normalize, scale, max lengths, method, base checkpoint, step,
                                and ``weights_sha256``: the digest of each weight file, and ``files_sha256``:
                                of every other file (config.json, the tokenizer's), both checked at load

Pooling is a hook, :meth:`BiEncoder.pool`, that reads the whole tokenized batch: DPR takes
the [CLS] vector, "mean" a masked mean, and a batch that carries ``pool_positions`` (flat
indices into ``[B * L]``) is pooled by gathering the hidden states at those positions, so
DCSR's one-vector-per-``<sent>``-marker encoding needs no change to the training loop.

The question and passage encoders start from one checkpoint (DPR: two copies of BERT) or from
a pair, ``init={"question": CKPT, "passage": CKPT}`` (DPR's published question and context
encoders); a Hugging Face DPR encoder (``model_type: dpr``) is loaded as the BERT inside it,
whose [CLS] state is exactly its ``pooler_output`` (projection_dim 0).

The similarity follows the encoder family (:func:`dcsr.models.similarity.family_similarity`): DPR and BERT
checkpoints use the dot product of [CLS] vectors; a sentence-transformers model whose modules
mean-pool and normalize (MiniLM) uses ``scale`` x cosine. Both are one dot product: a
normalized model's vectors are unit vectors times ``sqrt(scale)``, so training, FAISS's inner
product search and HasAns need no second code path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor

from dcsr.models.checkpoints import (check_checkpoint_files, checkpoint_dir, config_vocab_size, init_pair,
                                      load_error_text, looks_like_path, no_code, resolve_checkpoint)
from dcsr.models.meta import META_FILE, read_meta
from dcsr.models.similarity import pair_similarity
from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import check_file_digests, file_digests, warn_unverified
from dcsr.settings import POOLINGS, TOKEN_TYPES, TRAIN

log = logging.getLogger(__name__)

QUESTION_DIR = "question_encoder"
PASSAGE_DIR = "passage_encoder"
FORMAT_VERSION = 1
#: The files whose digests ``dcsr.json`` records (``weights_sha256``) and loading checks.
WEIGHT_SUFFIXES = (".safetensors", ".bin")

# Keys of a tokenized batch that go into the Hugging Face model; everything else in the
# batch dict (pool_positions, ...) is for the pooling hook only.
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


class BiEncoder(torch.nn.Module):
    """Separate question and passage encoders (DPR), pooled to one vector per text.

    ``question_model`` / ``passage_model`` are Hugging Face encoders whose output has
    ``last_hidden_state`` ``[B, L, H]``. Scores are dot products of the pooled vectors.
    """

    def __init__(self, question_model: torch.nn.Module, passage_model: torch.nn.Module,
                 pooling: str = "cls", normalize: bool = False, scale: float = 1.0, source: str | None = None,
                 token_types: str = "pair"):
        super().__init__()
        if token_types not in TOKEN_TYPES:
            raise InputError("token_types", f"unknown token_types {token_types!r}; expected {' or '.join(TOKEN_TYPES)}")
        if pooling not in POOLINGS or pooling == "auto":
            raise InputError("pooling", f"unknown pooling {pooling!r}; expected cls or mean "
                                        "(resolve auto with family_similarity first)")
        if not scale > 0:
            raise InputError("scale", f"the similarity scale must be > 0, got {scale!r}")
        self.question_model = question_model
        self.passage_model = passage_model
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.scale = float(scale)
        self.similarity_source = source  # where pooling and similarity came from (family_similarity)
        # "zeros": the encoders never see the tokenizer's token types (DPR's and DCSR's segments)
        self.token_types = token_types

    @property
    def similarity(self) -> dict:
        """What the model's scores are: ``{"pooling", "normalize", "scale"}``."""
        return {"pooling": self.pooling, "normalize": self.normalize, "scale": self.scale}

    # ------------------------------------------------------------------ pooling

    def pool(self, hidden: Tensor, batch: Mapping[str, Any]) -> Tensor:
        """Pool token states to vectors.

        hidden: ``[B, L, H]``; batch: the tokenized batch (``attention_mask`` ``[B, L]``,
        optionally ``pool_positions`` ``[N]`` long, flat indices ``b * L + t``).

        Returns ``[B, H]`` ("cls": ``hidden[:, 0]`` as DPR; "mean": mean over the tokens
        whose mask is 1) or, when the batch carries ``pool_positions``, ``[N, H]``, one vector
        per position, in the order given (DCSR's ``<sent>`` markers): "cls" takes the state at
        the position (DCSR's own pooling); "mean" averages the states from the position up to
        ``pool_ends`` ``[N]`` (exclusive flat indices: a sentence's marker and its tokens). Its float32
        prefix sums run over the whole flat batch, so a mean's rounding grows with its row (up to 3.9e-5
        relative in 64 MiniLM passages of 192 tokens); per-row sums would end that and move every DCSR pin.
        """
        positions = batch.get("pool_positions") if isinstance(batch, Mapping) else None
        if positions is not None:
            b, l, h = hidden.shape
            flat = hidden.reshape(b * l, h)
            positions = positions.to(hidden.device).long()
            if self.pooling == "cls":
                return flat.index_select(0, positions)
            ends = batch.get("pool_ends")
            if ends is None:
                raise ValueError("mean pooling over marked sentences needs pool_ends in the batch")
            ends = ends.to(hidden.device).long()
            # prefix sums in float32: the mean of the rows in [start, end) is (P[end] - P[start]) / (end - start)
            prefix = torch.cat([flat.new_zeros(1, h, dtype=torch.float32), flat.float().cumsum(dim=0)])
            counts = (ends - positions).clamp(min=1).unsqueeze(-1).to(torch.float32)
            return ((prefix.index_select(0, ends) - prefix.index_select(0, positions)) / counts).to(hidden.dtype)
        if self.pooling == "cls":
            return hidden[:, 0, :]
        # in float32, as the marked sentences above: bf16 counts no further than 256 exactly
        # (257 tokens would be 256), and its sums of many rows lose more than the rows hold
        mask = batch["attention_mask"].to(torch.float32).unsqueeze(-1)  # [B, L, 1]
        return ((hidden.float() * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)).to(hidden.dtype)

    def _encode(self, model: torch.nn.Module, batch: Mapping[str, Any]) -> Tensor:
        inputs = {k: batch[k] for k in MODEL_INPUTS if batch.get(k) is not None}
        if self.token_types == "zeros":  # the encoder then takes type 0 for every token
            inputs.pop("token_type_ids", None)
        hidden = model(**inputs).last_hidden_state  # [B, L, H]
        vecs = self.pool(hidden, batch)
        if self.normalize:  # scale x cosine as a dot product: unit vectors times sqrt(scale)
            vecs = torch.nn.functional.normalize(vecs.float(), dim=-1).to(vecs.dtype)
        if self.scale != 1.0:
            vecs = vecs * (self.scale ** 0.5)
        return vecs

    # ------------------------------------------------------------------ encoders

    def encode_questions(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None,
                         **extra: Any) -> Tensor:
        """Question vectors ``[B, H]`` from ``input_ids`` / ``attention_mask`` ``[B, L]``."""
        return self._encode(self.question_model, dict(input_ids=input_ids, attention_mask=attention_mask,
                                                      token_type_ids=token_type_ids, **extra))

    def encode_passages(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor | None = None,
                        **extra: Any) -> Tensor:
        """Passage vectors ``[B, H]`` from ``[B, L]`` inputs (``[N, H]`` if ``pool_positions=`` ``[N]`` given)."""
        return self._encode(self.passage_model, dict(input_ids=input_ids, attention_mask=attention_mask,
                                                     token_type_ids=token_type_ids, **extra))

    def forward(self, q_batch: Mapping[str, Any], p_batch: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        """``(q_vecs [B, H], p_vecs [P, H])`` for a tokenized question and passage batch."""
        return self._encode(self.question_model, q_batch), self._encode(self.passage_model, p_batch)

    @property
    def hidden_size(self) -> int:
        return int(self.passage_model.config.hidden_size)


def score(q_vecs: Tensor, p_vecs: Tensor) -> Tensor:
    """DPR's similarity: dot products ``[B, P]`` of ``q_vecs [B, H]`` and ``p_vecs [P, H]``."""
    return q_vecs @ p_vecs.transpose(0, 1)


# ---------------------------------------------------------------------- tokenization


def tokenize_questions(tokenizer, questions: Sequence[str], max_length: int, padding: bool = True):
    """``[CLS] question [SEP]``, truncated to ``max_length``; padded tensors ``[B, L]`` (or lists
    without padding, for callers that sort by length first)."""
    enc = tokenizer(list(questions), truncation=True, max_length=max_length)
    return tokenizer.pad(enc, return_tensors="pt") if padding else enc


def tokenize_passages(tokenizer, titles: Sequence[str] | None, texts: Sequence[str], max_length: int,
                      padding: bool = True):
    """DPR's passage input, title and text as a sentence pair: ``[CLS] title [SEP] text [SEP]``.

    As DPR's ``BertTensorizer.text_to_tensor``, a passage without a title is encoded as its
    text alone, and truncation is ``longest_first`` to ``max_length`` (the text loses tokens
    first). Returns padded tensors ``[B, L]`` or, with ``padding=False``, lists.
    """
    texts = list(texts)
    titles = list(titles) if titles is not None else [""] * len(texts)
    if len(titles) != len(texts):
        raise ValueError(f"{len(titles)} titles for {len(texts)} texts")
    with_title = [i for i, t in enumerate(titles) if t]
    without = [i for i, t in enumerate(titles) if not t]
    parts: dict[int, dict[str, list[int]]] = {}
    if with_title:
        enc = tokenizer([titles[i] for i in with_title], [texts[i] for i in with_title],
                        truncation=True, max_length=max_length)
        for j, i in enumerate(with_title):
            parts[i] = {k: enc[k][j] for k in enc.keys()}
    if without:
        enc = tokenizer([texts[i] for i in without], truncation=True, max_length=max_length)
        for j, i in enumerate(without):
            parts[i] = {k: enc[k][j] for k in enc.keys()}
    feats = [parts[i] for i in range(len(texts))]
    if padding:
        return tokenizer.pad(feats, return_tensors="pt")
    keys = feats[0].keys() if feats else ("input_ids", "attention_mask")
    return {k: [f[k] for f in feats] for k in keys}


# ---------------------------------------------------------------------- building, saving, loading


@contextlib.contextmanager
def _quiet_transformers():
    """Silence transformers' per-call load report and progress bars ("Loading weights",
    "Writing model shards"), which would otherwise repeat at every checkpoint."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def local_checkpoint(name_or_path: str) -> str:
    """The checkpoint that ``name_or_path`` resolves to (:func:`resolve_checkpoint`, ``~``
    expanded), checked when it is a local path: a missing path is an :class:`InputError`
    (instead of Hugging Face's misleading "Repo id" / "couldn't connect" errors), and so is a
    directory without ``config.json``, or one whose files loading must not run or read
    (:func:`~dcsr.models.checkpoints.check_checkpoint_files`: the checks of the config's
    encoders at DAG build, made again here for every load, a saved model's included). A hub id
    is returned as it is."""
    path = resolve_checkpoint(name_or_path)
    if path.startswith("~"):
        path = os.path.expanduser(path)
    if os.path.isdir(path):
        found = checkpoint_dir(path)  # the folder, or a sentence-transformers folder's Transformer subfolder
        if found is None:
            raise InputError(str(name_or_path), "is a directory without config.json, so not a Hugging Face "
                                                "checkpoint; give the directory that save_pretrained wrote")
        check_checkpoint_files(found, str(name_or_path))
        return str(found) if found != Path(path) else path
    if os.path.exists(path):
        raise InputError(str(name_or_path), "is a file, not a checkpoint directory; give the directory "
                                            "that holds its config.json")
    if looks_like_path(str(name_or_path)) or path != name_or_path:
        raise InputError(str(name_or_path), "is neither an existing directory nor a model hub id; "
                                            "check the path (relative paths start from the working "
                                            f"directory, {os.getcwd()})")
    return path


def _float32() -> dict:
    """The ``from_pretrained`` argument that loads the weights as float32 parameters, whatever
    dtype the checkpoint was saved in: transformers 5 defaults to ``dtype="auto"`` (the saved
    dtype), so an fp16 or bf16 checkpoint would train with half-precision parameters (and with
    ``amp: fp16`` the GradScaler refuses to unscale fp16 gradients). The compute precision is
    autocast's (:mod:`dcsr.models.precision`), in training and in embedding alike. transformers
    before 4.56 names the argument ``torch_dtype``."""
    import re

    import transformers

    major_minor = tuple(int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    return {"dtype" if major_minor >= (4, 56) else "torch_dtype": torch.float32}


def load_encoder(name_or_path: str, dropout: float | None = None, attention_dropout: float | None = None):
    """A Hugging Face encoder (no pooler head) from a checkpoint directory or ``pkg:`` name, its
    parameters float32 whatever dtype the checkpoint was saved in (:func:`_float32`).

    ``dropout`` overrides every dropout probability of the config (``None`` keeps the
    checkpoint's), then ``attention_dropout`` the attention probabilities' (BERT's
    ``attention_probs_dropout_prob``). Raises :class:`InputError` when the checkpoint cannot be read.
    """
    from transformers import AutoConfig, AutoModel

    path = local_checkpoint(name_or_path)
    try:
        config = AutoConfig.from_pretrained(path, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - whatever the checkpoint's files make transformers raise
        raise InputError(str(name_or_path), f"cannot read a Hugging Face checkpoint: {load_error_text(e)}")
    if dropout is not None:
        for key, value in list(config.to_dict().items()):
            if "dropout" in key and isinstance(value, float):
                setattr(config, key, float(dropout))
    if attention_dropout is not None:
        keys = [k for k, v in config.to_dict().items() if "dropout" in k and "attention" in k and isinstance(v, float)]
        if not keys:
            raise InputError(str(name_or_path), "attention_dropout is set, but the config has no attention dropout "
                                                f"({config.model_type}); leave attention_dropout null")
        for key in keys:
            setattr(config, key, float(attention_dropout))
    if getattr(config, "model_type", None) == "dpr":
        return _load_dpr_encoder(path, config, str(name_or_path))
    # DPR pools [CLS] from the last hidden layer, not BERT's pooler head; dropping the head
    # keeps every parameter in the loss, which DDP requires. Transformers' load report is
    # silenced (it lists the dropped pooler) and missing weights are reported here instead.
    with _quiet_transformers():
        try:
            try:
                model, info = AutoModel.from_pretrained(path, config=config, add_pooling_layer=False,
                                                        output_loading_info=True, **_float32(), **no_code(path))
            except TypeError:  # architectures without a pooler head do not take the argument
                model, info = AutoModel.from_pretrained(path, config=config, output_loading_info=True, **_float32(),
                                                        **no_code(path))
        except Exception as e:  # noqa: BLE001 - whatever the checkpoint's files make transformers raise
            raise InputError(str(name_or_path), f"cannot load the encoder: {load_error_text(e)}")
    missing = [k for k in info.get("missing_keys", []) if "pooler" not in k]
    if missing:
        log.warning("%s: %d weights not in the checkpoint were randomly initialised: %s",
                    name_or_path, len(missing), ", ".join(sorted(missing)[:10]))
    return model


#: Hugging Face's DPR encoder classes, by the ``architectures`` entry of their config, and the
#: attribute that holds the DPREncoder (whose ``bert_model`` is the BERT).
DPR_ENCODERS = {"DPRQuestionEncoder": "question_encoder", "DPRContextEncoder": "ctx_encoder"}


def _bert_config_of(config):
    """The :class:`~transformers.BertConfig` of a DPR encoder's config (a DPRConfig is a BERT
    config plus ``projection_dim``)."""
    from transformers import BertConfig

    values = {k: v for k, v in config.to_dict().items()
              if k not in ("model_type", "architectures", "projection_dim", "transformers_version", "_name_or_path")}
    return BertConfig(**values)


def _load_dpr_encoder(path: str, config, name: str):
    """The BERT inside a Hugging Face DPR encoder checkpoint (``DPRQuestionEncoder`` or
    ``DPRContextEncoder``, by its ``architectures``), as a plain :class:`~transformers.BertModel`
    without a pooler head: DPR's ``pooler_output`` is ``last_hidden_state[:, 0]`` of that BERT
    when ``projection_dim`` is 0, which is CLS pooling here. ``AutoModel`` would build a
    DPRQuestionEncoder whatever the checkpoint (a context encoder's weights then left unused),
    so the class is chosen here."""
    import transformers
    from transformers import BertModel

    archs = list(getattr(config, "architectures", None) or [])
    found = [a for a in archs if a in DPR_ENCODERS]
    if len(found) != 1:
        raise InputError(name, f"a DPR checkpoint (model_type dpr) whose architectures {archs} name neither "
                               "DPRQuestionEncoder nor DPRContextEncoder (a DPRReader is not an encoder)")
    if int(getattr(config, "projection_dim", 0) or 0) > 0:
        raise InputError(name, f"a DPR encoder with projection_dim {config.projection_dim}: its pooler_output is a "
                               "linear projection of [CLS], which a bi-encoder here does not have (only "
                               "projection_dim 0, as DPR's published encoders, is supported)")
    cls = getattr(transformers, found[0])
    with _quiet_transformers():
        try:
            dpr, info = cls.from_pretrained(path, config=config, output_loading_info=True, **_float32(),
                                            **no_code(path))
        except Exception as e:  # noqa: BLE001 - whatever the checkpoint's files make transformers raise
            raise InputError(name, f"cannot load the {found[0]}: {load_error_text(e)}")
        bert = getattr(dpr, DPR_ENCODERS[found[0]]).bert_model
        model = BertModel(_bert_config_of(config), add_pooling_layer=False)
        model.load_state_dict(bert.state_dict())
    missing = list(info.get("missing_keys", []))
    if missing:
        log.warning("%s: %d weights not in the %s checkpoint were randomly initialised: %s", name, len(missing),
                    found[0], ", ".join(sorted(missing)[:10]))
    return model


#: A tokenizer with fewer tokens than this share of config.json's ``vocab_size`` is not the
#: model's: most rows of the word embeddings would never be used (a folder whose vocabulary
#: transformers did not find gives a tokenizer of the special tokens only).
MIN_VOCAB_SHARE = 0.5


def load_tokenizer(name_or_path: str):
    """The tokenizer of a checkpoint (:func:`local_checkpoint`), never its own code, padding on
    the right (as every pooling here reads rows); for a local
    folder, one with far fewer tokens than its config.json's ``vocab_size``
    (:data:`MIN_VOCAB_SHARE`) is an :class:`InputError`."""
    from transformers import AutoTokenizer

    path = local_checkpoint(name_or_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 - whatever the tokenizer's files make transformers raise
        raise InputError(str(name_or_path), f"cannot load the tokenizer: {load_error_text(e)}")
    # every pooling here reads a row from its start (CLS at position 0, sentence markers at the
    # positions tokenization gave them): a tokenizer saved to pad on the left (decoder models') pads on the right
    tokenizer.padding_side = "right"
    vocab_size = config_vocab_size(path)
    if vocab_size and len(tokenizer) < MIN_VOCAB_SHARE * vocab_size:
        raise InputError(str(name_or_path), f"its tokenizer has {len(tokenizer)} tokens but its config.json's "
                                            f"vocab_size is {vocab_size}: the folder's tokenizer files are not this "
                                            "model's (a vocabulary missing, or another model's); give the tokenizer "
                                            "saved with these weights")
    return tokenizer


#: Text tokenized with both tokenizers of a pair, to catch a different normalization (case,
#: accents) beside an equal vocabulary.
_TOKENIZER_PROBE = ("Who wrote \"Les Misérables\"? Victor Hugo, in 1862 (ÉTÉ naïve café).",
                    "hello world [SEP] 12345 e-mail: x@y.org")


def check_same_tokenizer(question_tokenizer, passage_tokenizer, question_init: str, passage_init: str) -> None:
    """The passage init's tokenizer must be the question init's (same vocabulary, same ids for
    the same text): the bi-encoder has one tokenizer, the question init's. DPR's question and
    context tokenizers are both BERT's, so they pass."""
    qv, pv = question_tokenizer.get_vocab(), passage_tokenizer.get_vocab()
    if qv != pv:
        only_q, only_p = sorted(set(qv) - set(pv)), sorted(set(pv) - set(qv))
        moved = sum(1 for t in set(qv) & set(pv) if qv[t] != pv[t])
        raise InputError("init", f"the passage init {passage_init!r} has another vocabulary than the question init "
                                 f"{question_init!r} ({len(pv)} vs {len(qv)} tokens; {len(only_q)} only in the "
                                 f"question's, e.g. {only_q[:3]}; {len(only_p)} only in the passage's, e.g. "
                                 f"{only_p[:3]}; {moved} with other ids): the bi-encoder uses the question "
                                 "init's tokenizer for both, so the pair must share one")
    for text in _TOKENIZER_PROBE:
        a, b = question_tokenizer(text)["input_ids"], passage_tokenizer(text)["input_ids"]
        if a != b:
            raise InputError("init", f"the passage init {passage_init!r} has the question init's vocabulary but "
                                     f"tokenizes {text!r} otherwise ({passage_tokenizer.convert_ids_to_tokens(b)} vs "
                                     f"{question_tokenizer.convert_ids_to_tokens(a)}: another lower-casing or "
                                     "accent stripping); the pair must share one tokenizer")


def check_vocab_fits(tokenizer, model: torch.nn.Module, where: str) -> None:
    """Every token id of ``tokenizer`` has a row in ``model``'s word embeddings: a tokenizer with
    more tokens than the weights have rows (tokens added and the embeddings not resized, or
    another model's tokenizer) loads without complaint and fails with an index out of range at
    the first text that holds such a token. ``where`` names the encoder's folder."""
    rows = int(model.get_input_embeddings().num_embeddings)
    tokens = len(tokenizer)
    if tokens > rows:
        raise InputError(where, f"its tokenizer has {tokens} tokens but its word embeddings have {rows} rows, so "
                                f"token ids {rows}-{tokens - 1} have none (an index out of range when a text holds "
                                "one): the tokenizer and the weights do not belong together; give the tokenizer "
                                "saved with these weights, or resize the embeddings "
                                "(model.resize_token_embeddings(len(tokenizer))) and save both")


def build_biencoder(init: str | Mapping[str, str], pooling: str = TRAIN["pooling"].default,
                    dropout: float | None = None, normalize: bool | None = None, scale: float | None = None,
                    attention_dropout: float | None = None, token_types: str = TRAIN["token_types"].default):
    """``(tokenizer, BiEncoder)`` with both encoders initialised from checkpoint ``init``
    (DPR: two separate copies of the same pretrained BERT), with the pooling and similarity
    of :func:`dcsr.models.similarity.family_similarity` and the given ``token_types``.

    ``init`` may instead be ``{"question": CKPT, "passage": CKPT}``: the question encoder
    starts from the one, the passage encoder from the other (DPR's published
    ``DPRQuestionEncoder`` / ``DPRContextEncoder`` pair). The tokenizer is the question init's,
    and the passage init's must be the same (:func:`check_same_tokenizer`); both must have one
    pooling and similarity (:func:`pair_similarity`) and one vector size."""
    question_init, passage_init = init_pair(init)
    sim = pair_similarity(question_init, passage_init, pooling, normalize, scale)
    log.info("similarity of %s: %s pooling, %s (%s)", init, sim["pooling"],
             f"{sim['scale']:g} x cosine" if sim["normalize"] else
             ("dot product" if sim["scale"] == 1 else f"{sim['scale']:g} x dot product"), sim["source"])
    tokenizer = load_tokenizer(question_init)
    if passage_init != question_init:
        check_same_tokenizer(tokenizer, load_tokenizer(passage_init), question_init, passage_init)
    question_model = load_encoder(question_init, dropout, attention_dropout)
    passage_model = load_encoder(passage_init, dropout, attention_dropout)
    for name, encoder in ((question_init, question_model), (passage_init, passage_model)):
        check_vocab_fits(tokenizer, encoder, str(name))  # the question init's tokenizer serves both
    sizes = [int(m.config.hidden_size) for m in (question_model, passage_model)]
    if sizes[0] != sizes[1]:
        raise InputError("init", f"the question init {question_init!r} gives {sizes[0]}-dimensional vectors and the "
                                 f"passage init {passage_init!r} {sizes[1]}-dimensional ones; a dot product needs one size")
    return tokenizer, BiEncoder(question_model, passage_model, sim["pooling"], sim["normalize"], sim["scale"],
                                sim["source"], token_types)


def tie_encoders(model: BiEncoder, init: str | Mapping[str, str]) -> None:
    """Make ``model`` one encoder for questions and passages (``tie_encoders``): the passage
    encoder becomes the question encoder, one set of weights that both sides train. Saved, it
    is written twice, so it loads and runs as any bi-encoder."""
    question_init, passage_init = init_pair(init)
    if question_init != passage_init:
        raise InputError("tie_encoders", f"one encoder cannot start from two checkpoints ({question_init!r} for "
                                         f"questions, {passage_init!r} for passages)")
    model.passage_model = model.question_model


def write_biencoder(model: BiEncoder, tokenizer, out_dir: str | os.PathLike, meta: Mapping[str, Any]) -> None:
    """Write the bi-encoder layout into ``out_dir`` (not atomic; see :func:`save_biencoder`)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = getattr(model, "module", model)  # unwrap DistributedDataParallel
    with _quiet_transformers():
        for sub, encoder in ((QUESTION_DIR, model.question_model), (PASSAGE_DIR, model.passage_model)):
            encoder.save_pretrained(out_dir / sub)
            tokenizer.save_pretrained(out_dir / sub)
    full = {"format_version": FORMAT_VERSION, **model.similarity, "token_types": model.token_types, **dict(meta)}
    if model.similarity_source:
        full.setdefault("similarity_source", model.similarity_source)
    full["weights_sha256"] = weight_digests(out_dir)
    full["files_sha256"] = config_digests(out_dir)
    with open(out_dir / META_FILE, "w", encoding="utf-8") as fh:
        json.dump(full, fh, indent=1, sort_keys=True)
        fh.write("\n")


def weight_digests(model_dir: str | os.PathLike) -> dict[str, str]:
    """``{path: sha256}`` of the weight files of a saved bi-encoder, paths relative to it: what its
    ``dcsr.json`` records as ``weights_sha256`` and :func:`load_biencoder` checks."""
    model_dir = Path(model_dir)
    return file_digests(model_dir, [f"{sub}/{f.name}" for sub in (QUESTION_DIR, PASSAGE_DIR)
                                    for f in (model_dir / sub).iterdir() if f.suffix in WEIGHT_SUFFIXES])


def config_digests(model_dir: str | os.PathLike) -> dict[str, str]:
    """``{path: sha256}`` of the files of a saved bi-encoder's encoders other than the weights
    (``config.json``, the tokenizer's files): what its ``dcsr.json`` records as ``files_sha256``
    and :func:`load_biencoder` checks (a changed ``config.json`` or vocabulary loads without
    complaint and encodes otherwise)."""
    model_dir = Path(model_dir)
    return file_digests(model_dir, [f"{sub}/{f.name}" for sub in (QUESTION_DIR, PASSAGE_DIR)
                                    for f in (model_dir / sub).iterdir()
                                    if f.is_file() and f.suffix not in WEIGHT_SUFFIXES and not f.name.startswith(".")])


def save_biencoder(model: BiEncoder, tokenizer, out_dir: str | os.PathLike, meta: Mapping[str, Any]) -> None:
    """Atomically write ``out_dir/{question_encoder,passage_encoder}/`` and ``out_dir/dcsr.json``.

    ``meta`` should name ``method``, ``base_checkpoint``, ``step``, ``question_max_length``
    and ``passage_max_length``; ``pooling`` is taken from the model. Everything is written
    to a temporary directory beside ``out_dir`` and renamed, so ``out_dir`` is complete or
    absent.
    """
    with atomic_path(out_dir) as tmp:
        write_biencoder(model, tokenizer, tmp, meta)


def load_biencoder(path: str | os.PathLike, device: str = "cpu", dropout: float | None = None,
                   attention_dropout: float | None = None):
    """``(tokenizer, BiEncoder, meta)`` from a directory written by :func:`save_biencoder`.

    The model is on ``device`` in eval mode; the tokenizer is the question encoder's (both
    directories hold the same one). Weight files whose digest (``weights_sha256`` of
    ``dcsr.json``), or config and tokenizer files whose digest (``files_sha256``) does not
    match are an :class:`InputError`; a model saved before either was recorded loads with a
    warning.
    """
    path = Path(path)
    meta = read_meta(path)
    for sub in (QUESTION_DIR, PASSAGE_DIR):
        if not (path / sub).is_dir():
            raise InputError(str(path), f"saved bi-encoder has no {sub}/")
    fix = f"delete the model {path} and train it again"
    for key in ("weights_sha256", "files_sha256"):  # read_meta checked their shape
        check_file_digests(path, meta.get(key) or {}, fix, f"{path / META_FILE}: {key}")
    unchecked = [what for key, what in (("weights_sha256", "its weight files"),
                                        ("files_sha256", "its config and tokenizer files")) if not meta.get(key)]
    if unchecked:  # saved before digests were recorded: as a file without a checksum trailer
        warn_unverified(path / META_FILE, fix, " and ".join(unchecked) + " are")
    tokenizer = load_tokenizer(str(path / QUESTION_DIR))
    encoders = [load_encoder(str(path / sub), dropout, attention_dropout) for sub in (QUESTION_DIR, PASSAGE_DIR)]
    for sub, encoder in zip((QUESTION_DIR, PASSAGE_DIR), encoders):
        check_vocab_fits(tokenizer, encoder, str(path / sub))
    # the format before "pooling" was written had CLS only; before "normalize", the dot product;
    # before "token_types", the tokenizer's
    try:
        model = BiEncoder(*encoders, meta.get("pooling", "cls"), meta.get("normalize", False), meta.get("scale", 1.0),
                          meta.get("similarity_source"), meta.get("token_types", "pair"))
    except InputError as e:
        raise InputError(str(path / META_FILE), f"{e.where}: {e.problem}") from None
    model.to(device)
    model.eval()
    return tokenizer, model, meta
