"""The offline demo dataset: deterministic, in DPR's formats, and built as the papers need."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest

from dcsr.data.answers import has_answer, tokens
from dcsr.errors import InputError
from dcsr.data.formats import iter_biencoder, iter_passages, iter_qas
from dcsr.fixtures.synth import DEFAULT_DOMAINS, MAX_WORDS, MIN_WORDS, build_demo, generate_demo

SMALL = dict(n_entities=300, dev_fraction=0.1, test_fraction=0.1)
FILES = ["psgs_w100.tsv"] + [f"{d}-{s}" for d in DEFAULT_DOMAINS for s in ("train.json", "dev.json", "test.qa.csv")]
STOP = set("a an the of in on at to for by with from is was were are be it its this that which what who whom "
           "whose where when how do does did".split())


@pytest.fixture(scope="module")
def data():
    return build_demo(seed=13, domains=DEFAULT_DOMAINS, **SMALL)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    summary = generate_demo(out, seed=13, domains=DEFAULT_DOMAINS, log=lambda _: None, **SMALL)
    return out, summary


def test_same_seed_gives_identical_bytes_and_other_seed_differs(written, tmp_path):
    out, _ = written
    again = tmp_path / "again"
    generate_demo(again, seed=13, domains=DEFAULT_DOMAINS, log=lambda _: None, **SMALL)
    for name in FILES:
        assert (out / name).read_bytes() == (again / name).read_bytes(), name
    other = tmp_path / "other"
    generate_demo(other, seed=14, domains=DEFAULT_DOMAINS, log=lambda _: None, **SMALL)
    for name in FILES:
        assert (out / name).read_bytes() != (other / name).read_bytes(), name


def test_a_domain_does_not_depend_on_which_others_are_generated(data):
    alone = build_demo(seed=13, domains=("chat",), **SMALL)
    assert alone.questions["chat"] == data.questions["chat"]


def test_files_parse_with_the_dpr_readers_and_match_the_summary(written):
    out, summary = written
    passages = list(iter_passages(out / "psgs_w100.tsv"))
    assert [p.id for p in passages] == list(range(1, len(passages) + 1))
    assert len(passages) == summary["passages"]
    by_id = {p.id: p for p in passages}
    for domain in DEFAULT_DOMAINS:
        for split in ("train", "dev"):
            records = list(iter_biencoder(out / f"{domain}-{split}.json"))
            assert len(records) == summary["domains"][domain][split] > 0
            for rec in records:
                (pos,) = rec["positive_ctxs"]
                gold = by_id[int(pos["passage_id"])]
                assert (pos["title"], pos["text"]) == (gold.title, gold.text)
                assert pos["score"] == 1000 and pos["title_score"] == 1
                assert len(rec["negative_ctxs"]) == 2 and rec["hard_negative_ctxs"] == []
                for neg in rec["negative_ctxs"]:
                    assert neg["passage_id"] != pos["passage_id"]
                    assert not has_answer(rec["answers"], by_id[int(neg["passage_id"])].text)
        qas = list(iter_qas(out / f"{domain}-test.qa.csv"))
        assert len(qas) == summary["domains"][domain]["test"] > 0


def test_passages_are_about_100_words_of_3_to_7_sentences(data):
    assert all(MIN_WORDS <= len(p.text.split()) <= MAX_WORDS for p in data.passages)
    assert all(3 <= len(p.sentences) <= 7 for p in data.passages)
    for p in data.passages:
        assert [p.text[s:e] for s, e in p.sentence_spans()] == p.sentences
    # Some entities span two or three consecutive passages with the same title.
    per_entity = Counter(p.entity for p in data.passages)
    assert {2, 3} <= set(per_entity.values()) <= {1, 2, 3}
    for p, q in zip(data.passages, data.passages[1:]):
        if p.entity == q.entity:
            assert p.title == q.title and q.id == p.id + 1


def test_every_answer_is_in_exactly_one_sentence_of_the_gold_passage_once(data):
    n = 0
    for splits in data.questions.values():
        for questions in splits.values():
            for q in questions:
                gold = data.passage(q.passage_id)
                assert has_answer(list(q.answers), gold.text)
                hits = [i for i, s in enumerate(gold.sentences) if has_answer(list(q.answers), s)]
                assert hits == [q.sentence], (q, gold.sentences)
                ans, words = tokens(q.answers[0]), tokens(gold.text)
                assert sum(words[i : i + len(ans)] == ans for i in range(len(words))) == 1
                assert not has_answer(list(q.answers), q.question)
                n += 1
    assert n > 500


def test_namesakes_are_only_asked_what_exactly_one_of_them_states(data):
    """Many entities share a name; questions name the entity only, so each question's
    relation is stated in the passages of exactly one entity of that name: its own."""
    names = Counter(e.name for e in data.entities)
    assert sum(1 for e in data.entities if names[e.name] >= 3) > 0.3 * len(data.entities)
    titles = {}
    for p in data.passages:
        assert titles.setdefault(p.title, p.entity) == p.entity, p.title  # a title is one article
    stated = {}
    for p in data.passages:
        for f in p.facts:
            stated.setdefault((data.entities[p.entity].name, f.relation), set()).add(p.entity)
    asked_namesakes = 0
    for splits in data.questions.values():
        for qs in splits.values():
            for q in qs:
                name = data.entities[q.entity].name
                assert name in q.question
                assert stated[(name, q.relation)] == {q.entity}, q
                asked_namesakes += names[name] > 1
    assert asked_namesakes > 200


def test_default_fractions_give_a_sizeable_test_set():
    """The pipeline's default corpus (600 entities) has a test set of at least 250 questions."""
    demo = build_demo(seed=13, n_entities=600)
    sizes = {split: len(qs) for split, qs in demo.questions["encyclopedia"].items()}
    total = sum(sizes.values())
    assert sizes["test"] >= 250
    assert 0.06 < sizes["dev"] / total < 0.1


def test_test_and_dev_entities_never_appear_in_that_domains_training_set(data):
    for domain, splits in data.questions.items():
        train = {q.entity for q in splits["train"]}
        assert train and not train & {q.entity for q in splits["test"]}, domain
        assert not train & {q.entity for q in splits["dev"]}, domain


def test_passages_serve_several_questions(data):
    """DCSR's one-to-many case: many gold passages answer several, different questions."""
    per_passage = Counter(q.passage_id for q in data.questions["encyclopedia"]["train"])
    sizes = Counter(min(n, 3) for n in per_passage.values())
    assert sizes[1] and sizes[2] and sizes[3]
    assert (sizes[2] + sizes[3]) / sum(sizes.values()) > 0.25
    relations = {}
    for q in data.questions["encyclopedia"]["train"]:
        relations.setdefault(q.passage_id, set()).add(q.relation)
    assert all(len(relations[pid]) == n for pid, n in per_passage.items())


def test_questions_paraphrase_the_gold_sentence(data):
    """Apart from the entity's name, question words rarely occur in the gold sentence."""
    shared = total = 0
    for splits in data.questions.values():
        for q in splits["train"]:
            entity = data.entities[q.entity]
            name = set(tokens(entity.name)) | set(tokens(entity.ctx.get("o", "")))
            words = {w for w in tokens(q.question) if w.isalnum() and w not in STOP and w not in name}
            sentence = set(tokens(data.passage(q.passage_id).sentences[q.sentence]))
            shared += len(words & sentence)
            total += len(words)
    assert total and shared / total < 0.08


def test_domains_use_their_own_wording(data):
    enc = {q.question.split()[0].lower() for q in data.questions["encyclopedia"]["train"]}
    chat = [q.question for q in data.questions["chat"]["train"]]
    assert any(q[0].islower() for q in chat)
    assert {q.relation for q in data.questions["trivia"]["train"]} <= {
        "birth_date", "founded", "award", "work", "album", "length", "population", "founder", "singer",
        "students", "landmark", "source"}
    assert "what" in enc or "which" in enc


def test_train_cap_and_bad_arguments():
    capped = build_demo(seed=13, train_per_domain=50, **SMALL)
    assert len(capped.questions["encyclopedia"]["train"]) == 50
    with pytest.raises(InputError, match=r"^domains: unknown domain\(s\) \['nope'\]; known: "):
        build_demo(domains=("nope",), **SMALL)
    with pytest.raises(InputError, match=r"^dev_fraction \+ test_fraction: leave room for training data, got 1\.0$"):
        build_demo(n_entities=300, dev_fraction=0.5, test_fraction=0.5)


def test_cli_prints_summary_and_rejects_bad_input(repo, tmp_path):
    script = repo / "workflow" / "scripts" / "generate_demo_data.py"
    ok = subprocess.run([sys.executable, str(script), "--out-dir", str(tmp_path / "d"), "--n-entities", "100",
                         "--domains", "trivia,chat"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert set(json.loads(ok.stdout)["domains"]) == {"trivia", "chat"}
    assert (tmp_path / "d" / "chat-test.qa.csv").exists()
    bad = subprocess.run([sys.executable, str(script), "--out-dir", str(tmp_path / "e"), "--domains", "nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
