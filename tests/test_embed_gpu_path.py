"""The GPU-paced encoding of dcsr.retrieval.embed, checked on the CPU: batches tokenized by a
background thread give the CPU loop's vectors bit for bit; pinned memory and non-blocking copies
are taken on CUDA only (the CUDA branch runs here against stand-ins); padding a batch to a
multiple of 8 tokens, as on CUDA, leaves CLS, mean and DCSR's marker vectors equal within fp32
rounding; SDPA and the torch.compile opt-in."""

import os
import threading

import numpy as np
import pytest
import torch

import dcsr.retrieval.batching as batching
import dcsr.retrieval.embed as embed
from dcsr.models.biencoder import build_biencoder, tokenize_passages

CPU = torch.device("cpu")
TITLES = ["River", "", "Castle", "A long title of the town hall", "Moon", "x", "The war"]
TEXTS = ["The river flows north. It is long and wide.", "no title here. only text.",
         "A castle on a hill. Built in 1200. Burnt twice, rebuilt once.",
         "The town hall stands in the square. Its clock is old. Tourists come. They go.", "Phases.",
         "seven eight nine ten. eleven.", "It ended in 1945 after six years of fighting across the world."]
SPANS = [[(0, 22), (23, 43)], [(0, 14), (15, 25)], [(0, 19), (20, 34), (35, 61)],
         [(0, 35), (36, 52), (53, 62), (63, 71)], [(0, 7)], [(0, 21), (22, 29)], [(0, 62)]]


@pytest.fixture(scope="module", params=["cls", "mean"])
def model(request, tiny_bert):
    tok, m = build_biencoder(str(tiny_bert), pooling=request.param)
    m.eval()
    return tok, m


def _same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_pad_rows_is_what_tokenizer_pad_gives(tiny_bert):
    tok, _ = build_biencoder(str(tiny_bert))
    enc = tokenize_passages(tok, TITLES, TEXTS, 16, padding=False)
    ref = tok.pad(enc, return_tensors="pt")
    pads = {"input_ids": tok.pad_token_id, "attention_mask": 0, "token_type_ids": tok.pad_token_type_id}
    for key, value in pads.items():
        ours = batching.pad_rows(enc[key], value)
        assert ours.dtype == ref[key].dtype == torch.int64 and torch.equal(ours, ref[key])
    assert batching.pad_rows([[1, 2, 3], [4]], 0, multiple=8).tolist() == [[1, 2, 3] + [0] * 5, [4] + [0] * 7]


@pytest.mark.parametrize("side", ["passage", "question", "marked_question"])
def test_prefetching_thread_gives_the_plain_loops_vectors(model, monkeypatch, one_thread, side):
    tok, m = model
    monkeypatch.setattr(embed, "TOKENIZE_CHUNK", 3)  # several chunks, so the thread runs a chunk ahead
    plain = embed.encode_texts(m, tok, TEXTS, TITLES, side, 32, 2, CPU, progress=False)
    for depth in (1, 2, 8):
        _same_bits(embed.encode_texts(m, tok, TEXTS, TITLES, side, 32, 2, CPU, progress=False, prefetch=depth), plain)


def test_prefetching_thread_gives_the_plain_loops_sentence_vectors(model, monkeypatch, one_thread):
    tok, m = model
    monkeypatch.setattr(embed, "TOKENIZE_CHUNK", 2)
    plain = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 3, 2, CPU, progress=False)
    threaded = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 3, 2, CPU, progress=False, prefetch=2)
    for a, b in zip(threaded, plain):
        _same_bits(a, b)
    assert plain[1].tolist() == [0, 0, 1, 1, 2, 2, 2, 3, 3, 3, 4, 5, 5, 6]


@pytest.mark.parametrize("multiple", [8, 32])
def test_padding_to_a_multiple_leaves_the_vectors(model, one_thread, multiple):
    """What CUDA does by default (CUDA_PAD_MULTIPLE), run on the CPU: the masked padding moves
    CLS, mean, marker and marked-question vectors by fp32 rounding only."""
    tok, m = model
    for side in ("passage", "question", "marked_question"):
        plain = embed.encode_texts(m, tok, TEXTS, TITLES, side, 32, 3, CPU, progress=False)
        padded = embed.encode_texts(m, tok, TEXTS, TITLES, side, 32, 3, CPU, progress=False, pad_multiple=multiple)
        np.testing.assert_allclose(padded, plain, rtol=1e-5, atol=1e-5)
    plain = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 10, 3, CPU, progress=False)
    padded = embed.encode_sentence_passages(m, tok, TITLES, TEXTS, SPANS, 32, 10, 3, CPU, progress=False,
                                            pad_multiple=multiple)
    assert padded[1].tolist() == plain[1].tolist() and padded[2].tolist() == plain[2].tolist()
    np.testing.assert_allclose(padded[0], plain[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("multiple", [1, 8])
def test_collate_marked_is_the_markers_collate(tiny_bert, multiple):
    from dcsr.models.markers import collate_encoded_passages, encode_passages_with_markers, ensure_sentence_marker

    tok, _ = build_biencoder(str(tiny_bert))
    encoded = encode_passages_with_markers(tok, TITLES, TEXTS, SPANS, 24, 3, ensure_sentence_marker(tok))
    ref = batching.round_up_batch(collate_encoded_passages(encoded, None, tok.pad_token_id), multiple, tok.pad_token_id)
    ours = batching.collate_marked(encoded, tok.pad_token_id, multiple)
    assert set(ours) == {"input_ids", "attention_mask", "token_type_ids", "pool_positions", "pool_ends"}
    for key, value in ours.items():
        assert value.dtype == ref[key].dtype == torch.int64 and torch.equal(value, ref[key]), key


def test_round_up_batch_moves_flat_positions_with_their_rows():
    batch = {"input_ids": torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]]), "attention_mask": torch.tensor(
        [[1] * 5, [1, 1, 1, 0, 0]]), "pool_positions": torch.tensor([1, 3, 6]), "pool_ends": torch.tensor([3, 5, 8])}
    out = batching.round_up_batch(batch, 8, pad_token_id=0)
    assert out["input_ids"].shape == (2, 8) and out["attention_mask"][:, 5:].sum() == 0
    flat = out["input_ids"].reshape(-1)
    assert flat[out["pool_positions"]].tolist() == [2, 4, 7]  # the same tokens as before
    assert out["pool_ends"].tolist() == [3, 5, 11]  # row 0's end at its row's end (5) stays 5, not row 1's start
    assert batching.round_up_batch(batch, 5, 0) is batch and batching.round_up_batch(batch, 1, 0) is batch


@pytest.mark.parametrize("in_flight, sunk_at", [(1, [3, 5, 7, 8]), (2, [4, 6, 7, 8])])
def test_pinned_non_blocking_path_is_cuda_only(model, monkeypatch, one_thread, in_flight, sunk_at):
    """On the CPU nothing is pinned and no copy is non-blocking; the CUDA branch, run against
    stand-ins for the device's tensors and events, pins every input, copies without blocking
    both ways, and sinks each batch once, in order, after IN_FLIGHT later batches are queued."""
    tok, m = model
    monkeypatch.setattr(batching, "IN_FLIGHT", in_flight)
    calls = {"pin": 0, "non_blocking": 0}
    real_to = torch.Tensor.to

    def pin(self):
        calls["pin"] += 1
        return self

    def to(self, *args, **kwargs):
        calls["non_blocking"] += bool(kwargs.get("non_blocking"))
        if args and str(args[0]).startswith("cuda"):
            return self  # the stand-in device is the CPU
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    monkeypatch.setattr(torch.Tensor, "to", to)
    plain = embed.encode_texts(m, tok, TEXTS, TITLES, "passage", 32, 2, CPU, progress=False, prefetch=2)
    assert calls == {"pin": 0, "non_blocking": 0}

    events = []

    class Event:
        def record(self):
            events.append("record")

        def synchronize(self):
            events.append("sync")

    monkeypatch.setattr(torch.cuda, "Event", Event)
    sunk = []
    batches = [({"x": torch.full((2, 3), float(i))}, i) for i in range(4)]
    batching.run_batches(lambda x: x[:, 0:2], iter(batches), torch.device("cuda"), "fp32", 2,
                       lambda vecs, payload: sunk.append((payload, vecs.tolist(), len(events))))
    assert [s[0] for s in sunk] == [0, 1, 2, 3] and sunk[0][1] == [[0.0, 0.0]] * 2
    assert [s[2] for s in sunk] == sunk_at  # batch i sunk after batch i + IN_FLIGHT was recorded (and i synced)
    assert calls["pin"] == 4 and calls["non_blocking"] == 8  # in and out, each batch
    # the CUDA defaults: a chunk's batches prefetched and padding to 8; none and 1 on the CPU
    assert embed.prefetch_depth(None, 512, torch.device("cuda")) == -(-embed.TOKENIZE_CHUNK // 512) + 1
    assert embed.prefetch_depth(None, 512, CPU) == 0 and embed.prefetch_depth(3, 512, CPU) == 3
    assert plain.shape == (len(TEXTS), m.hidden_size)


def test_prefetch_thread_raises_in_the_consumer_and_stops_when_closed():
    def failing():
        yield 1
        raise ValueError("tokenizer broke")

    with pytest.raises(ValueError, match="tokenizer broke"):
        list(batching.prefetched(failing(), 2))
    made = []

    def endless():
        i = 0
        while True:
            made.append(i)
            yield i
            i += 1

    gen = batching.prefetched(endless(), 2)
    assert next(gen) == 0
    gen.close()
    assert not any(t.name == "dcsr-embed-tokenize" for t in threading.enumerate())
    assert len(made) <= 5  # stopped, at most depth + a few ahead


def test_sdpa_and_the_compile_opt_in(tiny_bert, monkeypatch):
    from transformers import AutoModel

    tok, m = build_biencoder(str(tiny_bert))
    assert embed.use_sdpa(m) == ["sdpa"] * len(embed._encoders(m))  # transformers 5 picks SDPA itself
    m.passage_model = AutoModel.from_pretrained(str(tiny_bert), attn_implementation="eager")
    assert embed.use_sdpa(m)[-1] == "sdpa" and m.passage_model.config._attn_implementation == "sdpa"
    assert embed._compile_mode(None) == (False, None) and embed._compile_mode("0") == (False, None)
    assert embed._compile_mode("1") == (True, None) and embed._compile_mode("max-autotune") == (True, "max-autotune")
    compiled = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: compiled.append((type(self).__name__, kw)))
    embed.compile_encoders(m, "max-autotune")
    assert [kw for _, kw in compiled] == [{"dynamic": True, "mode": "max-autotune"}] * len(embed._encoders(m))


@pytest.mark.parametrize("device, env, threads, want_env, want", [
    # the scripts' default on CUDA: the tokenizer gets the job's threads
    ("cuda", {"TOKENIZERS_PARALLELISM": "false", "DCSR_TOKENIZERS_PARALLELISM_DEFAULTED": "1"}, 8,
     {"TOKENIZERS_PARALLELISM": "true", "RAYON_NUM_THREADS": "8"}, 8),
    # a RAYON_NUM_THREADS the user set stands
    ("cuda", {"TOKENIZERS_PARALLELISM": "false", "DCSR_TOKENIZERS_PARALLELISM_DEFAULTED": "1",
              "RAYON_NUM_THREADS": "3"}, 8, {"TOKENIZERS_PARALLELISM": "true", "RAYON_NUM_THREADS": "3"}, 3),
    # the user's own false stands on CUDA too
    ("cuda", {"TOKENIZERS_PARALLELISM": "false"}, 8, {"TOKENIZERS_PARALLELISM": "false"}, 1),
    # on a CPU the job's cores encode: nothing changes
    ("cpu", {"TOKENIZERS_PARALLELISM": "false", "DCSR_TOKENIZERS_PARALLELISM_DEFAULTED": "1"}, 8,
     {"TOKENIZERS_PARALLELISM": "false"}, 1),
    # a one-thread job has nothing to share
    ("cuda", {"TOKENIZERS_PARALLELISM": "false", "DCSR_TOKENIZERS_PARALLELISM_DEFAULTED": "1"}, 1,
     {"TOKENIZERS_PARALLELISM": "false"}, 1),
])
def test_the_tokenizer_takes_the_jobs_threads_on_cuda_only(device, env, threads, want_env, want):
    assert embed.parallel_tokenizer(device, threads, env) == want
    assert {k: env.get(k) for k in want_env} == want_env
    if "RAYON_NUM_THREADS" not in want_env:
        assert "RAYON_NUM_THREADS" not in env


def test_scripts_mark_the_default_they_chose_and_not_the_users(monkeypatch):
    from dcsr.cli import TOKENIZERS_DEFAULTED_ENV, script

    seen = {}

    @script
    def main():
        seen.update({k: os.environ.get(k) for k in ("TOKENIZERS_PARALLELISM", TOKENIZERS_DEFAULTED_ENV)})

    monkeypatch.delenv(TOKENIZERS_DEFAULTED_ENV, raising=False)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    main()
    assert seen == {"TOKENIZERS_PARALLELISM": "false", TOKENIZERS_DEFAULTED_ENV: "1"}
    monkeypatch.delenv(TOKENIZERS_DEFAULTED_ENV)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # the user's
    main()
    assert seen == {"TOKENIZERS_PARALLELISM": "false", TOKENIZERS_DEFAULTED_ENV: None}
