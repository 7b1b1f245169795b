"""DCSR wired into the pipeline: training through the shared loop, one vector per sentence in
the index, marked questions, and HasAns over merged shard hits."""

import json

import numpy as np
import pytest
import torch

from dcsr.retrieval.embed import embed_corpus_shard, embed_questions, encode_sentence_passages
from dcsr.errors import InputError
from dcsr.data.formats import Passage, sentence_spans, write_biencoder, write_corpus
from dcsr.retrieval.index import index_shard, search_shard
from dcsr.training.methods import builder_class
from dcsr.models.biencoder import build_biencoder, load_biencoder
from dcsr.training.sentence_samples import SentenceSampleBuilder
from dcsr.models.markers import tokenize_marked_questions, tokenize_sentence_passages
from dcsr.retrieval.hasans import hasans_topk, merge_sentence_hits, sentence_search_depth
from dcsr.data.sentences import split_corpus
from dcsr.training.loop import train
from dcsr.training.samples import SampleBuilder, validate_settings

WORDS = "apple river castle engine forest guitar harbor island jungle kitten lemon mountain".split()


def _passage(i):
    w = WORDS[i % len(WORDS)]
    return Passage(10 + i, f"The {w} is old. It stands near the {WORDS[(i + 5) % len(WORDS)]}. "
                           f"Nobody knows the {w} number {i}.", f"Title {i}")


@pytest.fixture()
def corpus(tmp_path):
    ps = [_passage(i) for i in range(9)]
    write_corpus(tmp_path / "c.tsv", ps)
    split_corpus(tmp_path / "c.tsv", tmp_path / "s.tsv", progress=False)
    return ps


@pytest.fixture()
def dcsr_model(tmp_path, tiny_bert):
    from dcsr.training.loop import export_untrained

    export_untrained({"passage_max_length": 64, "question_max_length": 16, "max_sentences": 2},
                     str(tiny_bert), tmp_path / "m", log=lambda m: None, builder_cls=builder_class("dcsr"))
    return tmp_path / "m"


def test_builder_class_by_method():
    assert builder_class("dpr") is SampleBuilder
    assert issubclass(builder_class("dcsr", "x.tsv"), SentenceSampleBuilder)
    assert builder_class("dcsr", "x.tsv").bound_sentence_table == "x.tsv"
    with pytest.raises(InputError, match="unknown method 'colbert'"):
        builder_class("colbert")


def test_untrained_export_records_the_method(dcsr_model):
    meta = json.loads((dcsr_model / "dcsr.json").read_text())
    assert meta["method"] == "dcsr" and meta["trained"] is False
    assert meta["settings"]["max_sentences"] == 2 and meta["settings"]["sampling"] == "inpassage_bm25"


def test_sentence_shards_hold_one_vector_per_kept_sentence(tmp_path, corpus, dcsr_model):
    ids, sents, vecs = [], [], []
    for shard in range(2):
        stats = embed_corpus_shard(dcsr_model, tmp_path / "c.tsv", shard, 2, tmp_path / f"v{shard}.npy",
                                   tmp_path / f"i{shard}.npy", batch_size=3, progress=False,
                                   sentences=tmp_path / "s.tsv", out_sentences=tmp_path / f"n{shard}.npy")
        assert stats["method"] == "dcsr" and stats["vectors"] == 2 * stats["passages"]
        ids += np.load(tmp_path / f"i{shard}.npy").tolist()
        sents += np.load(tmp_path / f"n{shard}.npy").tolist()
        vecs.append(np.load(tmp_path / f"v{shard}.npy"))
    # three sentences per passage, capped at max_sentences=2: sentences 0 and 1 of each passage
    assert sorted(zip(ids, sents)) == sorted((p.id, s) for p in corpus for s in (0, 1))
    # a batched, length-sorted vector equals the marker state of that passage encoded alone
    tok, model, _ = load_biencoder(dcsr_model)
    p = corpus[4]
    spans = sentence_spans(tmp_path / "s.tsv", {p.id})[p.id]
    assert [p.text[a:b] for a, b in spans][2].startswith("Nobody knows")
    with torch.no_grad():
        alone = model.encode_passages(**tokenize_sentence_passages(tok, [p.title], [p.text], [spans], 64, 2)).numpy()
    by_key = {(i, s): v for i, s, v in zip(ids, sents, np.concatenate(vecs))}
    np.testing.assert_allclose(by_key[(p.id, 1)], alone[1], atol=1e-5)


def test_encode_sentence_passages_orders_by_passage_then_sentence(tiny_bert):
    tok, model = build_biencoder(str(tiny_bert))
    model.eval()
    titles, texts = ["a", "b", "c"], ["one. two.", "", "three. four. five."]
    spans = [[(0, 4), (5, 9)], [], [(0, 6), (7, 12), (13, 18)]]
    vecs, rows, sents = encode_sentence_passages(model, tok, titles, texts, spans, 32, 10, 2, torch.device("cpu"),
                                                 progress=False)
    assert rows.tolist() == [0, 0, 2, 2, 2] and sents.tolist() == [0, 1, 0, 1, 2]
    assert vecs.shape == (5, model.hidden_size) and np.abs(vecs).sum(axis=1).min() > 0


def test_dcsr_questions_are_pooled_at_the_marker(tmp_path, dcsr_model):
    embed_questions(dcsr_model, ["who built the castle?", "why?"], tmp_path / "q.npy", progress=False)
    q = np.load(tmp_path / "q.npy")
    tok, model, _ = load_biencoder(dcsr_model)
    batch = tokenize_marked_questions(tok, ["who built the castle?"], 16)
    assert batch["input_ids"][0, 1].item() == tok.convert_tokens_to_ids("[unused0]")
    with torch.no_grad():
        one = model.encode_questions(**batch).numpy()[0]
    np.testing.assert_allclose(q[0], one, atol=1e-5)


def test_search_depth_from_stats(tmp_path):
    (tmp_path / "stats.json").write_text(json.dumps({"mean_sentences_per_passage": 4.29}))
    assert sentence_search_depth(100, tmp_path / "stats.json") == 429
    assert sentence_search_depth(100, None, 1.45) == 145
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="bad.json"):
        sentence_search_depth(100, tmp_path / "bad.json")


def test_merge_sentence_hits_equals_hasans_over_all_sentences(tmp_path):
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(40, 8)).astype(np.float32)
    pids = np.repeat(np.arange(10), 4)  # 10 passages x 4 sentences
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    np.save(tmp_path / "q.npy", queries)
    shards = []
    for s in range(2):  # sentences of a passage are spread over both shards
        rows = np.arange(s, 40, 2)
        np.save(tmp_path / f"v{s}.npy", vecs[rows])
        np.save(tmp_path / f"i{s}.npy", pids[rows])
        index_shard(tmp_path / f"v{s}.npy", tmp_path / f"x{s}.faiss")
        search_shard(tmp_path / f"x{s}.faiss", tmp_path / f"i{s}.npy", tmp_path / "q.npy", tmp_path / f"h{s}.npz", 40)
        shards.append(str(tmp_path / f"h{s}.npz"))
    scores, got = merge_sentence_hits(shards, k_passages=5)
    full = queries.astype(np.float64) @ vecs.T.astype(np.float64)  # every sentence retrieved
    want, want_scores = hasans_topk(full, np.broadcast_to(pids, full.shape), 1.0, 5)
    assert got.tolist() == want.tolist()
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5)


def _records(passages, n):
    out = []
    for i in range(n):
        p, neg = passages[i % len(passages)], passages[(i + 3) % len(passages)]
        word = WORDS[i % len(passages) % len(WORDS)]
        ctx = lambda q: {"title": q.title, "text": q.text, "passage_id": str(q.id)}  # noqa: E731
        out.append({"question": f"what is old near title {i}?", "answers": [word],
                    "positive_ctxs": [ctx(p)], "negative_ctxs": [], "hard_negative_ctxs": [ctx(neg)]})
    out.append({"question": "unanswerable?", "answers": ["zebra"], "positive_ctxs": [ctx(passages[0])],
                "negative_ctxs": [], "hard_negative_ctxs": []})
    return out


def test_prepare_records_loads_spans_and_skips_with_a_reason(tmp_path, corpus, tiny_bert):
    cls = builder_class("dcsr", tmp_path / "s.tsv")
    b = cls(validate_settings({"passage_max_length": 64}, cls.SETTINGS))
    tok, model = build_biencoder(str(tiny_bert))
    b.setup(tok, model)
    messages = []
    kept = b.prepare_records(_records(corpus, 8), "train.json", messages.append)
    assert len(kept) == 8 and all(r["question"] != "unanswerable?" for r in kept)
    assert set(b.spans) == {p.id for p in corpus[:9]} & {int(c["passage_id"]) for r in kept
                                                          for c in r["positive_ctxs"] + r["hard_negative_ctxs"]}
    assert "train.json: 8 of 9 questions" in messages[0] and "no_answer_sentence 1" in messages[0]


def test_dcsr_trains_through_the_shared_loop(tmp_path, corpus, tiny_bert):
    write_biencoder(tmp_path / "train.json", _records(corpus, 16))
    write_biencoder(tmp_path / "dev.json", _records(corpus, 8))
    messages = []
    settings = {"batch_size": 4, "epochs": 2, "warmup_steps": 1, "learning_rate": 1e-3, "amp": "off",
                "passage_max_length": 64, "question_max_length": 16, "val_av_rank_hard_neg": 1,
                "val_av_rank_other_neg": 0, "seed": 3}
    summary = train(settings, tmp_path / "train.json", tmp_path / "dev.json", str(tiny_bert), tmp_path / "out",
                    tmp_path / "ck", log=messages.append, builder_cls=builder_class("dcsr", tmp_path / "s.tsv"))
    assert summary["steps"] == 8  # 16 usable of 17 records, batch 4, 2 epochs
    meta = json.loads((tmp_path / "out" / "dcsr.json").read_text())
    assert meta["method"] == "dcsr" and meta["trained"] is True and meta["settings"]["sampling"] == "inpassage_bm25"
    history = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert [h["epoch"] for h in history] == [0, 1] and all(0 <= h["accuracy"] <= 1 for h in history)
    assert any("16 of 17 questions" in m for m in messages)
    # the checkpoint left in ck/last is not resumed under another sampling scheme, nor with
    # another sentence table: each is set aside and training starts fresh
    messages = []
    train({**settings, "sampling": "bm25_1"}, tmp_path / "train.json", tmp_path / "dev.json", str(tiny_bert),
          tmp_path / "out3", tmp_path / "ck", log=messages.append, builder_cls=builder_class("dcsr", tmp_path / "s.tsv"))
    assert not any("resuming" in m for m in messages)
    assert any("settings.sampling 'inpassage_bm25' -> 'bm25_1'" in m for m in messages), messages
    with open(tmp_path / "s.tsv", "a", encoding="utf-8") as fh:  # one more sentence row: another table
        fh.write("999999\t0\t0\t1\n")
    messages = []
    train({**settings, "sampling": "bm25_1"}, tmp_path / "train.json", tmp_path / "dev.json", str(tiny_bert),
          tmp_path / "out4", tmp_path / "ck", log=messages.append, builder_cls=builder_class("dcsr", tmp_path / "s.tsv"))
    assert any("sentence table changed (sha256" in m for m in messages), messages
    assert len(list((tmp_path / "ck" / "stale").iterdir())) == 2


def test_mean_pooled_dcsr_model_flows_through_export_and_embedding(tmp_path, corpus, tiny_bert):
    """``pooling: mean`` is recorded with the model, and the index and the questions use it."""
    from dcsr.training.loop import export_untrained

    export_untrained({"passage_max_length": 64, "question_max_length": 16, "max_sentences": 2, "pooling": "mean"},
                     str(tiny_bert), tmp_path / "mean", log=lambda m: None, builder_cls=builder_class("dcsr"))
    tok, model, meta = load_biencoder(tmp_path / "mean")
    assert model.pooling == "mean" and meta["method"] == "dcsr"
    embed_corpus_shard(tmp_path / "mean", tmp_path / "c.tsv", 0, 1, tmp_path / "v.npy", tmp_path / "i.npy",
                       batch_size=4, progress=False, sentences=tmp_path / "s.tsv", out_sentences=tmp_path / "n.npy")
    ids, sents, vecs = np.load(tmp_path / "i.npy"), np.load(tmp_path / "n.npy"), np.load(tmp_path / "v.npy")
    p = corpus[3]
    spans = sentence_spans(tmp_path / "s.tsv", {p.id})[p.id]
    batch = tokenize_sentence_passages(tok, [p.title], [p.text], [spans], 64, 2)
    with torch.no_grad():
        hidden = model.passage_model(**{k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
                                     ).last_hidden_state[0]
    start, end = batch["pool_positions"][1].item(), batch["pool_ends"][1].item()
    row = int(np.flatnonzero((ids == p.id) & (sents == 1))[0])
    np.testing.assert_allclose(vecs[row], hidden[start:end].mean(0).numpy(), atol=1e-5)
    embed_questions(tmp_path / "mean", ["who built the castle?"], tmp_path / "q.npy", progress=False)
    q = tokenize_marked_questions(tok, ["who built the castle?"], 16)
    with torch.no_grad():
        q_hidden = model.question_model(**{k: q[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
                                        ).last_hidden_state[0]
    np.testing.assert_allclose(np.load(tmp_path / "q.npy")[0], q_hidden[1:].mean(0).numpy(), atol=1e-5)


def test_the_temperature_is_chosen_on_dev_questions(tmp_path):
    """Passage 1 has one sentence scored 12 and no answer; passage 2 has five sentences scored 9
    and the answer. A cold softmax gives passage 1 the top rank; from T = 4 on (by hand: HasAns
    0.297 for passage 1 against 1 - (1 - 0.1405)^5 = 0.53 for passage 2) passage 2 wins, and of
    the winning temperatures the one closest to 1 is chosen."""
    from dcsr.data.formats import QA, write_qas
    from dcsr.retrieval.hasans import choose_temperature

    write_corpus(tmp_path / "c.tsv", [Passage(1, "nothing to see here", "A"), Passage(2, "the gold is here", "B")])
    write_qas(tmp_path / "dev.tsv", [QA("where is the gold?", ["gold"])])
    np.savez(tmp_path / "h.npz", scores=np.array([[12.0, 9, 9, 9, 9, 9]], dtype=np.float32),
             ids=np.array([[1, 2, 2, 2, 2, 2]]))
    choice = choose_temperature([str(tmp_path / "h.npz")], str(tmp_path / "dev.tsv"), str(tmp_path / "c.tsv"), ks=(1,))
    assert choice["temperature"] == 4.0
    assert choice["grid"]["2"]["top1"] == 0.0 and choice["grid"]["4"]["top1"] == 100.0
    assert choice["grid"]["64"]["top1"] == 100.0 and choice["questions"] == 1
    # a tie everywhere keeps the paper's T = 1
    write_qas(tmp_path / "none.tsv", [QA("where is the silver?", ["silver"])])
    assert choose_temperature([str(tmp_path / "h.npz")], str(tmp_path / "none.tsv"), str(tmp_path / "c.tsv"),
                              ks=(1,))["temperature"] == 1.0


def test_temperature_dev_adds_a_dev_variant_of_each_test_dataset():
    from dcsr.pipeline.config import dev_variants

    cfg = {"dcsr": {"temperature": "dev"},
           "datasets": {"a": {"corpus": "c", "generated": "x"}, "a-dev": {"corpus": "c", "like": "a", "questions": "dev"}}}
    assert dev_variants(cfg) == {"a.dev": {"like": "a", "questions": "dev", "corpus": "c", "dev_of": "a"}}
    assert dev_variants({**cfg, "dcsr": {"temperature": 1.0}}) == {}
    # a hybrid row's linear fusion chooses its weight on dev questions too; RRF chooses nothing
    hybrid = {"t": {"rows": [{"label": "h", "retriever": "hybrid", "question": "m", "passage": "m"}]}}
    assert dev_variants({**cfg, "dcsr": {"temperature": 1.0}, "tables": hybrid}) == {
        "a.dev": {"like": "a", "questions": "dev", "corpus": "c", "dev_of": "a"}}
    hybrid["t"]["rows"][0]["fusion"] = "rrf"
    assert dev_variants({**cfg, "dcsr": {"temperature": 1.0}, "tables": hybrid}) == {}


def test_a_run_shorter_than_k_for_want_of_sentences_is_a_warning_naming_the_setting(caplog):
    """Top 6 sentences: question 0's name 3 passages only (a depth too small for k = 4: its 4th
    rank would count as a miss), question 1's name 6, and question 2's search found 2 sentences
    only (the corpus ran out: no deeper search helps). Only question 0 is warned about."""
    import logging

    import numpy as np

    from dcsr.retrieval.hasans import hasans_topk, short_runs, warn_short_runs

    ids = np.array([[1, 1, 2, 2, 3, 3], [1, 2, 3, 4, 5, 6], [1, 2, -1, -1, -1, -1]])
    scores = np.tile(np.arange(6, 0, -1, dtype=float), (3, 1))
    pids, _ = hasans_topk(scores, ids, 1.0, 4)
    assert short_runs(ids, pids, 4).tolist() == [0]
    with caplog.at_level(logging.WARNING, logger="dcsr.retrieval.hasans"):
        warn_short_runs(ids, pids, 4)
        warn_short_runs(ids[1:], pids[1:], 4)  # none short: no warning
    assert [r.getMessage() for r in caplog.records] == [
        "1 of 3 questions rank fewer than 4 passages from their top 6 sentences (as few as 3, median 3): their "
        "missing ranks count as misses at top-k; raise dcsr.sentences_per_passage (null: the corpus mean)"]


@pytest.mark.parametrize("splitter, sentences", [("blingfire", 3), ("dcsr", 1)])
def test_a_passage_the_table_lacks_is_split_with_the_models_splitter(tmp_path, tiny_bert, splitter, sentences):
    """dcsr.splitter reaches the passages split where the sentence table lacks them: in training
    (SentenceSampleBuilder.passage_spans) and in the embedding job (embed_corpus_shard without a
    table). DCSR's rule keeps "The apple is old." (4 words) with what follows, and joins the
    6-word last sentence to it: one sentence, where Blingfire makes three."""
    from dcsr.data.sentences import split_sentences
    from dcsr.training.loop import export_untrained

    text = "The apple is old. It stands near the river and the castle on the hill. Nobody knows the apple number 3."
    assert len(split_sentences(text, splitter)) == sentences
    settings = {"passage_max_length": 64, "question_max_length": 16, "splitter": splitter}
    export_untrained(settings, str(tiny_bert), tmp_path / "m", log=lambda m: None, builder_cls=builder_class("dcsr"))
    write_corpus(tmp_path / "c.tsv", [Passage(7, text, "Apple")])
    embed_corpus_shard(tmp_path / "m", tmp_path / "c.tsv", 0, 1, tmp_path / "v.npy", tmp_path / "i.npy",
                       progress=False, out_sentences=tmp_path / "n.npy")
    assert np.load(tmp_path / "n.npy").tolist() == list(range(sentences))
    tok, _, _ = load_biencoder(tmp_path / "m")
    builder = SentenceSampleBuilder(validate_settings({"splitter": splitter}, SentenceSampleBuilder.SETTINGS),
                                    tokenizer=tok, spans={})
    assert builder.passage_spans({"text": text, "passage_id": "7"}) == split_sentences(text, splitter)


def test_a_validation_slice_whose_questions_are_all_skipped_encodes_nothing(dcsr_model):
    """A process's dev slice can be one or two questions; when DCSR skips each (no answer sentence
    within max_sentences), collate returns an empty batch, which BERT cannot take: the slice is
    empty rows, as a process without dev questions, and its rank still joins the gathers."""
    import random

    from dcsr.training.distributed import DistContext
    from dcsr.training.validation import _encode_local

    tok, model, meta = load_biencoder(dcsr_model)
    builder = SentenceSampleBuilder(validate_settings({"max_sentences": 2}, SentenceSampleBuilder.SETTINGS),
                                    tokenizer=tok)
    ctx = lambda title, text, pid: {"title": title, "text": text, "passage_id": pid}  # noqa: E731
    beyond = {"question": "where is the key?", "answers": ["drawer"],
              "positive_ctxs": [ctx("K", "A key. A door. A lock. In the drawer.", "5")], "negative_ctxs": [],
              "hard_negative_ctxs": [ctx("Y", "Birds fly.", "15")]}
    sample = builder.sample(beyond, random.Random(0))
    assert builder.collate(tok, [sample]).positive_index.numel() == 0
    q, p, pos = _encode_local(model, tok, builder, [sample], DistContext(0, 1, 0, torch.device("cpu")), None)
    assert q.shape == (0, model.hidden_size) and p.shape == (0, model.hidden_size) and pos.numel() == 0
