"""Dense hard-negative mining (DCSR Section 4.5, Tables 3 and 5): a checkpoint's top hits over
its own shard indexes of the corpus, without answers and without positives; a DCSR miner's
negatives name their sentence. Checked against an exhaustive search in NumPy."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from dcsr.data.answers import has_answer
from dcsr.retrieval.embed import embed_corpus_shard, embed_questions
from dcsr.errors import InputError
from dcsr.data.formats import iter_biencoder, passage_texts, read_biencoder, sentence_spans
from dcsr.retrieval.index import index_shard
from dcsr.training.methods import builder_class
from dcsr.retrieval.mining import SENTENCE_SLOTS, first_sentence_per_passage, mine_dense_negatives
from dcsr.data.sentences import split_corpus
from dcsr.fixtures.synth import generate_demo
from dcsr.training.loop import export_untrained

SETTINGS = {"question_max_length": 32, "passage_max_length": 96}


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: one intra-op thread


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_bert):
    """A generated corpus (80 passages, 40 training questions), its sentence table, and an
    untrained DPR and DCSR bi-encoder of the tiny BERT, each embedded and indexed in 2 shards."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("mining")
    generate_demo(root / "data", n_entities=40, train_per_domain=40, log=lambda msg: None)
    corpus = root / "data" / "psgs_w100.tsv"
    split_corpus(corpus, root / "sentences.tsv", progress=False)
    out = {"root": root, "corpus": corpus, "train": root / "data" / "encyclopedia-train.json",
           "sentences": root / "sentences.tsv"}
    for method in ("dpr", "dcsr"):
        model = root / method
        export_untrained(SETTINGS, str(tiny_bert), model, log=lambda msg: None, builder_cls=builder_class(method))
        _spread(model)
        out[method] = model
        out[f"{method}-shards"] = _shards(root / f"{method}-emb", model, corpus, root / "sentences.tsv", 2)
    return out


def _spread(model_dir):
    """Add seeded noise to every weight: a freshly initialised BERT gives nearly the same vector
    for every text (scores within 1e-5), so float rounding, not the miner, would order the hits."""
    from transformers import AutoModel

    from dcsr.models.biencoder import weight_digests

    gen = torch.Generator().manual_seed(0)
    for side in ("question_encoder", "passage_encoder"):
        enc = AutoModel.from_pretrained(model_dir / side)
        with torch.no_grad():
            for p in enc.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 0.3)
        enc.save_pretrained(model_dir / side)
    meta = json.loads((model_dir / "dcsr.json").read_text())  # the changed weights' digests
    meta["weights_sha256"] = weight_digests(model_dir)
    (model_dir / "dcsr.json").write_text(json.dumps(meta))


def _shards(folder, model, corpus, sentences, n):
    shards = []
    for s in range(n):
        paths = [folder / f"shard-{s}{ext}" for ext in (".faiss", ".ids.npy", ".sents.npy")]
        embed_corpus_shard(model, corpus, s, n, folder / f"shard-{s}.npy", paths[1], batch_size=16,
                           progress=False, sentences=sentences, out_sentences=paths[2])
        index_shard(folder / f"shard-{s}.npy", paths[0])
        shards.append(tuple(str(p) for p in paths))
    return shards


def _exhaustive(world, method, depth, n):
    """The expected negatives by brute force: every vector scored with NumPy, the top ``depth``
    (ties: smaller key), a DCSR passage at its best sentence, then the first ``n`` that are no
    positive and have no answer. ``[[(passage_id, sentence or None), ...] per question]``."""
    folder = world["root"] / f"{method}-emb"
    vecs = np.concatenate([np.load(folder / f"shard-{s}.npy") for s in range(2)])
    ids = np.concatenate([np.load(folder / f"shard-{s}.ids.npy") for s in range(2)])
    sents = np.concatenate([np.load(folder / f"shard-{s}.sents.npy") for s in range(2)]).astype(np.int64)
    records = list(iter_biencoder(world["train"]))
    embed_questions(world[method], [r["question"] for r in records], world["root"] / "q.npy", progress=False)
    q = np.load(world["root"] / "q.npy")
    texts = passage_texts(world["corpus"])
    keys = ids * SENTENCE_SLOTS + sents if method == "dcsr" else ids
    expected = []
    for qi, rec in enumerate(records):
        scores = vecs @ q[qi]
        top = np.lexsort((keys, -scores))[:depth]
        hits, seen = [], set()
        for i in top:
            if ids[i] not in seen:
                seen.add(ids[i])
                hits.append((int(ids[i]), int(sents[i]) if method == "dcsr" else None))
        positives = {int(c["passage_id"]) for c in rec["positive_ctxs"]}
        keep = [h for h in hits if h[0] not in positives and not has_answer(rec["answers"], texts[h[0]].text)]
        expected.append(keep[:n])
    return expected


@pytest.mark.parametrize("method", ["dpr", "dcsr"])
def test_mined_negatives_are_the_top_answer_free_hits(world, method, tmp_path):
    out = tmp_path / "mined.json"
    stats = mine_dense_negatives(world[method], world["train"], world["corpus"], world[f"{method}-shards"], out,
                                 n_negatives=3, depth=30, progress=False)
    records = list(iter_biencoder(out))
    originals = list(iter_biencoder(world["train"]))
    assert len(records) == len(originals) == stats["questions"] == 40
    texts = passage_texts(world["corpus"])
    spans = sentence_spans(world["sentences"])
    expected = _exhaustive(world, method, 30, 3)
    for rec, orig, want in zip(records, originals, expected):
        assert rec["question"] == orig["question"] and rec["positive_ctxs"] == orig["positive_ctxs"]
        negs = rec["hard_negative_ctxs"]
        assert len(negs) <= 3
        got = [(int(c["passage_id"]), c.get("sentence")) for c in negs]
        assert got == want
        positives = {c["passage_id"] for c in rec["positive_ctxs"]}
        for c in negs:
            assert c["passage_id"] not in positives
            assert not has_answer(rec["answers"], c["text"])
            p = texts[int(c["passage_id"])]
            assert (c["title"], c["text"]) == (p.title, p.text)
            if method == "dcsr":
                assert 0 <= c["sentence"] < len(spans[int(c["passage_id"])])
            else:
                assert "sentence" not in c
        assert [c["score"] for c in negs] == sorted((c["score"] for c in negs), reverse=True)
        assert len({c["passage_id"] for c in negs}) == len(negs)  # a passage once
    assert stats["with_negatives"] == 40 and stats["mean_negatives"] == 3.0  # 30 hits always leave 3


def test_mining_is_deterministic_and_independent_of_sharding(world, tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    mine_dense_negatives(world["dpr"], world["train"], world["corpus"], world["dpr-shards"], a,
                         n_negatives=5, depth=20, progress=False)
    mine_dense_negatives(world["dpr"], world["train"], world["corpus"], world["dpr-shards"], b,
                         n_negatives=5, depth=20, progress=False)
    assert a.read_bytes() == b.read_bytes()
    one = _shards(tmp_path / "one", world["dpr"], world["corpus"], world["sentences"], 1)
    mine_dense_negatives(world["dpr"], world["train"], world["corpus"], one, c, n_negatives=5, depth=20,
                         progress=False)
    ids = [[n["passage_id"] for n in r["hard_negative_ctxs"]] for r in read_biencoder(a)]
    assert ids == [[n["passage_id"] for n in r["hard_negative_ctxs"]] for r in read_biencoder(c)]


def test_other_fields_are_kept_and_old_negatives_replaced(world, tmp_path):
    recs = json.loads(world["train"].read_text())[:2]
    recs[0]["hard_negative_ctxs"] = [{"title": "old", "text": "old negative", "passage_id": "99999"}]
    recs[0]["extra_field"] = 7
    (tmp_path / "t.json").write_text(json.dumps(recs))
    mine_dense_negatives(world["dpr"], tmp_path / "t.json", world["corpus"], world["dpr-shards"],
                         tmp_path / "o.json", n_negatives=2, depth=10, progress=False)
    raw = json.loads((tmp_path / "o.json").read_text())
    assert raw[0]["extra_field"] == 7
    first, second = raw[0]["hard_negative_ctxs"]
    assert "99999" not in (first["passage_id"], second["passage_id"])
    # a positive is never a negative, even one without the answer: make the top negative a positive
    recs[0]["positive_ctxs"] = [{k: first[k] for k in ("title", "text", "passage_id")}]
    (tmp_path / "t.json").write_text(json.dumps(recs))
    mine_dense_negatives(world["dpr"], tmp_path / "t.json", world["corpus"], world["dpr-shards"],
                         tmp_path / "o.json", n_negatives=2, depth=10, progress=False)
    negs = json.loads((tmp_path / "o.json").read_text())[0]["hard_negative_ctxs"]
    assert negs[0]["passage_id"] == second["passage_id"] and first["passage_id"] not in [n["passage_id"] for n in negs]


def test_first_sentence_per_passage_keeps_each_passage_at_its_best_rank():
    k = SENTENCE_SLOTS
    keys = np.array([[7 * k + 2, 7 * k + 0, 3 * k + 1, 9 * k + 0, -1]])
    scores = np.array([[5.0, 4.0, 3.0, 2.0, -np.inf]], dtype=np.float32)
    s, p, n = first_sentence_per_passage(scores, keys)
    assert p.tolist() == [[7, 3, 9]] and n.tolist() == [[2, 1, 0]] and s.tolist() == [[5.0, 3.0, 2.0]]


def test_a_shard_whose_ids_do_not_match_its_index_is_named(world, tmp_path):
    index, ids, sents = world["dpr-shards"][0]
    np.save(tmp_path / "bad.ids.npy", np.load(ids)[:-1])
    with pytest.raises(InputError, match="bad.ids.npy"):
        mine_dense_negatives(world["dpr"], world["train"], world["corpus"], [(index, str(tmp_path / "bad.ids.npy"), sents)],
                             tmp_path / "o.json", progress=False)
    assert not (tmp_path / "o.json").exists()


def test_script_writes_what_the_library_writes(world, tmp_path, repo):
    args = [arg for shard in world["dcsr-shards"] for arg in ("--shard", *shard)]
    env = {**os.environ, "PYTHONPATH": str(repo / "src"), "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, str(repo / "workflow" / "scripts" / "mine_dense_negatives.py"),
                        "--model", str(world["dcsr"]), "--train", str(world["train"]), "--corpus", str(world["corpus"]),
                        *args, "--output", str(tmp_path / "s.json"), "--negatives", "2", "--depth", "15",
                        "--gpu", "false", "--device", "cpu"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    mine_dense_negatives(world["dcsr"], world["train"], world["corpus"], world["dcsr-shards"], tmp_path / "l.json",
                         n_negatives=2, depth=15, use_gpu=False, device="cpu", progress=False)
    assert (tmp_path / "s.json").read_bytes() == (tmp_path / "l.json").read_bytes()


# ---------------------------------------------------------------------- config and DAG


@pytest.fixture()
def cfg(repo):
    import yaml

    return yaml.safe_load((repo / "config" / "generated.yaml").read_text())


@pytest.mark.parametrize("model, key, problem", [
    ({"method": "dcsr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "nope"},
     "models.hard.negatives_from", "names model 'nope'"),
    ({"method": "dcsr", "init": "minilm", "negatives_from": "dcsr"}, "models.hard.negatives_from", "only a trained model"),
    ({"method": "dcsr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "hard"},
     "models.hard.negatives_from", "a cycle"),
    ({"method": "dpr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "dcsr", "train_fraction": 0.5},
     "models.hard.negatives_from", "fraction"),
])
def test_negatives_from_errors_name_the_key(cfg, model, key, problem):
    from dcsr.pipeline.config import check_config

    cfg["models"]["hard"] = model
    with pytest.raises(InputError, match=f"config: {key.replace('.', '[.]')}: .*{problem}"):
        check_config(cfg)


def test_a_miner_trained_on_its_own_pupils_negatives_is_a_cycle(cfg):
    from dcsr.pipeline.config import check_config

    cfg["models"]["dcsr-hard"] = {"method": "dcsr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "dcsr"}
    check_config(cfg)  # a second round: fine
    cfg["models"]["dcsr"]["negatives_from"] = "dcsr-hard"
    with pytest.raises(InputError, match="config: models[.]dcsr[.]negatives_from: dcsr -> dcsr-hard -> dcsr"):
        check_config(cfg)


def test_settings_accept_mining_and_reject_unknown_keys(cfg, repo):
    import copy

    from dcsr.settings import check_sections
    from snakemake.utils import validate

    cfg["models"]["dcsr-hard"] = {"method": "dcsr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "dcsr"}
    cfg["mining"] = {"depth": 50, "negatives": 5}
    validate(copy.deepcopy(cfg), str(repo / "config" / "schema.yaml"))
    check_sections(cfg)
    assert cfg["mining"] == {"depth": 50, "negatives": 5}
    cfg["mining"]["deep"] = 3
    with pytest.raises(InputError) as e:
        check_sections(cfg)
    assert str(e.value) == "config: mining.deep: unknown key 'deep'; did you mean 'depth'?"


def test_second_round_model_trains_on_its_miners_negatives_in_the_dag(repo, tmp_path):
    """Dry run of a second-round DCSR (negatives mined by the default's DCSR) and a DPR mined
    by a model that no table or attribution pair searches: each trains on its miner's file,
    and mining builds the miner's shard indexes without any search job."""
    import yaml
    from test_workflow import snakemake

    over = {"results": str(tmp_path / "results"), "mining": {"depth": 50, "negatives": 5},
            "embed": {"shards": 2, "batch_size": 8},
            "models": {"dcsr-hard": {"method": "dcsr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "dcsr"},
                       "miner": {"method": "dpr", "init": "minilm", "train_on": "trivia"},
                       "dpr-hard": {"method": "dpr", "init": "minilm", "train_on": "encyclopedia", "negatives_from": "miner"}}}
    (tmp_path / "over.yaml").write_text(yaml.safe_dump(over))
    configs = ["--configfile", str(repo / "config" / "generated.yaml"), str(tmp_path / "over.yaml")]
    r = snakemake(repo, tmp_path, "-n", "-p", *configs)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    jobs = {}
    for block in out.split("\nrule ")[1:]:
        wildcards = next((line.split(":", 1)[1].strip() for line in block.splitlines() if "wildcards:" in line), "")
        jobs[(block.split(":", 1)[0], wildcards)] = block
    mine = jobs[("mine_dense_negatives", "model=dcsr, dataset=encyclopedia")]
    assert f"{tmp_path}/results/index/demo/dcsr/shard-1.faiss" in mine and "shard-1.sents.npy" in mine
    assert "--negatives 5 --depth 50" in mine
    train = jobs[("train_biencoder", "model=dcsr-hard")]
    assert f"--train {tmp_path}/results/negatives/dcsr/encyclopedia-train.json" in train
    assert f"--train {tmp_path}/results/negatives/miner/encyclopedia-train.json" in jobs[("train_biencoder", "model=dpr-hard")]
    # the unsearched miner: embedded and indexed for mining alone
    r = snakemake(repo, tmp_path, str(tmp_path / "results" / "models" / "dpr-hard"), "-n", "--quiet", "rules", *configs)
    counts = {p[0]: int(p[1]) for p in (line.split() for line in (r.stdout + r.stderr).splitlines())
              if len(p) == 2 and p[1].isdigit()}
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert counts["mine_dense_negatives"] == 1 and counts["index_shard"] == 2 and counts["embed_shard"] == 2
    assert "search_shard" not in counts and "embed_questions" not in counts
    assert counts["train_biencoder"] == 2  # the miner, then the second round


def test_the_miner_encodes_questions_as_it_trained_on_them(world, tmp_path, monkeypatch):
    """A ``question_text: dpr`` miner gets DPR's normalize_question text (’ written '), as its
    training did; a ``raw`` one the question as written."""
    import shutil

    import dcsr.retrieval.embed as embed

    records = list(iter_biencoder(world["train"]))[:2]
    records[0]["question"] = "who’s " + records[0]["question"]
    train = tmp_path / "train.json"
    train.write_text(json.dumps(records))
    seen = {}

    class Seen(Exception):
        pass

    def capture(model, tokenizer, texts, *args, **kwargs):
        seen["texts"] = list(texts)
        raise Seen

    monkeypatch.setattr(embed, "encode_texts", capture)  # mining imports it when it runs
    for rule in ("raw", "dpr"):
        model = tmp_path / rule
        shutil.copytree(world["dpr"], model)
        meta = json.loads((model / "dcsr.json").read_text())
        (model / "dcsr.json").write_text(json.dumps({**meta, "question_text": rule}))
        with pytest.raises(Seen):
            mine_dense_negatives(model, train, world["corpus"], world["dpr-shards"], tmp_path / f"{rule}.json",
                                 n_negatives=1, depth=5, progress=False)
        assert seen["texts"][0].startswith("who’s " if rule == "raw" else "who's ")
        assert seen["texts"][1] == records[1]["question"]
