"""DCSR's sentence-aware training samples (Wu et al. 2022, Sections 3.2.1/3.2.2, Table 4): per
question one positive sentence (a random sentence of the gold passage that contains an answer)
and 1-2 negative sentences, see :class:`SentenceSampleBuilder`. Every other sentence vector of
the (global) batch is an in-batch negative. Encoding with ``<sent>`` markers is
:mod:`dcsr.models.markers`.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, Mapping, Sequence

import torch

from dcsr.data.answers import has_answer
from dcsr.errors import InputError
from dcsr.models.markers import (Span, collate_encoded_passages, encode_passage_with_markers, ensure_sentence_marker,
                                 kept_text, tokenize_marked_questions)
from dcsr.settings import DCSR_INTERNAL, DCSR_TRAIN, check_value, defaults
from dcsr.training.samples import Batch, Sample, SampleBuilder


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


def not_adjacent(with_answer: Sequence[int], without: Sequence[int]) -> list[int]:
    """The sentences of ``without`` that are no neighbour of a sentence of ``with_answer`` (by
    sentence number): the in-passage negatives DCSR's official code can draw."""
    answered = set(with_answer)
    return [i for i in without if i - 1 not in answered and i + 1 not in answered]


class SentenceSampleBuilder(SampleBuilder):
    """DCSR's sentence-aware samples (Section 3.2, Table 4) for :func:`dcsr.training.loop.train`.

    Settings (besides DPR's): ``sampling``

    - ``"bm25_1"``: positive + 1 random sentence of a random BM25 (hard negative) passage;
    - ``"bm25_2"``: positive + 2 random sentences from 2 different BM25 passages (from one
      passage, 2 different sentences, when only one passage is usable);
    - ``"inpassage_bm25"`` (default, the paper's best): positive + 1 in-passage negative (a
      random sentence of the gold passage without an answer) + 1 BM25 random sentence; when
      the gold passage has no answer-free sentence, another BM25 sentence stands in
      (Section 3.2.2). ``inpassage_negative`` says which answer-free sentences can be drawn:
      ``"any"`` (default), as Section 3.2.2 writes it ("a random sentence from
      P/{P_s+}"); ``"not_adjacent"``, as DCSR's official code draws them (``create_label`` in
      its ``dpr/models/biencoder.py`` labels the kept sentences next to an answer sentence 2, and
      only label 0 is drawn), none next to an answer sentence. (The paper's introduction says
      the opposite, that the strategy "samples neighboring sentences of the positive one".)

    The positive is a random sentence of the gold passage (``positive_ctxs[0]``, or a random
    one with ``shuffle_positives``) that contains an answer under DPR's matching
    (:func:`~dcsr.data.answers.has_answer` on the sentence text; ``positive_match: substring``:
    the lower-cased answer anywhere in the lower-cased sentence, as DCSR's code labels them). Only sentences that get a marker
    inside the caps (``max_sentences``, ``passage_max_length``) can be sampled. ``positive_text``
    says where the answer is looked for: ``"whole"`` (default), the whole sentence, as DCSR's
    official code labels sentences (on the untruncated text), so a last kept sentence whose tail
    ``passage_max_length`` cuts can be the positive with its answer in the cut part (on the vendored
    SQuAD text, 10.7% of positive candidates at 96 tokens; 11 of 6,297 records at the demo's 192);
    ``"kept"``, only the tokens the encoder sees of it (:func:`~dcsr.models.markers.kept_text`),
    so such a sentence counts as answer-free and can be drawn as the in-passage negative.
    The default stays the official code's: it is what the papers' numbers were made with, and the
    pins of every kind of CPU (config/pins.yaml) were made with it. BM25 passages
    are ``hard_negative_ctxs`` (DPR's fallback: ``negative_ctxs`` when there are none); if no
    negative sentence can be found a question simply has fewer negatives (counted). A negative
    context with a ``sentence`` field (mined by a DCSR checkpoint, :mod:`dcsr.retrieval.mining`) gives
    that sentence instead of a random one, when it got a marker (else random, counted as
    ``mined_sentence_unusable``).

    Sentence spans come from ``spans`` (passage_id -> ``[(start, end), ...]``, the sentence
    table; int or str keys) and, for contexts without a passage id or not in the mapping, from
    :func:`dcsr.data.sentences.split_sentences`. Contexts whose spans do not fit their text are
    re-split (counted as ``resplit``).

    A :class:`~dcsr.training.samples.Sample` here has ``passages`` = the distinct passages to encode
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
        self.positive_text = self.settings["positive_text"]
        self.inpassage_negative = self.settings["inpassage_negative"]
        self.positive_match = self.settings["positive_match"]
        if self.positive_match == "substring" and self.match_type != "string":
            raise InputError("dcsr.positive_match", f"substring looks for an answer's text, but this training set's "
                                                    f"answers are matched as {self.match_type} (patterns); use tokens")
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
            from dcsr.data.formats import sentence_spans

            wanted = set()
            for r in records:
                for key in ("positive_ctxs", "hard_negative_ctxs", "negative_ctxs"):
                    for ctx in r.get(key, []):
                        if ctx is None:  # a random negative training never reads (SampleBuilder.slim)
                            continue
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
        from dcsr.data.sentences import spans_fit, split_sentences

        text = ctx["text"]
        spans = _lookup(self.spans, ctx.get("passage_id"))
        if spans is not None:
            spans = [(int(s), int(e)) for s, e in spans]
            if spans_fit(text, spans):
                return spans
            self.counts["resplit"] += 1  # the table was built from a different text

        return split_sentences(text, self.settings["splitter"])

    def encode(self, ctx: Mapping[str, Any]):
        """``(encoded, spans)``: :func:`encode_passage_with_markers` of a context and its spans."""
        if self.tokenizer is None:
            raise ValueError("SentenceSampleBuilder needs a tokenizer (pass it, or use SentenceSampleBuilder.bind)")
        spans = self.passage_spans(ctx)
        enc = encode_passage_with_markers(self.tokenizer, ctx.get("title", ""), ctx["text"], spans,
                                          self.passage_max_length, self.max_sentences, self.marker_id)
        return enc, spans

    def _answer_split(self, record, ctx, enc, spans) -> tuple[list[int], list[int]]:
        """Kept sentences of ``ctx`` with and without an answer. With ``positive_text: kept`` a
        sentence is judged on what the encoder sees of it: the last kept sentence of a passage
        filled to ``passage_max_length`` may have lost its tail
        (:func:`~dcsr.models.markers.encode_passage_with_markers`), and an answer only in that
        tail does not count."""
        answers = record.get("answers", [])
        text = ctx["text"]
        ids, _types, positions, kept = enc
        with_answer, without = [], []
        for n, i in enumerate(kept):
            s, e = spans[i]
            seen = text[s:e]
            if self.positive_text == "kept" and n == len(kept) - 1 and len(ids) >= self.passage_max_length:
                seen = kept_text(self.tokenizer, seen, len(ids) - 2 - positions[n])  # its tokens up to [SEP]
            (with_answer if self._holds_answer(answers, seen) else without).append(i)
        return with_answer, without

    def _holds_answer(self, answers: Sequence[str], sentence: str) -> bool:
        """Whether ``sentence`` holds one of ``answers``: DPR's matching (``tokens``), or, as
        DCSR's code labels sentences (``process_ctx.py``), the lower-cased answer found anywhere
        in the lower-cased sentence (``substring``)."""
        if self.positive_match == "substring":
            low = sentence.lower()
            return any(str(a).lower() in low for a in answers)
        return has_answer(list(answers), sentence, self.match_type)

    def skip_reason(self, record: Mapping[str, Any], gold: Mapping[str, Any] | None = None) -> str | None:
        """Why ``record`` cannot be trained (None: it can): ``no_sentences`` (the gold passage
        has no sentence), ``no_answer_sentence`` (no sentence contains an answer),
        ``answer_beyond_cap`` (only sentences cut off by the caps do)."""
        return self.answer_sentences(record, gold)[0]

    def answer_sentences(self, record: Mapping[str, Any], gold: Mapping[str, Any] | None = None
                         ) -> tuple[str | None, list[int], list[int]]:
        """``(skip reason, kept sentences of the gold passage with an answer, without)``, as
        training judges them (both lists empty when the question is skipped)."""
        gold = record["positive_ctxs"][0] if gold is None else gold
        enc, spans = self.encode(gold)
        return self._skip(record, gold, enc, spans)

    def _skip(self, record, gold, enc, spans):
        if not spans:
            return "no_sentences", [], []
        with_answer, without = self._answer_split(record, gold, enc, spans)
        if with_answer:
            return None, with_answer, without
        answers = record.get("answers", [])
        text = gold["text"]
        if any(self._holds_answer(answers, text[s:e]) for s, e in spans):
            return "answer_beyond_cap", [], []
        return "no_answer_sentence", [], []

    def filter_records(self, records: Sequence[Mapping[str, Any]]) -> tuple[list, Counter]:
        """``(trainable records, Counter of skip reasons)``; deterministic (the reason does not
        depend on the sampling RNG), so filtering once before training is exact. With
        ``shuffle_positives`` a record is kept when any positive can serve. A record with neither
        hard nor other negatives is kept, trained with what it has (counted as
        ``missing_negatives``), where DCSR's ``filter_data`` drops it: DPR's files give every
        question 50 random negatives, so that never happens on them (3 of the demo's 2,307
        squad-a training questions)."""
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
            return Sample(self.question(record), [], 0, {"skip": reason})
        if self.inpassage_negative == "not_adjacent":
            without = not_adjacent(with_answer, without)

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
        return Sample(self.question(record), list(passages), 0, {"select": select, "encoded": encoded})

    # -------------------------------------------------------------- batching

    def collate(self, tokenizer, samples: Sequence[Sample]) -> Batch:
        """Tokenize samples into a :class:`~dcsr.training.samples.Batch` of sentence vectors.

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
