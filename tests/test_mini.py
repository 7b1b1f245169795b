"""The miniature stand-ins of DPR's files: DPR's names and formats, read by the project's own
readers, consistent with the corpus, deterministic from the seed."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dcsr.data.answers import has_answer, tokens
from dcsr.data.formats import iter_biencoder, iter_passages, iter_qas
from dcsr.errors import InputError
from dcsr.fixtures.mini import (DATASETS, MANIFEST, NQ_ADV_HN_FILE, answer_regex, build_paper_mini, file_names,
                       split_by_entity, summarize, write_mini_files, write_paper_mini)
from dcsr.data.squad import squad_to_dpr
from dcsr.fixtures.synth import DemoQuestion

ROOT = Path(__file__).resolve().parents[1]
SMALL = dict(n_entities=60, sizes={"train": 20, "dev": 5, "test": 10})
DPR_NAMES = [
    "psgs_w100.tsv.gz",
    *(f"biencoder-{d}-{s}.json.gz" for d in ("nq", "trivia", "squad1", "webquestions", "curatedtrec")
      for s in ("train", "dev")),
    "biencoder-nq-adv-hn-train.json.gz",
    "nq-test.qa.csv", "trivia-test.qa.csv.gz", "squad1-test.qa.csv", "webquestions-test.qa.csv",
    "curatedtrec-test.qa.csv",
    "train-v1.1.json", "dev-v1.1.json",
]


@pytest.fixture(scope="module")
def built():
    return build_paper_mini()


@pytest.fixture(scope="module")
def mini(built, tmp_path_factory):
    """The default miniature set, written, with its corpus and records read back."""
    out = tmp_path_factory.mktemp("mini")
    write_mini_files(built, out, log=lambda _: None)
    summary = summarize(built)
    corpus = {p.id: p for p in iter_passages(out / "psgs_w100.tsv.gz")}
    every = {(d.name, s): list(iter_biencoder(out / d.files()[s], require_positive=False))
             for d in DATASETS for s in ("train", "dev")}
    records = {key: [r for r in recs if r["positive_ctxs"]] for key, recs in every.items()}
    tests = {d.name: list(iter_qas(out / d.files()["test"])) for d in DATASETS}
    return out, summary, corpus, records, tests, every


def test_trivia_training_holds_questions_without_a_positive_as_dprs_file(mini):
    """DPR's TriviaQA training file holds questions whose positive passage was not found
    (``positive_ctxs: []``), which DPR's trainer leaves out; the miniature's has one after every
    eighth question, and no other file has any."""
    *_, every = mini
    for key, recs in every.items():
        unfound = [n for n, r in enumerate(recs) if not r["positive_ctxs"]]
        if key == ("trivia", "train"):
            found = len(recs) - len(unfound)
            assert len(unfound) == found // 8 and unfound[0] == 7 and all(recs[n]["hard_negative_ctxs"] for n in unfound)
        else:
            assert not unfound, key


def test_every_file_has_dpr_name_and_manifest_lists_its_bytes_and_sha256(mini):
    out, *_ = mini
    assert sorted(p.name for p in out.iterdir()) == sorted(DPR_NAMES + [MANIFEST]) == sorted(file_names())
    manifest = json.loads((out / MANIFEST).read_text())
    assert sorted(manifest) == sorted(DPR_NAMES)
    for name, entry in manifest.items():
        data = (out / name).read_bytes()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, name
        if name.endswith(".gz"):
            # gzip's header holds no file name (flags 0) and no time (mtime 0): same content, same bytes.
            assert data[:4] == b"\x1f\x8b\x08\x00" and data[4:8] == bytes(4), name
        else:
            assert data[:2] != b"\x1f\x8b", name


def test_sizes_are_those_asked_for_and_corpus_is_a_few_hundred_passages(mini):
    _, summary, corpus, records, tests, _ = mini
    assert 400 <= len(corpus) <= 1500 and sorted(corpus) == list(range(1, len(corpus) + 1))
    assert summary["passages"] == len(corpus)
    for d in DATASETS:
        n = {"train": len(records[(d.name, "train")]), "dev": len(records[(d.name, "dev")]), "test": len(tests[d.name])}
        assert {s: summary["datasets"][d.name][s] for s in n} == n
        assert 50 <= n["train"] <= 120 and 10 <= n["dev"] <= 30 and 25 <= n["test"] <= 60, (d.name, n)


def test_contexts_are_corpus_passages_with_the_dpr_fields(mini):
    out, _, corpus, records, _, _ = mini
    for (name, split), recs in records.items():
        for rec in recs:
            assert rec["dataset"] == f"{name}_{split}_psgs_w100"
            for key in ("positive_ctxs", "negative_ctxs", "hard_negative_ctxs"):
                for ctx in rec[key]:
                    p = corpus[int(ctx["passage_id"])]
                    assert (ctx["title"], ctx["text"]) == (p.title, p.text)
                    assert {"score", "title_score"} <= set(ctx)
            assert len(rec["positive_ctxs"]) == 1 and len(rec["negative_ctxs"]) == 2
            # As in DPR's files, a question with few words in the corpus has fewer.
            assert 1 <= len(rec["hard_negative_ctxs"]) <= 5
    all_recs = [rec for recs in records.values() for rec in recs]
    assert sum(len(rec["hard_negative_ctxs"]) == 5 for rec in all_recs) > 0.95 * len(all_recs)
    # As in DPR's files: TriviaQA's contexts name the passage "psg_id", the others "passage_id";
    # ids are strings.
    for d in DATASETS:
        with gzip.open(out / d.files()["train"], "rt") as fh:
            ctx = json.load(fh)[0]["positive_ctxs"][0]
        key = "psg_id" if d.name == "trivia" else "passage_id"
        assert isinstance(ctx[key], str) and ("psg_id" in ctx) == (d.name == "trivia")


def test_answers_are_in_the_positive_and_in_no_negative(mini):
    _, _, _, records, _, _ = mini
    for d in DATASETS:
        for split in ("train", "dev"):
            for rec in records[(d.name, split)]:
                assert has_answer(rec["answers"], rec["positive_ctxs"][0]["text"], d.match)
                for ctx in rec["negative_ctxs"] + rec["hard_negative_ctxs"]:
                    assert not has_answer(rec["answers"], ctx["text"], d.match)
                    assert ctx["passage_id"] != rec["positive_ctxs"][0]["passage_id"]


def test_hard_negatives_are_a_bm25_ranking_of_the_question(mini):
    _, _, _, records, _, _ = mini
    for (name, split), recs in records.items():
        for rec in recs:
            scores = [c["score"] for c in rec["hard_negative_ctxs"]]
            assert scores == sorted(scores, reverse=True) and scores[-1] > 0
            q = {t for t in tokens(rec["question"]) if t.isalnum()}
            assert all(q & set(tokens(c["text"])) for c in rec["hard_negative_ctxs"])


def test_nq_adversarial_file_has_the_training_questions_with_other_hard_negatives(mini):
    out, _, _, records, _, _ = mini
    adv = list(iter_biencoder(out / NQ_ADV_HN_FILE))
    nq = records[("nq", "train")]
    strip = lambda r: (r["question"], r["answers"], r["positive_ctxs"])  # noqa: E731
    assert [strip(r) for r in adv] == [strip(r) for r in nq]
    ids = lambda r: [c["passage_id"] for c in r["hard_negative_ctxs"]]  # noqa: E731
    assert sum(ids(a) != ids(r) for a, r in zip(adv, nq)) > 0.8 * len(nq)
    for a in adv:
        assert len(ids(a)) == 5 and not any(has_answer(a["answers"], c["text"]) for c in a["hard_negative_ctxs"])


def test_nq_questions_are_lower_case_queries_without_question_mark(mini):
    _, _, _, records, tests, _ = mini
    for q in [r["question"] for r in records[("nq", "train")]] + [qa.question for qa in tests["nq"]]:
        assert q == q.lower() and not q.endswith("?")


def test_curatedtrec_answers_are_regexes_matching_their_gold_passages(built):
    qs = [q for split in built.questions["curatedtrec"].values() for q in split]
    assert qs and any(r"\s+" in q.answers[0] or "|" in q.answers[0] for q in qs)
    for q in qs:
        gold = built.passage(q.gold)
        assert has_answer(q.answers, gold.text, "regex")
        # DCSR's positive sentence: the regex matches the sentence that states the fact.
        assert has_answer(q.answers, gold.sentences[q.source.sentence], "regex")


def test_curatedtrec_test_file_has_one_pattern_dpr_never_finds_as_dprs_file(mini, built):
    """DPR's CuratedTREC test file has patterns that do not compile under its NFD normalization
    (an accented letter escaped): the miniature's first test question has one, the rest none."""
    out, *_ = mini
    path = out / next(d for d in DATASETS if d.name == "curatedtrec").files()["test"]
    with pytest.raises(InputError, match=r"curatedtrec-test.qa.csv:1: answer 0 .* not a valid regular expression"):
        list(iter_qas(path, "regex"))
    never: list = []
    written = list(iter_qas(path, "regex", "never_found", never))
    assert [(where.rsplit(":", 1)[1], i) for where, i, _ in never] == [("1", 0)]
    assert written[0].answers[0].startswith(built.questions["curatedtrec"]["test"][0].answers[0] + "|")
    assert [qa.answers for qa in written[1:]] == [q.answers for q in built.questions["curatedtrec"]["test"][1:]]


def test_answer_regex_allows_the_variants_it_states():
    rng = random.Random(0)
    patterns = {answer_regex("Tesa Varnholm", rng) for _ in range(40)}
    assert r"Tesa\s+Varnholm" in patterns and any("|" in p for p in patterns)
    for p in patterns:
        for text in ("met Tesa Varnholm there", "met TESA\n Varnholm there"):
            assert has_answer([p], text, "regex"), (p, text)
        assert not has_answer([p], "met Tesa Morell there", "regex")
    variant = next(p for p in patterns if "|" in p)
    letter = variant.split("|")[1].split("?")[0][-1]
    assert has_answer([variant], "Tesa " + "Varnholm".replace(letter, "", 1), "regex")
    assert answer_regex("12,500", rng) == "12,?500" and has_answer(["12,?500"], "about 12500 people", "regex")


def test_splits_share_no_entity_and_squad_passages_have_several_questions():
    built = build_paper_mini(**SMALL)
    for name, splits in built.questions.items():
        entities = {s: {q.source.entity for q in qs} for s, qs in splits.items()}
        assert not entities["train"] & (entities["dev"] | entities["test"]), name
        assert not entities["dev"] & entities["test"], name
    per_gold = Counter(q.gold for q in built.questions["squad1"]["train"])
    assert per_gold and min(per_gold.values()) >= 2


def test_split_by_entity_keeps_entities_whole_and_caps_each_split():
    qs = [DemoQuestion(f"q{e}-{i}", ("a",), 10 * e, i, e, "r") for e in range(30) for i in range(e % 3 + 1)]
    out = split_by_entity(qs, {"train": 20, "dev": 5, "test": 8}, random.Random(1))
    assert [len(out[s]) <= cap for s, cap in (("train", 20), ("dev", 5), ("test", 8))] == [True] * 3
    for s in out:
        for q in out[s]:
            assert sum(p.entity == q.entity for p in out[s]) == q.entity % 3 + 1
    # Fewer questions than asked for: every split shrinks in proportion, none is left empty.
    few = split_by_entity(qs[:12], {"train": 100, "dev": 25, "test": 50}, random.Random(1))
    assert all(few[s] for s in few) and sum(map(len, few.values())) <= 12
    # Even when no entity fits a split's share.
    big = [DemoQuestion(f"q{e}-{i}", ("a",), e, i, e, "r") for e in range(4) for i in range(5)]
    out = split_by_entity(big, {"train": 100, "dev": 2, "test": 2}, random.Random(1))
    assert [len(out[s]) for s in ("train", "dev", "test")] == [10, 5, 5]


def test_squad_json_is_read_by_the_project_and_matches_the_corpus_and_test_set(mini):
    out, _, corpus, records, tests, _ = mini
    by_text = {p.text: p for p in corpus.values()}
    docs = {name: json.loads((out / name).read_text()) for name in ("train-v1.1.json", "dev-v1.1.json")}
    for doc in docs.values():
        assert doc["version"] == "1.1" and doc["data"]
        for art in doc["data"]:
            for para in art["paragraphs"]:
                p = by_text[para["context"]]
                assert art["title"] == p.title.replace(" ", "_")
                for qa in para["qas"]:
                    assert len(qa["id"]) == 24
                    for a in qa["answers"]:
                        assert para["context"][a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]
    train_qs = Counter(qa["question"] for art in docs["train-v1.1.json"]["data"] for para in art["paragraphs"]
                       for qa in para["qas"])
    assert train_qs == Counter(r["question"] for s in ("train", "dev") for r in records[("squad1", s)])
    dev = {qa["question"]: list(dict.fromkeys(a["text"] for a in qa["answers"]))
           for art in docs["dev-v1.1.json"]["data"] for para in art["paragraphs"] for qa in para["qas"]}
    assert all(len(qa["answers"]) == 3 for art in docs["dev-v1.1.json"]["data"] for para in art["paragraphs"]
               for qa in para["qas"])
    assert dev == {qa.question: qa.answers for qa in tests["squad1"]}
    # The project's SQuAD reader takes both files whole (it raises on any inconsistency).
    for name in docs:
        converted = squad_to_dpr(out / name, split={"train": 0.6, "dev": 0.1, "test": 0.3})
        assert sum(converted.stats["questions"].values()) + sum(
            sum(d.values()) for d in converted.stats["dropped"].values()) == sum(
            len(para["qas"]) for art in docs[name]["data"] for para in art["paragraphs"])
        assert converted.stats["questions"]["train"] > 0


def test_same_seed_gives_the_same_bytes_and_another_seed_other_bytes(tmp_path):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        write_paper_mini(tmp_path / name, seed=seed, log=lambda _: None, **SMALL)
    for name in file_names():
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "c" / name).read_bytes(), name


def test_script_writes_the_folder_and_reports_bad_arguments_in_one_line(tmp_path):
    script = ROOT / "workflow" / "scripts" / "make_paper_mini_data.py"
    ok = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "m"), "--seed", "3", "--n-entities", "60",
                         "--train-size", "20", "--dev-size", "5", "--test-size", "10"],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["datasets"]["nq"]["train"] <= 20
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == sorted(file_names())
    bad = subprocess.run([sys.executable, str(script), "--out", str(tmp_path / "bad"), "--dev-size", "0"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: sizes.dev:")
    assert not (tmp_path / "bad").exists()
