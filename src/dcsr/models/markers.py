"""DCSR's contextual sentence vectors (Wu et al. 2022, Section 3.2): the ``<sent>`` marker,
passages encoded whole with a marker before every sentence, and questions encoded at a marker.

Following the authors' code (``chengzhipanpan/DCSR``, a fork of DPR), a passage is encoded
whole and yields one vector per marker::

    [CLS] title [SEP] <sent> s1 <sent> s2 ... [SEP]

As DCSR's code (DPR's ``_add_special_tokens`` with ``special_tokens: [<sent>]``), ``<sent>``
reuses the ``[unused0]`` vocabulary entry, so the embedding matrix keeps its size. A question
is ``[CLS] <sent> question [SEP]`` and its vector is the state at the marker (position 1), as
DCSR's ``representation_token_pos=1``. The batch carries ``pool_positions`` (flat indices
``b * L + t``) and :meth:`dcsr.models.biencoder.BiEncoder.pool` gathers those states, so the
DPR model and training loop are unchanged. With ``pooling: mean`` a sentence vector is instead
the mean of the states from its marker to the next marker (``pool_ends``), and a question's the
mean from its marker to its ``[SEP]``: a configurable alternative for encoders pretrained with
mean pooling (the official code has only the marker state, ``pooling: cls``).

The training samples are :mod:`dcsr.training.sentence_samples`; the score normalization at
retrieval time (HasAns) is :mod:`dcsr.retrieval.hasans`.
"""

from __future__ import annotations

from typing import Sequence

import torch

from dcsr.settings import DCSR_TRAIN

SENT_TOKEN = "<sent>"
#: The vocabulary entry DCSR's code re-labels as ``<sent>`` (DPR's special-token hack).
UNUSED_TOKEN = "[unused0]"
DEFAULT_MAX_SENTENCES = DCSR_TRAIN["max_sentences"].default  # DCSR's code: ``assert sent_num == 10`` markers per passage
DEFAULT_MAX_LENGTH = 256  # DPR's / DCSR's sequence_length

Span = tuple[int, int]


# ---------------------------------------------------------------------- the <sent> marker


def _embedding_rows(model) -> int:
    return int(model.get_input_embeddings().weight.shape[0])


def ensure_sentence_marker(tokenizer, model=None) -> int:
    """The token id of ``<sent>``; adds the token when the vocabulary cannot provide it.

    - a tokenizer that already knows ``<sent>`` (added earlier, saved with the model): its id;
    - a BERT vocabulary with ``[unused0]``: that id, as DCSR's code (no new embedding row);
    - otherwise ``<sent>`` is added as a special token (the vocabulary grows by one) and the
      embeddings of ``model`` must grow with it: pass ``model`` (a Hugging Face encoder or a
      :class:`~dcsr.models.biencoder.BiEncoder`, both of whose encoders are resized) and its input
      embeddings are resized to ``len(tokenizer)``. Without ``model`` the caller must resize.

    Idempotent: a model whose embeddings already cover the id is left as it is.
    """
    vocab = tokenizer.get_vocab()
    if SENT_TOKEN in vocab:
        marker = int(vocab[SENT_TOKEN])
    elif UNUSED_TOKEN in vocab:
        return int(vocab[UNUSED_TOKEN])  # DCSR: <sent> is [unused0]; nothing to resize
    else:
        tokenizer.add_special_tokens({"additional_special_tokens": [SENT_TOKEN]})
        marker = int(tokenizer.convert_tokens_to_ids(SENT_TOKEN))
    if model is not None:
        encoders = [model.question_model, model.passage_model] if hasattr(model, "passage_model") else [model]
        for encoder in encoders:
            if _embedding_rows(encoder) <= marker:
                encoder.resize_token_embeddings(len(tokenizer))
    return marker


def _marker(tokenizer, marker_id: int | None) -> int:
    if marker_id is not None:
        return int(marker_id)
    vocab = tokenizer.get_vocab()
    for token in (SENT_TOKEN, UNUSED_TOKEN):
        if token in vocab:
            return int(vocab[token])
    raise ValueError("the tokenizer has neither <sent> nor [unused0]; call ensure_sentence_marker(tokenizer, model)")


# ---------------------------------------------------------------------- passages


def encode_passage_with_markers(tokenizer, title: str | None, text: str, spans: Sequence[Span],
                                max_length: int = DEFAULT_MAX_LENGTH,
                                max_sentences: int = DEFAULT_MAX_SENTENCES,
                                marker_id: int | None = None) -> tuple[list[int], list[int], list[int], list[int]]:
    """Token ids of ``[CLS] title [SEP] <sent> s1 <sent> s2 ... [SEP]`` (no title: ``[CLS] <sent> s1 ... [SEP]``).

    ``spans`` are the sentences as ``(start, end)`` character offsets into ``text`` (the
    sentence table's format); each sentence is tokenized on its own (WordPiece splits at
    whitespace, so this equals the tokens of the whole text). Token types are 0 for
    ``[CLS] title [SEP]`` and 1 for the text segment, as DPR's title/text pair encoding.

    Caps, in order: at most ``max_sentences`` markers, and ``max_length`` tokens in all.
    A sentence counts (gets a marker) only if its marker *and at least one of its tokens* fit
    before the final ``[SEP]``; its tail may be cut, but no marker ever stands on an empty
    sentence. Later sentences are dropped, from the input too (DCSR's code keeps the text after
    its 10th marker in the input, unpooled, as context: a passage of more than ``max_sentences``
    sentences, rare at 100 words of 8-word sentences, sees less context here; none of the
    vendored SQuAD text's passages has more than 9). A sentence with no tokens at all (e.g. only
    characters the tokenizer drops) gets no marker. A title is cut so that one marked token
    of text always fits.

    Returns ``(input_ids, token_type_ids, marker_positions, kept_sentence_indices)``: lists of
    length ``T <= max_length``, ``T``, ``S`` and ``S`` (``S <= max_sentences``); the i-th marker
    at ``marker_positions[i]`` belongs to ``spans[kept_sentence_indices[i]]``.
    """
    return encode_passages_with_markers(tokenizer, [title], [text], [spans], max_length, max_sentences, marker_id)[0]


def encode_passages_with_markers(tokenizer, titles: Sequence[str | None], texts: Sequence[str],
                                 spans_list: Sequence[Sequence[Span]], max_length: int = DEFAULT_MAX_LENGTH,
                                 max_sentences: int = DEFAULT_MAX_SENTENCES,
                                 marker_id: int | None = None) -> list[tuple[list[int], list[int], list[int], list[int]]]:
    """:func:`encode_passage_with_markers` of each passage, with two tokenizer calls in all (the
    titles, then every sentence of every passage) instead of two per passage: a corpus shard's
    passages are tokenized in batches, as the fast tokenizer is made to be."""
    if not len(titles) == len(texts) == len(spans_list):
        raise ValueError(f"{len(titles)} titles, {len(texts)} texts and {len(spans_list)} span lists")
    marker = _marker(tokenizer, marker_id)
    if max_length < 4:  # [CLS] <sent> token [SEP]
        raise ValueError(f"max_length must be at least 4, got {max_length}")
    titled = [i for i, title in enumerate(titles) if title]
    title_ids = dict(zip(titled, token_ids(tokenizer, [titles[i] for i in titled])) if titled else [])
    sentences = [text[s:e] for text, spans in zip(texts, spans_list) for s, e in spans]
    pieces = token_ids(tokenizer, sentences) if sentences else []
    out, at = [], 0
    special = (tokenizer.cls_token_id, tokenizer.sep_token_id, marker)
    for row, spans in enumerate(spans_list):
        out.append(_assemble(special, title_ids.get(row), pieces[at:at + len(spans)], max_length, max_sentences))
        at += len(spans)
    return out


def token_ids(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``, read from a fast tokenizer's
    backend directly: transformers' conversion of each encoding to Python lists and dicts took a
    third of DCSR's marking time, whose passages are ~5 sentences each (benchmarks/gpu/gpu.md).
    As transformers does for a call without truncation or padding, the backend's own (a
    tokenizer.json may set them) are turned off first; a slow tokenizer takes the plain call."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]


def kept_text(tokenizer, sentence: str, tokens: int) -> str:
    """The part of ``sentence`` that its first ``tokens`` tokens cover (all of it when it has no
    more): what the encoder sees of a sentence whose tail :func:`encode_passage_with_markers`
    cut at ``max_length``. A fast tokenizer gives the characters up to that token's end (its
    offsets); a slow one the tokens' text back (``convert_tokens_to_string``)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        if backend.truncation is not None:
            backend.no_truncation()
        offsets = backend.encode(sentence, add_special_tokens=False).offsets
        return sentence if len(offsets) <= tokens else sentence[: offsets[tokens - 1][1]] if tokens > 0 else ""
    pieces = tokenizer.tokenize(sentence)
    return sentence if len(pieces) <= tokens else tokenizer.convert_tokens_to_string(pieces[:max(tokens, 0)])


def _assemble(special: tuple[int, int, int], title_ids: list[int] | None, pieces: Sequence[list[int]],
              max_length: int, max_sentences: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """One passage's ids, types, marker positions and kept sentences from its title's tokens
    (``None``: no title) and its sentences' (the caps of :func:`encode_passage_with_markers`);
    ``special``: the ids of [CLS], [SEP] and the marker."""
    cls, sep, marker = special
    ids, types = [cls], [0]
    if title_ids is not None:
        title_ids = title_ids[: max(0, max_length - 5)]
        ids += title_ids + [sep]
        types += [0] * (len(title_ids) + 1)
    text_type = 1 if title_ids is not None else 0
    positions, kept = [], []
    for index, piece in enumerate(pieces):
        if len(kept) >= max_sentences:
            break
        if not piece:
            continue
        room = max_length - 1 - len(ids)  # keep one slot for the final [SEP]
        if room < 2:  # a marker needs at least one token of its sentence after it
            break
        piece = piece[: room - 1]
        positions.append(len(ids))
        kept.append(index)
        ids += [marker] + piece
        types += [text_type] * (1 + len(piece))
    ids.append(sep)
    types.append(text_type)
    return ids, types, positions, kept


def _pad(rows: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    longest = max((len(r) for r in rows), default=0)
    out = torch.full((len(rows), longest), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(list(r), dtype=torch.long)
    return out


def collate_encoded_passages(encoded: Sequence[tuple[list[int], list[int], list[int], list[int]]],
                             select: Sequence[Sequence[int]] | None, pad_token_id: int) -> dict:
    """Pad passages from :func:`encode_passage_with_markers` and point ``pool_positions`` at
    the markers of the selected sentences (see :func:`tokenize_sentence_passages`)."""
    input_ids = _pad([e[0] for e in encoded], pad_token_id)  # [B, L]
    token_type_ids = _pad([e[1] for e in encoded], 0)
    attention_mask = _pad([[1] * len(e[0]) for e in encoded], 0)
    length = input_ids.shape[1]
    flat, ends, owner, index = [], [], [], []
    for row, (ids, _types, positions, kept) in enumerate(encoded):
        where = dict(zip(kept, positions))
        # a sentence runs from its marker to the next marker, the last one to the final [SEP]
        until = dict(zip(kept, list(positions[1:]) + [len(ids) - 1]))
        wanted = kept if select is None else select[row]
        for sentence in wanted:
            if sentence not in where:
                raise ValueError(f"passage row {row}: sentence {sentence} has no marker (kept: {kept})")
            flat.append(row * length + where[sentence])
            ends.append(row * length + until[sentence])
            owner.append(row)
            index.append(sentence)
    as_long = lambda v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids,
            "pool_positions": as_long(flat), "pool_ends": as_long(ends),
            "sentence_owner": as_long(owner), "sentence_index": as_long(index)}


def tokenize_sentence_passages(tokenizer, titles: Sequence[str] | None, texts: Sequence[str],
                               spans_list: Sequence[Sequence[Span]], max_length: int = DEFAULT_MAX_LENGTH,
                               max_sentences: int = DEFAULT_MAX_SENTENCES, marker_id: int | None = None,
                               select: Sequence[Sequence[int]] | None = None) -> dict:
    """A passage batch with one pooled vector per ``<sent>`` marker.

    Returns padded ``input_ids`` / ``attention_mask`` / ``token_type_ids`` ``[B, L]`` and, for
    the ``N`` pooled sentences, ``pool_positions`` ``[N]`` (flat ``b * L + t``, what
    :meth:`BiEncoder.pool` gathers), ``pool_ends`` ``[N]`` (the flat index of the next marker,
    or of the final ``[SEP]``: the sentence's end for mean pooling), ``sentence_owner`` ``[N]`` (the passage row ``b``) and
    ``sentence_index`` ``[N]`` (the sentence's index in that passage's ``spans``). Vectors are
    ordered by passage row, then by sentence (or by the order of ``select[b]``, the sentences
    to pool from passage ``b``; default: every sentence that got a marker). Indexing
    (one vector per sentence) uses the default; training selects the sampled sentences.
    """
    texts = list(texts)
    titles = list(titles) if titles is not None else [""] * len(texts)
    encoded = encode_passages_with_markers(tokenizer, titles, texts, spans_list, max_length, max_sentences, marker_id)
    return collate_encoded_passages(encoded, select, tokenizer.pad_token_id)


def tokenize_marked_questions(tokenizer, questions: Sequence[str], max_length: int = DEFAULT_MAX_LENGTH,
                              marker_id: int | None = None) -> dict:
    """``[CLS] <sent> question [SEP]`` truncated to ``max_length``: padded ``input_ids`` /
    ``attention_mask`` / ``token_type_ids`` ``[B, L]``, ``pool_positions`` ``[B]`` = ``b * L + 1``
    (DCSR's ``representation_token_pos=1``: the question vector is the marker's state) and
    ``pool_ends`` ``[B]`` = ``b * L + len(row)`` (mean pooling: marker to ``[SEP]``)."""
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3, got {max_length}")
    marker = _marker(tokenizer, marker_id)
    pieces = tokenizer(list(questions), add_special_tokens=False)["input_ids"] if len(questions) else []
    rows = [[tokenizer.cls_token_id, marker] + p[: max_length - 3] + [tokenizer.sep_token_id] for p in pieces]
    input_ids = _pad(rows, tokenizer.pad_token_id)
    length = input_ids.shape[1]
    starts = torch.arange(len(rows), dtype=torch.long) * length
    return {"input_ids": input_ids, "attention_mask": _pad([[1] * len(r) for r in rows], 0),
            "token_type_ids": torch.zeros_like(input_ids),
            "pool_positions": starts + 1,
            "pool_ends": starts + torch.tensor([len(r) for r in rows], dtype=torch.long)}
