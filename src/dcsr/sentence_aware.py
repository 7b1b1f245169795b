"""DCSR's core: contextual sentence vectors, sentence-aware samples, HasAns score normalization.

Wu et al. (2022), "Sentence-aware Contrastive Learning for Open-Domain Passage Retrieval",
Sections 3.2 and 3.3, following the authors' code (``chengzhipanpan/DCSR``, a fork of DPR).

Encoding (Section 3.2). A passage is encoded whole, with a ``<sent>`` marker before every
sentence, and yields one vector per marker::

    [CLS] title [SEP] <sent> s1 <sent> s2 ... [SEP]

As DCSR's code (DPR's ``_add_special_tokens`` with ``special_tokens: [<sent>]``), ``<sent>``
reuses the ``[unused0]`` vocabulary entry, so the embedding matrix keeps its size. A question
is ``[CLS] <sent> question [SEP]`` and its vector is the state at the marker (position 1), as
DCSR's ``representation_token_pos=1``. The batch carries ``pool_positions`` (flat indices
``b * L + t``) and :meth:`dcsr.model.BiEncoder.pool` gathers those states, so the DPR model
and training loop are unchanged. With ``pooling: mean`` a sentence vector is instead the mean
of the states from its marker to the next marker (``pool_ends``), and a question's the mean
from its marker to its ``[SEP]``: a configurable alternative for encoders pretrained with
mean pooling (the official code has only the marker state, ``pooling: cls``).

Samples (Section 3.2.1/3.2.2, Table 4): per question one positive sentence (a random sentence
of the gold passage that contains an answer) and 1-2 negative sentences, see
:class:`SentenceSampleBuilder`. Every other sentence vector of the (global) batch is an
in-batch negative.

Retrieval (Section 3.3): the top ``100 * k`` sentences are softmax-normalised and each passage
is scored ``HasAns(P) = 1 - prod_{s in P} (1 - p_s)`` (:func:`hasans_topk`).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Mapping, Sequence

import torch

from .answers import has_answer
from .errors import InputError
from .settings import DCSR_INTERNAL, DCSR_TRAIN, check_value, defaults
from .train import Batch, Sample, SampleBuilder

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
      :class:`~dcsr.model.BiEncoder`, both of whose encoders are resized) and its input
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
    sentence. Later sentences are dropped. A sentence with no tokens at all (e.g. only
    characters the tokenizer drops) gets no marker. A title is cut so that one marked token
    of text always fits.

    Returns ``(input_ids, token_type_ids, marker_positions, kept_sentence_indices)``: lists of
    length ``T <= max_length``, ``T``, ``S`` and ``S`` (``S <= max_sentences``); the i-th marker
    at ``marker_positions[i]`` belongs to ``spans[kept_sentence_indices[i]]``.
    """
    marker = _marker(tokenizer, marker_id)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    if max_length < 4:  # [CLS] <sent> token [SEP]
        raise ValueError(f"max_length must be at least 4, got {max_length}")
    ids, types = [cls], [0]
    if title:
        title_ids = tokenizer(title, add_special_tokens=False)["input_ids"][: max(0, max_length - 5)]
        ids += title_ids + [sep]
        types += [0] * (len(title_ids) + 1)
    text_type = 1 if title else 0
    sentences = [text[s:e] for s, e in spans]
    pieces = tokenizer(sentences, add_special_tokens=False)["input_ids"] if sentences else []
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
    if not len(titles) == len(texts) == len(spans_list):
        raise ValueError(f"{len(titles)} titles, {len(texts)} texts and {len(spans_list)} span lists")
    marker = _marker(tokenizer, marker_id)
    encoded = [encode_passage_with_markers(tokenizer, t, x, s, max_length, max_sentences, marker)
               for t, x, s in zip(titles, texts, spans_list)]
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


# ---------------------------------------------------------------------- training samples


def _lookup(spans: Mapping[Any, Sequence[Span]] | None, pid: Any):
    if spans is None or pid is None:
        return None
    for key in (pid, str(pid)):
        if key in spans:
            return spans[key]
    try:
        return spans.get(int(pid))
    except (TypeError, ValueError):
        return None


class SentenceSampleBuilder(SampleBuilder):
    """DCSR's sentence-aware samples (Section 3.2, Table 4) for :func:`dcsr.train.train`.

    Settings (besides DPR's): ``sampling``

    - ``"bm25_1"``: positive + 1 random sentence of a random BM25 (hard negative) passage;
    - ``"bm25_2"``: positive + 2 random sentences from 2 different BM25 passages (from one
      passage, 2 different sentences, when only one passage is usable);
    - ``"inpassage_bm25"`` (default, the paper's best): positive + 1 in-passage negative (a
      random sentence of the gold passage without an answer) + 1 BM25 random sentence; when
      the gold passage has no answer-free sentence, another BM25 sentence stands in
      (Section 3.2.2).

    The positive is a random sentence of the gold passage (``positive_ctxs[0]``, or a random
    one with ``shuffle_positives``) that contains an answer under DPR's matching
    (:func:`~dcsr.answers.has_answer` on the sentence text). Only sentences that get a marker
    inside the caps (``max_sentences``, ``passage_max_length``) can be sampled. BM25 passages
    are ``hard_negative_ctxs`` (DPR's fallback: ``negative_ctxs`` when there are none); if no
    negative sentence can be found a question simply has fewer negatives (counted). A negative
    context with a ``sentence`` field (mined by a DCSR checkpoint, :mod:`dcsr.mining`) gives
    that sentence instead of a random one, when it got a marker (else random, counted as
    ``mined_sentence_unusable``).

    Sentence spans come from ``spans`` (passage_id -> ``[(start, end), ...]``, the sentence
    table; int or str keys) and, for contexts without a passage id or not in the mapping, from
    :func:`dcsr.sentences.split_sentences`. Contexts whose spans do not fit their text are
    re-split (counted as ``resplit``).

    A :class:`~dcsr.train.Sample` here has ``passages`` = the distinct passages to encode
    (gold first) and ``extra["select"][j]`` = the sentences of passage j to pool, positive
    first; so a question contributes ``1 + negatives`` vectors and its target is the row of
    its positive among all sentence vectors of the batch. A question that cannot be trained
    (see :meth:`skip_reason`) yields a Sample with ``extra["skip"]`` set, which
    :meth:`collate` drops; :attr:`counts` counts reasons and fallbacks. Filter records up
    front with :meth:`filter_records`, since counts made in DataLoader workers stay there.

    The builder needs the tokenizer to know which sentences fit the caps: pass it, or bind
    it with :meth:`bind` to hand a class to ``train(builder_cls=...)``.
    """

    method = "dcsr"
    SETTINGS = {**DCSR_TRAIN, **DCSR_INTERNAL}
    bound_spans: Mapping[Any, Sequence[Span]] | None = None
    bound_tokenizer = None
    bound_sentence_table: str | None = None

    def __init__(self, settings: Mapping[str, Any], tokenizer=None,
                 spans: Mapping[Any, Sequence[Span]] | None = None):
        full = {**defaults(self.SETTINGS), **settings}
        for key, spec in self.SETTINGS.items():
            check_value(spec, full[key], f"settings.{key}")
        super().__init__(full)
        self.sampling = self.settings["sampling"]
        self.max_sentences = self.settings["max_sentences"]
        self.match_type = self.settings["match_type"]
        self.tokenizer = tokenizer if tokenizer is not None else self.bound_tokenizer
        self.spans = spans if spans is not None else self.bound_spans
        self.marker_id = ensure_sentence_marker(self.tokenizer) if self.tokenizer is not None else None
        self.counts: Counter = Counter()

    @classmethod
    def bind(cls, tokenizer=None, spans: Mapping[Any, Sequence[Span]] | None = None,
             sentence_table: str | None = None) -> type["SentenceSampleBuilder"]:
        """A subclass whose instances use ``tokenizer``, ``spans`` and/or the sentence table at
        ``sentence_table`` (read in :meth:`prepare_records`, for the records' passages only),
        for ``train(builder_cls=...)``, which constructs the builder from the settings alone."""
        return type(cls.__name__, (cls,), {"bound_tokenizer": tokenizer, "bound_spans": spans,
                                           "bound_sentence_table": None if sentence_table is None
                                           else str(sentence_table)})

    @classmethod
    def input_files(cls) -> dict[str, str]:
        return {} if cls.bound_sentence_table is None else {"sentence table": cls.bound_sentence_table}

    def setup(self, tokenizer, model) -> None:
        """Use ``tokenizer``; give ``<sent>`` an embedding row in ``model`` if it needs one."""
        self.tokenizer = tokenizer
        self.marker_id = ensure_sentence_marker(tokenizer, model)

    def prepare_records(self, records: list[dict], where: str, log=lambda msg: None) -> list[dict]:
        """Load the sentence spans of the records' passages (when a sentence table is bound),
        then drop and count the questions that cannot be trained (:meth:`filter_records`)."""
        if self.bound_sentence_table is not None:
            from .formats import sentence_spans

            wanted = set()
            for r in records:
                for key in ("positive_ctxs", "hard_negative_ctxs", "negative_ctxs"):
                    for ctx in r.get(key, []):
                        try:
                            wanted.add(int(ctx.get("passage_id")))
                        except (TypeError, ValueError):
                            pass
            found = sentence_spans(self.bound_sentence_table, wanted)
            self.spans = {**(self.spans or {}), **found}
            if len(found) < len(wanted):
                log(f"{where}: {len(wanted) - len(found)} of {len(wanted)} passages are not in "
                    f"{self.bound_sentence_table}; they are split on the fly")
        resplit = self.counts["resplit"]
        kept, reasons = self.filter_records(records)
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none"
        log(f"{where}: {len(kept)} of {len(records)} questions have an answer-bearing sentence inside the "
            f"caps ({self.max_sentences} sentences, {self.passage_max_length} tokens); skipped: {skipped}")
        if self.counts["resplit"] > resplit:
            log(f"{where}: {self.counts['resplit'] - resplit} passages did not match their sentence spans "
                "and were split again")
        return kept

    # -------------------------------------------------------------- per passage

    def passage_spans(self, ctx: Mapping[str, Any]) -> list[Span]:
        """Sentence spans of a context: the sentence table's, else split now."""
        text = ctx["text"]
        spans = _lookup(self.spans, ctx.get("passage_id"))
        if spans is not None:
            spans = [(int(s), int(e)) for s, e in spans]
            if all(0 <= s <= e <= len(text) for s, e in spans):
                return spans
            self.counts["resplit"] += 1  # the table was built from a different text
        from .sentences import split_sentences

        return split_sentences(text)

    def encode(self, ctx: Mapping[str, Any]):
        """``(encoded, spans)``: :func:`encode_passage_with_markers` of a context and its spans."""
        if self.tokenizer is None:
            raise ValueError("SentenceSampleBuilder needs a tokenizer (pass it, or use SentenceSampleBuilder.bind)")
        spans = self.passage_spans(ctx)
        enc = encode_passage_with_markers(self.tokenizer, ctx.get("title", ""), ctx["text"], spans,
                                          self.passage_max_length, self.max_sentences, self.marker_id)
        return enc, spans

    def _answer_split(self, record, ctx, enc, spans) -> tuple[list[int], list[int]]:
        """Kept sentences of ``ctx`` with and without an answer."""
        answers = record.get("answers", [])
        text = ctx["text"]
        with_answer, without = [], []
        for i in enc[3]:
            s, e = spans[i]
            (with_answer if has_answer(answers, text[s:e], self.match_type) else without).append(i)
        return with_answer, without

    def skip_reason(self, record: Mapping[str, Any], gold: Mapping[str, Any] | None = None) -> str | None:
        """Why ``record`` cannot be trained (None: it can): ``no_sentences`` (the gold passage
        has no sentence), ``no_answer_sentence`` (no sentence contains an answer),
        ``answer_beyond_cap`` (only sentences cut off by the caps do)."""
        gold = record["positive_ctxs"][0] if gold is None else gold
        enc, spans = self.encode(gold)
        return self._skip(record, gold, enc, spans)[0]

    def _skip(self, record, gold, enc, spans):
        if not spans:
            return "no_sentences", [], []
        with_answer, without = self._answer_split(record, gold, enc, spans)
        if with_answer:
            return None, with_answer, without
        answers = record.get("answers", [])
        text = gold["text"]
        if any(has_answer(answers, text[s:e], self.match_type) for s, e in spans):
            return "answer_beyond_cap", [], []
        return "no_answer_sentence", [], []

    def filter_records(self, records: Sequence[Mapping[str, Any]]) -> tuple[list, Counter]:
        """``(trainable records, Counter of skip reasons)``; deterministic (the reason does not
        depend on the sampling RNG), so filtering once before training is exact. With
        ``shuffle_positives`` a record is kept when any positive can serve."""
        kept, reasons = [], Counter()
        for record in records:
            golds = record["positive_ctxs"] if self.shuffle_positives else record["positive_ctxs"][:1]
            found = [self.skip_reason(record, g) for g in golds]
            if any(r is None for r in found):
                kept.append(record)
            else:
                reasons[found[0]] += 1
        return kept, reasons

    # -------------------------------------------------------------- sampling

    def sample(self, record: Mapping[str, Any], rng: random.Random, shuffle: bool = True,
               hard_negatives: int | None = None, other_negatives: int | None = None) -> Sample:
        """One DCSR sample. ``hard_negatives`` / ``other_negatives`` given explicitly (DPR's
        average-rank validation) draw one random sentence from each of that many BM25 /
        other negative passages instead of the ``sampling`` scheme's BM25 sentences."""
        positives = record["positive_ctxs"]
        gold = positives[rng.randrange(len(positives))] if shuffle and self.shuffle_positives else positives[0]
        gold_enc, gold_spans = self.encode(gold)
        reason, with_answer, without = self._skip(record, gold, gold_enc, gold_spans)
        if reason is not None:
            self.counts[f"skipped_{reason}"] += 1
            return Sample(record["question"], [], 0, {"skip": reason})

        hard = list(record.get("hard_negative_ctxs", []))
        others = list(record.get("negative_ctxs", []))
        if shuffle:
            rng.shuffle(hard)
            rng.shuffle(others)
        if not hard:  # DPR's hard_neg_fallback
            hard = others

        # passages to encode (gold first) and the sentences to pool from each
        passages: list[Mapping[str, Any]] = [gold]
        encoded = [gold_enc]
        select: list[list[int]] = [[rng.choice(with_answer)]]

        ctx_encoded: dict[int, Any] = {}  # negative key -> its encoding (each passage tokenized once)
        chosen: dict[int, list[int]] = {}  # negative key -> sentences drawn from it

        def candidates(key: int, ctx) -> list[int]:
            # the sentences of a negative passage that got a marker inside the caps
            if key not in ctx_encoded:
                ctx_encoded[key], _ = self.encode(ctx)
            return ctx_encoded[key][3]

        def draw(ctxs, offset: int, fresh_passage: bool) -> bool:
            """One random sentence from the first usable passage of ``ctxs`` (a not-yet-used
            passage if ``fresh_passage``, else any with a sentence left)."""
            for j, ctx in enumerate(ctxs):
                key = offset + j
                if fresh_passage and key in chosen:
                    continue
                left = [s for s in candidates(key, ctx) if s not in chosen.get(key, [])]
                if left:
                    given = mined_sentence(key, ctx, left)
                    chosen.setdefault(key, []).append(rng.choice(left) if given is None else given)
                    return True
            return False

        def mined_sentence(key: int, ctx, left: list[int]) -> int | None:
            # DCSR-hard (Section 4.5): a dense miner's context names the sentence it retrieved;
            # that sentence is the negative, once (a second draw from the passage is random)
            given = ctx.get("sentence")
            if not isinstance(given, int) or isinstance(given, bool) or given in chosen.get(key, []):
                return None
            if given in left:
                return given
            self.counts["mined_sentence_unusable"] += 1  # cut off by the caps, or spans differ
            return None

        explicit = hard_negatives is not None or other_negatives is not None
        negatives_wanted = 0
        if explicit:
            n_hard = self.hard_negatives if hard_negatives is None else hard_negatives
            n_other = self.other_negatives if other_negatives is None else other_negatives
            for j, ctx in enumerate(record.get("hard_negative_ctxs", [])[:n_hard]):
                negatives_wanted += 1
                draw([ctx], j, True)
            for j, ctx in enumerate(record.get("negative_ctxs", [])[:n_other]):
                negatives_wanted += 1
                draw([ctx], 100000 + j, True)
            if self.sampling == "inpassage_bm25" and without:
                negatives_wanted += 1
                select[0].append(rng.choice(without))
        elif self.sampling == "bm25_1":
            negatives_wanted = 1
            draw(hard, 0, True)
        elif self.sampling == "bm25_2":
            negatives_wanted = 2
            for _ in range(2):
                # two different passages when available, else another sentence of one already used
                if not draw(hard, 0, True):
                    draw(hard, 0, False)
        else:  # inpassage_bm25
            negatives_wanted = 2
            if without:
                select[0].append(rng.choice(without))
            else:
                self.counts["inpassage_fallback"] += 1
            draw(hard, 0, True)
            if not without:
                # Section 3.2.2: "substituted by another easy negative sentence from the
                # corresponding BM25 negative passage" - the same passage first, else the next one
                draw(hard, 0, False)

        for key in sorted(chosen):  # each negative passage once, with all its drawn sentences
            ctx = record.get("negative_ctxs", [])[key - 100000] if key >= 100000 else (
                record.get("hard_negative_ctxs", [])[key] if explicit else hard[key])
            passages.append(ctx)
            encoded.append(ctx_encoded[key])
            select.append(chosen[key])
        n_neg = sum(len(s) for s in select) - 1
        if n_neg < negatives_wanted:
            self.counts["missing_negatives"] += negatives_wanted - n_neg
        self.counts["samples"] += 1
        return Sample(record["question"], list(passages), 0, {"select": select, "encoded": encoded})

    # -------------------------------------------------------------- batching

    def collate(self, tokenizer, samples: Sequence[Sample]) -> Batch:
        """Tokenize samples into a :class:`~dcsr.train.Batch` of sentence vectors.

        ``q``: marked questions ``[B, Lq]`` with ``pool_positions`` ``[B]``; ``p``: the samples'
        passages ``[P, Lp]`` with ``pool_positions`` / ``sentence_owner`` / ``sentence_index``
        ``[N]``, ``N = sum_i (1 + negatives_i)``; ``positive_index`` ``[B]``: the row of question
        i's positive among the ``N`` vectors (its first selected sentence). Skipped samples
        are dropped, so ``B`` may be smaller than ``len(samples)``.
        """
        marker = self.marker_id if self.marker_id is not None else ensure_sentence_marker(tokenizer)
        kept = [s for s in samples if not s.extra.get("skip")]
        questions, encoded, select, positive_index = [], [], [], []
        vectors = 0
        for s in kept:
            questions.append(s.question)
            positive_index.append(vectors)  # the positive is the first pooled vector of the sample
            for ctx, enc, chosen in zip(s.passages, s.extra.get("encoded") or [None] * len(s.passages),
                                        s.extra["select"]):
                if enc is None:
                    spans = self.passage_spans(ctx)
                    enc = encode_passage_with_markers(tokenizer, ctx.get("title", ""), ctx["text"], spans,
                                                      self.passage_max_length, self.max_sentences, marker)
                encoded.append(enc)
                select.append(list(chosen))
                vectors += len(chosen)
        q = tokenize_marked_questions(tokenizer, questions, self.question_max_length, marker)
        p = collate_encoded_passages(encoded, select, tokenizer.pad_token_id)
        return Batch(q, p, torch.tensor(positive_index, dtype=torch.long), len(kept))


# Score normalization at retrieval time lives in the torch-free dcsr.hasans.
from .hasans import (hasans_scores, hasans_topk, merge_sentence_hits, sentence_search_depth,  # noqa: E402,F401
                     sentences_to_retrieve)
