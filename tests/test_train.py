"""Bi-encoder training: sample building, learning, resume after a kill, DDP equivalence."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from dcsr.errors import InputError
from dcsr.data.formats import read_biencoder
from dcsr.models.biencoder import build_biencoder, load_biencoder
from dcsr.settings import Settings
from dcsr.training.distributed import DistContext, _amp_dtype, gather_rows, nll_loss, setup_distributed
from dcsr.training.loop import Trainer, train
from dcsr.training.samples import SampleBuilder, build_samples, load_settings, sample_rng, validate_settings
from dcsr.training.validation import evaluate

# Single-token words of the WordPiece vocabulary: each question and its positive share one.
WORDS = ("apple river castle engine forest guitar harbor island jungle kitten lemon mountain needle orange "
         "pencil rocket saddle tiger umbrella violin window yellow zebra anchor basket candle dragon eagle "
         "feather garden hammer jacket ladder mirror novel ocean palace rabbit silver tunnel wagon bridge").split()


def _ctx(word, pid):
    # Every passage has the same template, so only the word tells a positive from a negative.
    return {"title": word, "text": f"this passage is about the {word}", "passage_id": str(pid)}


def make_records(n):
    words = WORDS[:n]
    return [{
        "question": f"what about the {w}?",
        "answers": [w],
        "positive_ctxs": [_ctx(w, i)],
        "negative_ctxs": [_ctx(words[(i + 3) % n], 1000 + i)],
        "hard_negative_ctxs": [_ctx(words[(i + 7) % n], 2000 + i), _ctx(words[(i + 11) % n], 3000 + i)],
    } for i, w in enumerate(words)]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one intra-op thread


@pytest.fixture()
def data(tmp_path):
    train_json, dev_json = tmp_path / "train.json", tmp_path / "dev.json"
    train_json.write_text(json.dumps(make_records(32)))
    dev_json.write_text(json.dumps(make_records(16)))
    return train_json, dev_json


def _env():
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    return env


def _log(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


# ---------------------------------------------------------------------- samples


def test_targets_index_the_positives(tiny_bert):
    from dcsr.models.biencoder import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_bert))
    records = make_records(12)[:3]
    builder = SampleBuilder(validate_settings({"hard_negatives": 1}))
    batch = builder.build(tokenizer, records, [sample_rng(1, 0, i) for i in range(3)])
    assert batch.positive_index.tolist() == [0, 2, 4]
    assert batch.q["input_ids"].shape[0] == 3 and batch.p["input_ids"].shape[0] == 6
    # Passages are [pos_1, hn_1, pos_2, hn_2, ...]; hard negatives come from hard_negative_ctxs.
    titles = [tokenizer.decode(ids).split("[SEP]")[0].replace("[CLS]", "").strip() for ids in batch.p["input_ids"]]
    hard_titles = {c["title"] for r in records for c in r["hard_negative_ctxs"]}
    assert titles[0::2] == [r["positive_ctxs"][0]["title"] for r in records]
    assert all(t in hard_titles for t in titles[1::2])


def test_sample_building_follows_dpr():
    records = make_records(12)
    s = validate_settings({"hard_negatives": 1, "other_negatives": 1})
    samples = build_samples(records, s, epoch=0)
    assert all(len(x.passages) == 3 and x.positive == 0 for x in samples)
    # DPR's order: positive, other negatives, hard negatives.
    assert samples[0].passages[1] == records[0]["negative_ctxs"][0]
    assert samples[0].passages[2] in records[0]["hard_negative_ctxs"]
    # Hard negatives are shuffled per epoch, reproducibly; validation (shuffle=False) takes the first.
    picks = {build_samples(records, s, epoch=e)[0].passages[2]["title"] for e in range(20)}
    assert len(picks) == 2
    assert build_samples(records, s, epoch=3) == build_samples(records, s, epoch=3)
    assert build_samples(records, s, shuffle=False)[0].passages[2] == records[0]["hard_negative_ctxs"][0]
    # No hard negatives: DPR falls back to negative_ctxs.
    bare = [dict(records[0], hard_negative_ctxs=[])]
    assert build_samples(bare, validate_settings({}))[0].passages[1:] == records[0]["negative_ctxs"]


def test_loss_and_gather_single_process():
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[5.0, 0.0], [0.0, 0.0], [0.0, 5.0], [0.0, 0.0]])
    loss, correct = nll_loss(q, p, torch.tensor([0, 2]))
    assert correct == 2 and loss.item() == pytest.approx(math.log(1 + 3 * math.exp(-5)))
    rows, sizes = gather_rows(q, DistContext())
    assert rows is q and sizes == [2]


# ---------------------------------------------------------------------- settings


def test_bad_settings_name_the_key(tmp_path, repo, tiny_bert, data):
    with pytest.raises(InputError, match="batch_sise"):
        validate_settings({"batch_sise": 4})
    with pytest.raises(InputError, match="learning_rate"):
        validate_settings({"learning_rate": "fast"})
    with pytest.raises(InputError, match="epochs"):
        validate_settings({"epochs": 2.5})
    with pytest.raises(InputError, match="shuffle_positives"):
        validate_settings({"shuffle_positives": 1})
    with pytest.raises(InputError, match="pooling"):
        validate_settings({"pooling": "max"})
    assert validate_settings({"learning_rate": 1})["learning_rate"] == 1.0
    assert validate_settings({})["dev_batch_size"] == 16
    settings_file = tmp_path / "s.json"
    settings_file.write_text('{"batch_size": 2}')
    assert load_settings(str(settings_file)) == {"batch_size": 2}
    with pytest.raises(InputError):
        load_settings("{not json")

    train_json, dev_json = data
    proc = subprocess.run(
        [sys.executable, str(repo / "workflow/scripts/train_biencoder.py"), "--train", str(train_json), "--dev",
         str(dev_json), "--init", str(tiny_bert), "--output", str(tmp_path / "out"), "--checkpoint-dir",
         str(tmp_path / "ck"), "--settings", '{"batch_size": 4, "warmup_step": 3}'],
        capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "warmup_step" in proc.stderr
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- training


SMALL = {"batch_size": 4, "learning_rate": 1e-3, "warmup_steps": 0, "dropout": 0.0, "log_every_steps": 0,
         "val_av_rank_hard_neg": 2, "val_av_rank_other_neg": 1, "question_max_length": 16,
         "passage_max_length": 24}


def test_training_learns(tmp_path, tiny_bert, data):
    train_json, dev_json = data
    # A random tiny BERT has no pretrained [CLS] semantics and its [CLS] vector does not
    # learn in a few dozen steps; the masked mean does, so this test trains with "mean".
    settings = {**SMALL, "epochs": 8, "pooling": "mean"}
    s = validate_settings(settings)
    tokenizer, model = build_biencoder(str(tiny_bert), "mean", 0.0)
    before = evaluate(model, tokenizer, read_biencoder(dev_json), s)
    messages = []
    summary = train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out", tmp_path / "ck",
                    log=messages.append)
    out = tmp_path / "out"
    assert summary["steps"] == 64
    assert not [m for m in messages if "warm-up" in m and "warning" in m]
    assert sorted(p.name for p in out.iterdir()) == ["dcsr.json", "passage_encoder", "question_encoder",
                                                      "train_log.jsonl", "validation.json"]
    losses = [r["loss"] for r in _log(out / "train_log.jsonl")]
    assert [r["step"] for r in _log(out / "train_log.jsonl")] == list(range(1, 65))
    assert sum(losses[-8:]) / 8 < 0.7 * sum(losses[:8]) / 8
    history = json.loads((out / "validation.json").read_text())
    assert [h["epoch"] for h in history] == list(range(8))
    assert [h["epochs_trained"] for h in history] == [float(e) for e in range(1, 9)]
    # DPR's val_av_rank_start_epoch (30 by default): before it the NLL only; the last always ranks.
    assert [h["average_rank"] is None for h in history] == [True] * 7 + [False]
    assert all(h["average_rank_questions"] == 0 for h in history[:-1])
    after = history[-1]
    assert after["average_rank_questions"] == 16 and after["average_rank_passages"] == 16 * 4
    assert after["average_rank"] < before["average_rank"]
    assert after["nll_loss"] < before["nll_loss"]
    assert after["accuracy"] >= before["accuracy"]
    meta = json.loads((out / "dcsr.json").read_text())
    assert meta["step"] == 64 and meta["pooling"] == "mean" and meta["method"] == "dpr"
    assert meta["base_checkpoint"] == str(tiny_bert)
    # The saved model is the trained one: its dev metrics are those of the last validation, run
    # at the precision training validated in (`amp: auto` is bf16 on a CPU with AMX or AVX-512
    # BF16, where an fp32 evaluation differs by bf16's rounding, ~1e-5 here).
    tok2, model2, _ = load_biencoder(out)
    again = evaluate(model2, tok2, read_biencoder(dev_json), s, amp_dtype=_amp_dtype(s["amp"], torch.device("cpu"))[0])
    assert again["average_rank"] == pytest.approx(after["average_rank"])
    assert again["nll_loss"] == pytest.approx(after["nll_loss"], abs=1e-5)


def test_a_warm_up_as_long_as_the_run_is_said(tmp_path, tiny_bert, data):
    """DPR's 1,237 warm-up steps on a small training set (WebQuestions, CuratedTREC at the paper's
    40 epochs) never reach the peak learning rate: the log says so, and how far it rises."""
    train_json, dev_json = data
    messages = []
    summary = train({**SMALL, "epochs": 1, "warmup_steps": 32}, train_json, dev_json, str(tiny_bert),
                    tmp_path / "out", tmp_path / "ck", log=messages.append)
    assert summary["steps"] == 8
    said = [m for m in messages if "warm-up (32 steps) is as long as the whole run (8 steps)" in m]
    assert len(said) == 1 and "rises to 25% of learning_rate" in said[0], messages


def test_records_without_a_positive_are_left_out_and_counted_as_dpr_does(tmp_path, tiny_bert, data):
    """DPR's JsonQADataset keeps only records with a positive passage (its TriviaQA training file
    holds many without); so does training here, and the log says how many it left out. Eight
    such records added to the 32 train as the 32 alone: the same steps, the same model."""
    train_json, dev_json = data
    records = json.loads(train_json.read_text())
    padded = tmp_path / "padded.json"
    empty = [{**r, "question": f"unfound {i}?", "positive_ctxs": []} for i, r in enumerate(records[:8])]
    padded.write_text(json.dumps(records[:5] + empty + records[5:]))
    settings = {**SMALL, "epochs": 1}
    messages = []
    a = train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "a", tmp_path / "ca", log=lambda m: None)
    b = train(settings, padded, dev_json, str(tiny_bert), tmp_path / "b", tmp_path / "cb", log=messages.append)
    assert a["steps"] == b["steps"] == 8
    assert [m for m in messages if "8 of 40 records have no positive passage and are left out" in m]
    digests = [json.loads((tmp_path / m / "dcsr.json").read_text())["weights_sha256"] for m in ("a", "b")]
    assert digests[0] == digests[1] and len(digests[0]) == 2
    none = tmp_path / "none.json"
    none.write_text(json.dumps(empty))
    with pytest.raises(InputError, match=r"none of its 8 records has a positive passage"):
        train(settings, none, dev_json, str(tiny_bert), tmp_path / "c", tmp_path / "cc", log=lambda m: None)


def test_one_training_set_is_a_permutation_and_several_give_one_set_per_global_batch():
    """One training set: the epoch's order is the permutation it always was (no pin moves). Several
    (a Multi file's records name theirs), as DPR's MultiSetDataIterator: every global batch holds
    one set's records, each set's last partial batch is dropped, the sets' batches are interleaved,
    and the order is the same in every process (a function of the seed and the epoch)."""
    from dcsr.training.loop import _epoch_order, _epoch_steps, _sources

    assert (_epoch_order(50, 7, 3) == np.random.default_rng([7, 3]).permutation(50)).all()
    records = [{"training_set": "0:nq"}] * 37 + [{"training_set": "1:squad"}] * 21 + [{"training_set": "2:trivia"}] * 9
    sources = _sources(records)
    assert _sources(records[:37]) is None and _sources([{}, {}]) is None
    order = _epoch_order(len(records), 7, 3, sources, global_bs=8)
    assert _epoch_steps(len(records), sources, 8) == len(order) // 8 == 4 + 2 + 1
    batches = order.reshape(-1, 8)
    labels = [{sources[i] for i in b} for b in batches]
    assert all(len(x) == 1 for x in labels)
    assert sorted(next(iter(x)) for x in labels) == ["0:nq"] * 4 + ["1:squad"] * 2 + ["2:trivia"]
    assert len(set(order.tolist())) == len(order)  # no record twice
    assert [next(iter(x)) for x in labels] != sorted(next(iter(x)) for x in labels)  # interleaved, not set by set
    assert (_epoch_order(len(records), 7, 3, sources, 8) == order).all()
    assert not (_epoch_order(len(records), 7, 4, sources, 8) == order).all()


def test_a_multi_file_trains_per_dataset_or_mixed_as_dprs_paper(tmp_path, tiny_bert, data):
    """A Multi training file (its records name their set): per_dataset (the default, DCSR's code
    and DPR's later MultiSetDataIterator) makes each global batch one set's, each set's partial
    batch dropped (18 and 14 records in batches of 4: 4 + 3 steps); mixed (the code of DPR's
    paper: every file in one shuffled pool) one permutation of all 32 (8 steps)."""
    from dcsr.data.formats import SOURCE_KEY

    train_json, dev_json = data
    records = json.loads(train_json.read_text())
    multi = tmp_path / "multi.json"
    multi.write_text(json.dumps([{**r, SOURCE_KEY: "0:a" if i < 18 else "1:b"} for i, r in enumerate(records)]))
    said = {}
    for mode in ("per_dataset", "mixed"):
        said[mode] = []
        summary = train({**SMALL, "epochs": 1, "multiset_batches": mode}, multi, dev_json, str(tiny_bert),
                        tmp_path / mode, tmp_path / f"ck-{mode}", log=said[mode].append)
        assert summary["steps"] == {"per_dataset": 7, "mixed": 8}[mode]
    assert any("2 training sets (0:a, 1:b): each global batch is one set's" in m for m in said["per_dataset"])
    assert any("2 training sets (0:a, 1:b): one shuffled pool" in m for m in said["mixed"])


def test_average_rank_from_its_start_epoch(tmp_path, tiny_bert, data):
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 3, "val_av_rank_start_epoch": 1, "max_steps": 0}
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out", tmp_path / "ck", log=lambda m: None)
    history = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert [h["average_rank"] is None for h in history] == [True, False, False]
    assert [h["average_rank_passages"] for h in history] == [0, 16 * 4, 16 * 4]
    # evaluate() itself: average_rank=False encodes no ranking passages
    s = validate_settings(SMALL)
    tokenizer, model = build_biencoder(str(tiny_bert), "cls", 0.0)
    off = evaluate(model, tokenizer, read_biencoder(dev_json), s, average_rank=False)
    on = evaluate(model, tokenizer, read_biencoder(dev_json), s)
    assert off["average_rank"] is None and off["nll_loss"] == pytest.approx(on["nll_loss"])
    assert on["average_rank"] >= 0


def test_the_best_validation_is_dprs():
    """DPR's train_dense_encoder: NLL before val_av_rank_start_epoch, the average rank from it on,
    the best reset there; the first of equals."""
    from dcsr.training.checkpoint_state import best_validation

    history = [{"epoch": 0, "nll_loss": 0.5, "average_rank": None}, {"epoch": 1, "nll_loss": 0.9, "average_rank": 4.0},
               {"epoch": 2, "nll_loss": 0.1, "average_rank": 3.0}, {"epoch": 3, "nll_loss": 0.2, "average_rank": 3.0}]
    assert best_validation(history, 1) == 2
    assert best_validation(history, 3) == 3  # the reset: epoch 2's NLL 0.1 does not count
    assert best_validation(history, 9) == 2  # never reached: the lowest NLL
    assert best_validation(history[:2], 9) == 0 and best_validation([], 0) is None
    # a NaN is never the best (DPR's `<` never takes one), first or not; NaN ranks only: the best NLL's stays
    nan = float("nan")
    with_nan = [{**history[0], "nll_loss": nan}, *history[1:3], {**history[3], "average_rank": nan}]
    assert best_validation(with_nan, 9) == 2 and best_validation([{**history[1], "average_rank": nan}] + history[2:], 1) == 1
    assert best_validation([history[0], {**history[1], "average_rank": nan}], 1) == 0
    assert best_validation([{**history[0], "nll_loss": nan}], 9) is None


def test_keeping_the_best_encoders_follows_no_link_and_names_a_checkpoint_without_them(tmp_path):
    from dcsr.training.checkpoint_state import keep_best

    files = ("question_encoder", "passage_encoder", "dcsr.json")
    previous = tmp_path / "last"
    for sub in files[:2]:
        (previous / sub).mkdir(parents=True)
        (previous / sub / "model.safetensors").write_bytes(b"w" + sub.encode())
    (previous / "dcsr.json").write_text(json.dumps({"step": 5}))
    keep_best(tmp_path / "new" / "best", previous, 5, files)
    assert (tmp_path / "new" / "best" / "passage_encoder" / "model.safetensors").read_bytes() == b"wpassage_encoder"
    with pytest.raises(InputError, match="no encoders of step 6"):
        keep_best(tmp_path / "new2" / "best", previous, 6, files)
    (previous / "best").symlink_to(previous)  # a planted best/ that leads elsewhere
    with pytest.raises(InputError, match="holds a link"):
        keep_best(tmp_path / "new4" / "best", previous, 5, files)
    (previous / "best").unlink()
    secret = tmp_path / "secret"
    secret.write_text("not the checkpoint's")
    (previous / "question_encoder" / "model.safetensors").unlink()
    (previous / "question_encoder" / "model.safetensors").symlink_to(secret)
    with pytest.raises(InputError, match="holds a link"):
        keep_best(tmp_path / "new3" / "best", previous, 5, files)


def test_keeping_the_best_encoders_reads_dcsr_json_strictly(tmp_path):
    """best/dcsr.json of a checkpoint is read as a saved model's is: '[1]' was an AttributeError,
    malformed JSON or bytes that are not UTF-8 a traceback; each is an InputError naming it."""
    from dcsr.training.checkpoint_state import keep_best

    files = ("question_encoder", "passage_encoder", "dcsr.json")
    previous = tmp_path / "last"
    for sub in files[:2]:
        (previous / "best" / sub).mkdir(parents=True)
    meta = previous / "best" / "dcsr.json"
    for content, found in [(b"[1]", "expected a JSON object, found an array"),
                           (b'{"step": 5', "malformed JSON: Expecting ',' delimiter"),
                           (b'{"step": "\xff"}', "not UTF-8 text (byte 0xff"),
                           (b'{"step": 5, "step": 6}', "duplicate key 'step'"),
                           (b'{"step": "5"}', "must be an integer >= 0, found '5'")]:
        meta.write_bytes(content)
        with pytest.raises(InputError) as e:
            keep_best(tmp_path / "new" / "best", previous, 5, files)
        assert e.value.where.startswith(str(meta)) and found in e.value.problem
    assert not (tmp_path / "new").exists()


def _worse_with_training(tmp_path):
    """A dev set whose positives are their neighbours' passages: training on the right pairs moves
    its average rank away from the last validation's, so the best is often an earlier one."""
    wrong = make_records(16)
    for i, record in enumerate(wrong):
        record["positive_ctxs"] = make_records(16)[(i + 1) % 16]["positive_ctxs"]
    dev_json = tmp_path / "wrong-dev.json"
    dev_json.write_text(json.dumps(wrong))
    return dev_json


def _scripted_validations(monkeypatch, ranks):
    """The trainer's validations give ``ranks`` in turn (average rank; NLL 1.0), and keep the
    weights each one saw: a best that does not hang on how this CPU rounds."""
    import dcsr.training.loop as loop

    ranks, seen = iter(ranks), []

    def scripted(model, *args, **kwargs):
        seen.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return {"nll_loss": 1.0, "accuracy": 0.5, "average_rank": next(ranks), "average_rank_questions": 16,
                "average_rank_passages": 64}

    monkeypatch.setattr(loop, "evaluate", scripted)
    return seen


def test_model_from_best_writes_the_best_validations_encoders(tmp_path, tiny_bert, data, monkeypatch):
    """``model_from: best`` writes the encoders of DPR's best validation (step 16 of 32: the second
    of four, whose rank the fourth only ties), kept through later checkpoints (every 3 steps,
    mid-epoch) and through a rerun that resumes the finished run; ``last`` writes step 32's."""
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 4, "val_av_rank_start_epoch": 0, "checkpoint_every_steps": 3, "model_from": "best"}
    seen = _scripted_validations(monkeypatch, [5.0, 2.0, 3.0, 2.0])
    messages = []
    out = tmp_path / "out"
    train(settings, train_json, dev_json, str(tiny_bert), out, tmp_path / "ck", log=messages.append)
    assert [h["step"] for h in json.loads((out / "validation.json").read_text())] == [8, 16, 24, 32]
    meta = json.loads((out / "dcsr.json").read_text())
    assert (meta["step"], meta["epoch"]) == (16, 2) and meta["settings"]["model_from"] == "best"
    assert any("the encoders of step 16 (model_from: best" in m for m in messages)
    assert len(seen) == 4 and _same_weights(_weights(out), seen[1])
    assert not _same_weights(seen[1], seen[3])  # training went on after the best
    assert json.loads((tmp_path / "ck" / "last" / "best" / "dcsr.json").read_text())["step"] == 16
    # a rerun resumes the finished run (no validation left) and writes the same
    shutil.rmtree(out)
    messages.clear()
    train(settings, train_json, dev_json, str(tiny_bert), out, tmp_path / "ck", log=messages.append)
    assert any("resuming from step 32" in m for m in messages), messages
    assert _same_weights(_weights(out), seen[1])
    shutil.rmtree(out)  # a checkpoint that lost them is named, and nothing is written
    shutil.rmtree(tmp_path / "ck" / "last" / "best")
    with pytest.raises(InputError, match="holds no encoders of step 16"):
        train(settings, train_json, dev_json, str(tiny_bert), out, tmp_path / "ck", log=lambda m: None)
    assert not out.exists()
    # model_from: last (the default) writes the end of training
    seen = _scripted_validations(monkeypatch, [5.0, 2.0, 3.0, 2.0])
    train({**settings, "model_from": "last"}, train_json, dev_json, str(tiny_bert), tmp_path / "last",
          tmp_path / "ck-last", log=lambda m: None)
    assert json.loads((tmp_path / "last" / "dcsr.json").read_text())["step"] == 32
    assert _same_weights(_weights(tmp_path / "last"), seen[3]) and not (tmp_path / "ck-last" / "last" / "best").exists()


def test_validation_encodes_once_when_the_rank_reads_the_nll_samples(tmp_path, tiny_bert, data, monkeypatch):
    """With as many negatives for the average rank as for training (here: 1 hard, 0 other), the
    rank's samples are the NLL's: one encoding serves both, with the numbers of two encodings."""
    from dcsr.training import validation

    _, dev_json = data
    s = validate_settings({**SMALL, "hard_negatives": 1, "other_negatives": 0, "val_av_rank_hard_neg": 1,
                           "val_av_rank_other_neg": 0})
    tokenizer, model = build_biencoder(str(tiny_bert), "cls", 0.0)
    calls = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda q, p: calls.append(p["input_ids"].shape[0]) or forward(q, p))
    once = evaluate(model, tokenizer, read_biencoder(dev_json), s)
    encoded_once = sum(calls)
    calls.clear()
    monkeypatch.setattr(validation, "_same", lambda a, b: False)
    twice = evaluate(model, tokenizer, read_biencoder(dev_json), s)
    assert once == twice and once["average_rank_passages"] == 16 * 2
    assert once["candidates_per_question"] == 2.0  # a positive and a hard negative each, as training
    assert encoded_once == 16 * 2 and sum(calls) == 2 * 16 * 2
    # with more negatives for the rank than for training, the samples differ: two encodings
    calls.clear()
    monkeypatch.undo()
    monkeypatch.setattr(model, "forward", lambda q, p: calls.append(p["input_ids"].shape[0]) or forward(q, p))
    more = evaluate(model, tokenizer, read_biencoder(dev_json), validate_settings({**SMALL, "hard_negatives": 1}))
    assert more["average_rank_passages"] == 16 * 4 and sum(calls) == 16 * 2 + 16 * 4


def test_the_average_rank_on_dprs_gpus_ranks_each_shard_among_its_own_passages(tiny_bert, data):
    """``val_av_rank_shards: S`` is DPR's average rank on S GPUs: the questions cut as DPR's
    ShardedDataIterator (ceil(n / S) each, the last shorter), each question's positive ranked among
    its own shard's passages only. So the mean over 3 shards is the question-weighted mean of the
    three shards validated alone, and a question ranks no lower in a shard than in the pool."""
    from dcsr.training.validation import rank_shards

    _, dev_json = data
    records = read_biencoder(dev_json)
    tokenizer, model = build_biencoder(str(tiny_bert), "cls", 0.0)
    s = validate_settings(SMALL)  # 1 + 2 hard + 1 other passages a question
    pooled = evaluate(model, tokenizer, records, s)
    three = evaluate(model, tokenizer, records, {**s, "val_av_rank_shards": 3})
    alone = [evaluate(model, tokenizer, records[a:b], s) for a, b in ((0, 6), (6, 12), (12, 16))]
    assert three["average_rank"] == pytest.approx(sum(r["average_rank"] * r["questions"] for r in alone) / 16)
    each = evaluate(model, tokenizer, records, {**s, "val_av_rank_shards": 16})
    assert pooled["average_rank"] >= three["average_rank"] >= each["average_rank"]
    assert pooled["average_rank"] > each["average_rank"]  # the pool outranks some positive
    assert (pooled["average_rank_shards"], three["average_rank_shards"]) == (1, 3)
    assert {k: v for k, v in three.items() if k not in ("average_rank", "average_rank_shards")} == \
        {k: v for k, v in pooled.items() if k not in ("average_rank", "average_rank_shards")}
    # DPR's cut: 10 questions on 8 GPUs are 5 shards of 2 (three GPUs get none)
    starts = torch.arange(10) * 4
    assert rank_shards(starts, 40, 8) == [((q, q + 2), (4 * q, 4 * q + 8)) for q in range(0, 10, 2)]
    assert rank_shards(starts, 40, 3) == [((0, 4), (0, 16)), ((4, 8), (16, 32)), ((8, 10), (32, 40))]
    with pytest.raises(ValueError, match="first of its own passages"):
        rank_shards(torch.tensor([0, 4, 3]), 12, 2)


def _weights(model_dir):
    """Every tensor of a saved bi-encoder, by name."""
    _, model, _ = load_biencoder(model_dir)
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_tied_encoders_train_one_set_of_weights(tmp_path, tiny_bert, data):
    """tie_encoders: questions and passages go through one encoder. It trains (it moves from
    the init), the saved question and passage encoders are the same weights, and a resumed
    run shares them again."""
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 2, "tie_encoders": True, "checkpoint_every_steps": 4, "max_steps": 6}
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out", tmp_path / "ck", log=lambda m: None)
    # max_steps stops inside the first epoch (8 steps): its one validation says how far it got
    history = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert [(h["epoch"], h["epochs_trained"], h["step"]) for h in history] == [(0, 0.75, 6)]
    _, model, meta = load_biencoder(tmp_path / "out")
    q, p = model.question_model.state_dict(), model.passage_model.state_dict()
    assert _same_weights(q, p) and meta["settings"]["tie_encoders"] is True
    _, untied = build_biencoder(str(tiny_bert))
    assert not _same_weights(q, untied.question_model.state_dict())
    # resumed from the checkpoint of step 4: the one encoder again, and the same end as in one go
    s = validate_settings({**settings, "max_steps": 6})
    t = Trainer(s, train_json, dev_json, str(tiny_bert), tmp_path / "out2", tmp_path / "ck", lambda m: None,
                SampleBuilder, DistContext(device=torch.device("cpu")))
    t.setup()
    assert t.model.passage_model is t.model.question_model
    # untied (the default): two encoders that part ways
    train({**settings, "tie_encoders": False}, train_json, dev_json, str(tiny_bert), tmp_path / "out3", tmp_path / "ck3",
          log=lambda m: None)
    _, two, _ = load_biencoder(tmp_path / "out3")
    assert not _same_weights(two.question_model.state_dict(), two.passage_model.state_dict())


def test_a_checkpoint_older_than_epochs_trained_gets_it_on_resume(tmp_path, tiny_bert, data):
    """A checkpoint written before validations recorded the epochs trained (its run resumed when
    the training code changed): each is step / steps a epoch, so Figure 4 draws a run stopped
    inside an epoch where it stopped (1.5 here), not at the epoch's end (2)."""
    from dcsr.training.checkpoint_state import LAST, STATE_FILE

    train_json, dev_json = data
    settings = {**SMALL, "epochs": 2, "max_steps": 12}  # 8 steps a epoch
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out", tmp_path / "ck", log=lambda m: None)
    state_path = tmp_path / "ck" / LAST / STATE_FILE
    state = torch.load(state_path, weights_only=False)
    assert [v["epochs_trained"] for v in state["validation"]] == [1.0, 1.5]
    state["validation"] = [{k: v for k, v in h.items() if k != "epochs_trained"} for h in state["validation"]]
    torch.save(state, state_path)
    said = []
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out2", tmp_path / "ck", log=said.append)
    assert any("resum" in m for m in said), said
    history = json.loads((tmp_path / "out2" / "validation.json").read_text())
    assert [(h["epoch"], h["epochs_trained"], h["step"]) for h in history] == [(0, 1.0, 8), (1, 1.5, 12)]


def test_a_checkpoint_of_other_code_is_not_resumed(tmp_path, tiny_bert, data):
    """Snakemake reruns a training job when its code changes (the rule's code param); a finished
    checkpoint of the old code must not then be resumed and written back as the new code's
    model: the code's digest is part of the fingerprint. The same digest resumes."""
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 1, "max_steps": 4}

    def run(out, code):
        said = []
        train(settings, train_json, dev_json, str(tiny_bert), tmp_path / out, tmp_path / "ck", log=said.append,
              code=code)
        return said

    run("out1", "digest-a")
    same = run("out2", "digest-a")
    assert any(m.startswith("resuming") for m in same), same
    other = run("out3", "digest-b")
    assert not any(m.startswith("resuming") for m in other)
    assert any("code 'digest-a' -> 'digest-b'" in m for m in other), other


def test_tied_encoders_need_one_init():
    from dcsr.models.biencoder import tie_encoders

    with pytest.raises(InputError, match="tie_encoders: one encoder cannot start from two checkpoints"):
        tie_encoders(None, {"question": "a", "passage": "b"})


def test_the_trainer_steps_by_name_make_the_model_train_makes(tmp_path, tiny_bert, data):
    """Driving Trainer's named steps by hand (setup, resume, step, validate, save, finish) gives
    the very weights of train(), which runs the same steps in its loop."""
    train_json, dev_json = data
    settings = {**SMALL, "max_steps": 3}
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "loop", tmp_path / "ck-loop", log=lambda m: None)

    s = validate_settings(settings)
    assert isinstance(s, Settings) and s.batch_size == s["batch_size"] == SMALL["batch_size"]
    with pytest.raises(AttributeError, match="no setting 'batch_sise'"):
        s.batch_sise
    ctx, _ = setup_distributed()
    trainer = Trainer(s, train_json, dev_json, str(tiny_bert), tmp_path / "by-hand", tmp_path / "ck-hand",
                      lambda m: None, SampleBuilder, ctx)
    trainer.setup()
    trainer.resume()
    assert (trainer.step_no, trainer.total_steps) == (0, 3)
    losses = [trainer.step(batch)[0] for batch in trainer.epoch_batches()]  # 3 of the epoch's 8: max_steps
    assert trainer.step_no == 3 and all(math.isfinite(v) for v in losses)
    trainer.validate()
    trainer.save()
    trainer.log_fh.close()
    summary = trainer.finish()
    assert summary["steps"] == 3 and summary["validation"]["step"] == 3
    assert (tmp_path / "ck-hand" / "last" / "trainer_state.pt").is_file()
    assert _same_weights(_weights(tmp_path / "by-hand"), _weights(tmp_path / "loop"))


def test_resume_after_kill(tmp_path, repo, tiny_bert, data):
    """Killed mid-run and resumed, training ends with exactly the weights of a run that was
    never interrupted: bitwise, on CPU with the same seed (dropout on: its RNG state is part of
    the checkpoint). Resuming from anything but the checkpoint (the base weights, another
    step's optimizer state) gives other weights and fails this test."""
    train_json, dev_json = data
    out, ck = tmp_path / "out", tmp_path / "ck"
    planned = 60
    settings = {**SMALL, "epochs": 100, "max_steps": planned, "checkpoint_every_steps": 3, "dropout": 0.1}
    cmd = [sys.executable, str(repo / "workflow/scripts/train_biencoder.py"), "--train", str(train_json), "--dev",
           str(dev_json), "--init", str(tiny_bert), "--output", str(out), "--checkpoint-dir", str(ck),
           "--settings", json.dumps(settings)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (ck / "last" / "trainer_state.pt").exists():
            assert proc.poll() is None, "training ended before writing a checkpoint"
            assert time.time() < deadline
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not out.exists(), "the run finished before it could be killed"

    done = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = [line for line in done.stderr.splitlines() if "resuming from step" in line]
    assert resumed, done.stderr[-3000:]
    assert 0 < int(resumed[0].split("resuming from step ")[1].split()[0]) < planned
    log = _log(out / "train_log.jsonl")
    assert [r["step"] for r in log] == list(range(1, planned + 1))
    assert json.loads((out / "dcsr.json").read_text())["step"] == planned
    assert [p.name for p in ck.iterdir() if p.name.startswith(".")] == []

    # the same run, never interrupted, in this process
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "ref", tmp_path / "ck-ref", log=lambda m: None)
    assert _same_weights(_weights(out), _weights(tmp_path / "ref"))
    ref_log = _log(tmp_path / "ref" / "train_log.jsonl")
    assert [r["loss"] for r in log] == [r["loss"] for r in ref_log]


def test_changed_training_data_is_not_resumed(tmp_path, tiny_bert, data, monkeypatch):
    """A checkpoint of other training data is set aside, not resumed: the run trains afresh,
    says which input changed, and ends with the model a fresh run on the new data gives."""
    from dcsr.fsutil import RESULTS_ENV
    from dcsr.training.fingerprint import cache_path

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "results"))
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 2}
    first = []
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out1", tmp_path / "ck", log=first.append)
    assert any(m.startswith("starting from") for m in first)
    old_sha = json.loads((tmp_path / "ck" / "last" / "fingerprint.json").read_text())["training data"]["sha256"]
    # the same inputs again: the finished checkpoint is resumed (and nothing is trained)
    again = []
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out2", tmp_path / "ck", log=again.append)
    assert any(m.startswith("resuming from step 16") for m in again), again
    assert _same_weights(_weights(tmp_path / "out1"), _weights(tmp_path / "out2"))

    train_json.write_text(json.dumps(make_records(40)[8:]))  # other records, same count
    messages = []
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out3", tmp_path / "ck", log=messages.append)
    assert not any("resuming" in m for m in messages), messages
    aside = [m for m in messages if "set aside" in m]
    new_sha = json.loads((tmp_path / "ck" / "last" / "fingerprint.json").read_text())["training data"]["sha256"]
    stale = list((tmp_path / "ck" / "stale").iterdir())
    assert len(aside) == 1 and len(stale) == 1
    assert aside[0] == (f"checkpoint {tmp_path / 'ck' / 'last'} set aside: it does not match this run "
                        f"(training data changed (sha256 {old_sha[:12]} -> {new_sha[:12]})); moved it to "
                        f"{stale[0]}, training from the start")
    # the old checkpoint is kept whole, and the new model is a fresh run's on the new data
    assert (stale[0] / "trainer_state.pt").is_file()
    new = _weights(tmp_path / "out3")
    assert not _same_weights(new, _weights(tmp_path / "out1"))
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out4", tmp_path / "ck-fresh", log=lambda m: None)
    assert _same_weights(new, _weights(tmp_path / "out4"))
    # a changed setting (one that determines the model) is named too
    messages = []
    train({**settings, "weight_decay": 0.01}, train_json, dev_json, str(tiny_bert), tmp_path / "out5",
          tmp_path / "ck", log=messages.append)
    assert any("(settings.weight_decay 0.0 -> 0.01)" in m for m in messages), messages
    # the file hash is cached under results:, keyed by the resolved path, size and mtime
    cache = json.loads(cache_path(train_json).read_text())
    assert cache_path(train_json).parent == tmp_path / "results" / ".cache" / "digests"
    assert cache["sha256"] == new_sha and cache["stamp"]["size"] == train_json.stat().st_size


def train_in_two_processes(repo, tiny_bert, train_json, dev_json, output, checkpoint_dir, settings):
    """The training script under torchrun with two processes (gloo on CPU); it must succeed."""
    two = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(repo / "workflow/scripts/train_biencoder.py"), "--train", str(train_json), "--dev", str(dev_json),
         "--init", str(tiny_bert), "--output", str(output), "--checkpoint-dir", str(checkpoint_dir),
         "--settings", json.dumps(settings)],
        env=_env(), capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert "2 process(es)" in two.stderr
    return two


def test_two_processes_match_one(tmp_path, repo, tiny_bert, data):
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 2, "max_steps": 6}
    # Two processes with batch_size 4 ...
    train_in_two_processes(repo, tiny_bert, train_json, dev_json, tmp_path / "two", tmp_path / "ck2", settings)
    # ... train like one process with batch_size 8.
    train({**settings, "batch_size": 8}, train_json, dev_json, str(tiny_bert), tmp_path / "one", tmp_path / "ck1",
          log=lambda m: None)
    loss_two = [r["loss"] for r in _log(tmp_path / "two" / "train_log.jsonl")]
    loss_one = [r["loss"] for r in _log(tmp_path / "one" / "train_log.jsonl")]
    assert len(loss_one) == len(loss_two) == 6
    assert loss_two == pytest.approx(loss_one, abs=1e-4)
    assert len(set(round(x, 3) for x in loss_one)) > 1  # the model did change
    v_two = json.loads((tmp_path / "two" / "validation.json").read_text())[-1]
    v_one = json.loads((tmp_path / "one" / "validation.json").read_text())[-1]
    assert v_two["nll_loss"] == pytest.approx(v_one["nll_loss"], abs=1e-4)
    assert v_two["average_rank"] == pytest.approx(v_one["average_rank"])


def test_two_processes_keep_and_write_the_best_validation(tmp_path, repo, tiny_bert, data):
    """``model_from: best`` under torchrun: rank 0 writes the encoders of the best of its
    validations (DPR's rule on its own validation.json), which validate to that entry's numbers."""
    from dcsr.training.checkpoint_state import best_validation

    train_json, _ = data
    dev_json = _worse_with_training(tmp_path)
    settings = {**SMALL, "batch_size": 2, "epochs": 3, "pooling": "mean", "val_av_rank_start_epoch": 0,
                "model_from": "best"}
    train_in_two_processes(repo, tiny_bert, train_json, dev_json, tmp_path / "two", tmp_path / "ck2", settings)
    history = json.loads((tmp_path / "two" / "validation.json").read_text())
    assert [h["step"] for h in history] == [8, 16, 24]
    best = history[best_validation(history, 0)]
    assert json.loads((tmp_path / "two" / "dcsr.json").read_text())["step"] == best["step"]
    assert (tmp_path / "ck2" / "last" / "best").exists() == (best["step"] != 24)
    s = validate_settings(settings)
    tokenizer, model, _ = load_biencoder(tmp_path / "two")
    again = evaluate(model, tokenizer, read_biencoder(dev_json), {**s, "dev_batch_size": 4},
                     amp_dtype=_amp_dtype(s["amp"], torch.device("cpu"))[0])
    assert again["average_rank"] == pytest.approx(best["average_rank"])
    assert again["nll_loss"] == pytest.approx(best["nll_loss"], abs=1e-4)


def test_export_untrained(tmp_path, repo, tiny_bert):
    out = tmp_path / "untrained"
    proc = subprocess.run(
        [sys.executable, str(repo / "workflow/scripts/export_encoder.py"), "--init", str(tiny_bert), "--output",
         str(out), "--settings", '{"pooling": "mean", "passage_max_length": 128}'],
        env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    tokenizer, model, meta = load_biencoder(out)
    assert meta["method"] == "dpr" and meta["trained"] is False and meta["step"] == 0 and meta["passage_max_length"] == 128
    assert model.pooling == "mean"
    _, base = build_biencoder(str(tiny_bert))
    for a, b in zip(model.passage_model.state_dict().values(), base.passage_model.state_dict().values()):
        assert torch.equal(a, b)
    bad = subprocess.run(
        [sys.executable, str(repo / "workflow/scripts/export_encoder.py"), "--init", str(tiny_bert), "--output",
         str(tmp_path / "bad"), "--settings", '{"polling": "mean"}'],
        env=_env(), capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "polling" in bad.stderr


def test_a_truncated_trainer_state_is_set_aside_not_failed_on_every_rerun(tmp_path, tiny_bert, data):
    """A checkpoint whose trainer_state.pt was cut short (a full disk) is set aside like a
    mismatched one, with the reason, and the run trains from the start."""
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 1}
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out1", tmp_path / "ck", log=lambda m: None)
    state = tmp_path / "ck" / "last" / "trainer_state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])
    messages = []
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out2", tmp_path / "ck", log=messages.append)
    aside = [m for m in messages if "set aside" in m]
    assert len(aside) == 1 and "trainer_state.pt cannot be read" in aside[0], messages
    assert any(m.startswith("starting from") for m in messages)
    assert _same_weights(_weights(tmp_path / "out1"), _weights(tmp_path / "out2"))


class _Planted:
    """What a planted trainer_state.pt could hold: unpickling it calls ``open(path, "w")``,
    which creates a file (any other call would run as easily)."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def test_a_planted_trainer_state_is_refused_not_unpickled(tmp_path, tiny_bert, data):
    """A trainer_state.pt holding more than tensors and plain values (a pickle that would run
    code when loaded) is refused at resume with a message naming it; nothing of it runs."""
    train_json, dev_json = data
    settings = {**SMALL, "epochs": 1}
    train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out1", tmp_path / "ck", log=lambda m: None)
    state = tmp_path / "ck" / "last" / "trainer_state.pt"
    planted = tmp_path / "planted-ran"
    torch.save({"optimizer": _Planted(planted), "step": 8}, state)
    with pytest.raises(InputError) as e:
        train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out2", tmp_path / "ck", log=lambda m: None)
    assert not planted.exists(), "the planted pickle ran"
    assert e.value.where == str(state)
    assert "(io.open)" in e.value.problem and "not loaded" in e.value.problem
    assert not (tmp_path / "out2").exists()


class _Crafted:
    """A value whose unpickling calls NumPy's array rebuilder, which loading allows (the random
    state of older checkpoints), with arguments of the file's choosing."""

    def __init__(self, *args):
        self.args = args

    def __reduce__(self):
        from dcsr.training.checkpoint_state import _OLDER_STATE_GLOBALS

        return _OLDER_STATE_GLOBALS[-1], self.args


def test_a_crafted_or_foreign_trainer_state_is_refused_naming_it(tmp_path):
    """The allowed NumPy calls given a shape or dtype they fail on (a TypeError, a ValueError; a
    MemoryError for a huge shape) were a traceback at resume, and a state that is not the trainer's
    dict (a list, a key missing or of another type) a KeyError or TypeError later: each is the
    "changed or planted" InputError naming the file."""
    from dcsr.training.checkpoint_state import _rng_state, load_trainer_state

    state_file = tmp_path / "last" / "trainer_state.pt"
    state_file.parent.mkdir()
    good = {"optimizer": {}, "scheduler": {}, "scaler": {}, "step": 8, "epoch": 1, "position": 0,
            "rng": [_rng_state()], "validation": [{"step": 8, "epoch": 1}]}
    torch.save(good, state_file)
    assert load_trainer_state(state_file)["step"] == 8
    for state, found in [({**good, "rng": [_Crafted(np.ndarray, ("x",), b"b")]}, "cannot be loaded as a trainer state "
                                                                                 "(TypeError: "),
                         ({**good, "rng": [_Crafted(np.ndarray, (-1,), b"b")]}, "(ValueError: "),
                         ([good], "holds a list, not the dict of a trainer state"),
                         ({k: v for k, v in good.items() if k != "position"}, "whose 'position' is nothing, not an integer"),
                         ({**good, "step": "8"}, "whose 'step' is str, not an integer"),
                         ({**good, "validation": [1]}, "whose 'validation' is list, not a list of dicts")]:
        torch.save(state, state_file)
        with pytest.raises(InputError) as e:
            load_trainer_state(state_file)
        assert e.value.where == str(state_file) and found in e.value.problem
        assert "so the file was changed or planted; delete the checkpoint folder" in e.value.problem


def test_the_saved_random_state_restores_every_stream_exactly(tmp_path):
    """The random state a checkpoint keeps (Python's, NumPy's, torch's) loads as plain values
    (weights_only) and puts every stream back where it was, cached Gaussians included."""
    import random

    import numpy as np

    from dcsr.training.checkpoint_state import _rng_state, _set_rng_state, load_trainer_state

    random.gauss(0, 1)  # Python and NumPy cache the second of a pair of Gaussians
    np.random.standard_normal()

    def draw():
        return (random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.standard_normal(),
                torch.rand(3).tolist())

    torch.save({"rng": [_rng_state()]}, tmp_path / "trainer_state.pt")
    expected = draw()
    state = load_trainer_state(tmp_path / "trainer_state.pt", fields=("rng",))
    _set_rng_state(state["rng"][0])
    assert draw() == expected
    # a checkpoint written before the state was stored as plain values (NumPy's as an array) still resumes
    older = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save({"rng": [older]}, tmp_path / "older.pt")
    expected = draw()
    _set_rng_state(load_trainer_state(tmp_path / "older.pt", fields=("rng",))["rng"][0])
    assert draw() == expected


def test_cuda_random_states_restore_on_the_devices_this_process_sees(monkeypatch):
    """A checkpoint of a process that saw 2 GPUs, resumed where 1 is visible, restores the one
    (set_rng_state_all raised IndexError) and says the run is not bit for bit an uninterrupted
    one; with more devices than saved, the saved ones are restored, and it says so too."""
    from dcsr.training.checkpoint_state import _rng_state, _set_rng_state

    visible, restored = {"n": 1}, []

    def set_rng_state(new_state, device="cuda"):
        index = device if isinstance(device, int) else torch.device(device).index or 0
        if index >= visible["n"]:
            raise IndexError("list index out of range")
        restored.append((index, int(new_state[0])))

    saved = {**_rng_state(), "cuda": [torch.tensor([1], dtype=torch.uint8), torch.tensor([2], dtype=torch.uint8)]}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible["n"])
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_rng_state)
    monkeypatch.setattr(torch.cuda.random, "set_rng_state", set_rng_state)  # what set_rng_state_all calls
    note = _set_rng_state(saved)
    assert restored == [(0, 1)]
    assert "2 CUDA devices" in note and "1 is visible" in note and "not bit for bit" in note
    visible["n"], restored[:] = 3, []
    note = _set_rng_state(saved)
    assert restored == [(0, 1), (1, 2)] and "3 are visible" in note
    visible["n"], restored[:] = 2, []
    assert _set_rng_state(saved) is None and restored == [(0, 1), (1, 2)]


@pytest.mark.parametrize("omp, affinity, local, expected", [
    ("16", 64, "8", 2),  # Snakemake's threads for the job, over torchrun's 8 processes
    ("3", 64, "8", 1),  # never fewer than one
    (None, 12, "4", 3),  # no OMP_NUM_THREADS: the cores the job may run on
])
def test_each_process_of_a_node_takes_its_share_of_the_jobs_threads(monkeypatch, omp, affinity, local, expected):
    """torchrun's processes inherit the job's OMP_NUM_THREADS; each takes job threads //
    LOCAL_WORLD_SIZE (all of them each, 8 processes ran 8x the job's threads), for torch and
    for the processes it starts, and the log says so."""
    import torch.distributed as dist

    for key, value in (("WORLD_SIZE", local), ("RANK", "1"), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", local)):
        monkeypatch.setenv(key, value)
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)  # no process group is started here
    ctx, started = setup_distributed()
    assert (ctx.world, ctx.rank, started) == (int(local), 1, False)
    assert torch.get_num_threads() == expected
    assert os.environ["OMP_NUM_THREADS"] == str(expected)
    job = omp or affinity
    assert ctx.threads.startswith(f"{expected} torch thread(s) per process: the job's {job} (")
    assert ctx.threads.endswith(f"over {local} process(es) on this node")


def test_a_diverging_run_stops_at_the_step_whose_loss_is_not_finite(tmp_path, tiny_bert, data):
    """A learning rate that turns the loss to NaN stops training with an error naming the step
    (it ran on to the end, rc 0, with a model of NaN weights), and writes no model."""
    train_json, dev_json = data
    settings = {**SMALL, "learning_rate": 1e10, "max_steps": 8}
    with pytest.raises(InputError) as e:
        train(settings, train_json, dev_json, str(tiny_bert), tmp_path / "out", tmp_path / "ck", log=lambda m: None)
    assert e.value.where == "training step 2"
    assert re.match(r"the loss is nan at learning rate \d\.\d+e\+09: training diverged", e.value.problem), e.value.problem
    assert not (tmp_path / "out").exists()
    assert [r["step"] for r in _log(tmp_path / "ck" / "train_log.jsonl")] == [1]


def test_steps_the_grad_scaler_skips_are_counted_not_failed(tmp_path, tiny_bert, data, monkeypatch):
    """With a GradScaler (amp fp16, on CUDA), inf gradients are a step it skips while it lowers
    its scale, not an error: the run goes on, and the log counts the skipped steps. Run here on
    CPU in fp32 with a scaler whose first scale overflows the gradients (2^127) for a few steps."""
    import functools

    import dcsr.training.loop as loop

    monkeypatch.setattr(loop, "_amp_dtype", lambda setting, device: (None, True))
    monkeypatch.setattr(torch.amp, "GradScaler", functools.partial(torch.amp.GradScaler, init_scale=2.0 ** 127))
    train_json, dev_json = data
    messages = []
    summary = train({**SMALL, "max_steps": 12, "log_every_steps": 12}, train_json, dev_json, str(tiny_bert),
                    tmp_path / "out", tmp_path / "ck", log=messages.append)
    log = _log(tmp_path / "out" / "train_log.jsonl")
    skipped = [r["step"] for r in log if r["skipped"]]
    assert len(log) == 12 and skipped[:1] == [1] and len(skipped) < 12  # the first step overflows
    assert all(math.isfinite(r["loss"]) for r in log)
    assert summary["skipped_steps"] == len(skipped)
    assert any(f"{len(skipped)} skipped by the GradScaler" in m for m in messages), messages


def test_validation_encodes_a_large_dev_batch_in_passes_with_the_same_numbers(tiny_bert, data, monkeypatch):
    """A dev batch's passages are encoded VAL_PASSAGES_PER_PASS at a time (128 questions with 60
    negatives each would be 7,808 passages in one pass, some 30 GB of activations on a GPU): the
    same vectors in the same rows, so the same NLL, accuracy and average rank."""
    from dcsr.training import validation

    _, dev_json = data
    records = read_biencoder(dev_json)
    tokenizer, model = build_biencoder(str(tiny_bert), "cls", 0.0)
    s = validate_settings(SMALL)  # 4 passages a question in the rank, dev batches of SMALL's batch_size
    calls = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda q, p: calls.append(p["input_ids"].shape[0]) or forward(q, p))
    whole = evaluate(model, tokenizer, records, s)
    assert max(calls) > 6
    calls.clear()
    monkeypatch.setattr(validation, "VAL_PASSAGES_PER_PASS", 6)
    parts = evaluate(model, tokenizer, records, s)
    assert max(calls) <= 6 and sum(calls) == whole["average_rank_passages"] + 16 * 2
    assert parts["average_rank"] == whole["average_rank"] and parts["accuracy"] == whole["accuracy"]
    assert parts["nll_loss"] == pytest.approx(whole["nll_loss"], rel=1e-5)


def test_a_resumed_log_leaves_out_a_line_cut_short(tmp_path):
    from dcsr.training.loop import _log_lines_to

    log = tmp_path / "train_log.jsonl"
    log.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')
    said = []
    assert _log_lines_to(log, 2, said.append) == ['{"step": 1, "loss": 2.0}\n', '{"step": 2, "loss": 1.5}\n']
    assert said == [f"warning: {log}:3 is not a whole JSON line (a write cut short); left out of the log"]


def test_a_cuda_process_group_binds_its_gpu_among_those_it_sees_and_waits_an_hour(monkeypatch):
    """On CUDA, rank r takes GPU LOCAL_RANK modulo the GPUs it sees (a launcher that shows each
    task one GPU: srun --gpus-per-task=1) and the NCCL group waits 60 minutes in a collective,
    not torch's 10, while rank 0 alone writes a checkpoint. (No GPU here: CUDA's calls are
    recorded, and the group is not started.)"""
    import torch.distributed as dist

    from dcsr.training import distributed

    calls = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: calls.setdefault("device", i))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: calls.get("device", 0))
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: calls.update(backend=backend, **kw))
    for key, value in {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(key, value)
    ctx, started = distributed.setup_distributed()
    assert started and ctx.rank == 3 and ctx.device == torch.device("cuda", 0)
    assert calls == {"device": 0, "backend": "nccl", "timeout": distributed.NCCL_TIMEOUT}
    assert distributed.NCCL_TIMEOUT.total_seconds() == 3600
