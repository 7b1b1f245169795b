"""SQuAD v1.1 -> DPR: passage cutting, gold passages, article splits, formats, errors."""

import json
import subprocess
import sys

import pytest

from dcsr.errors import InputError
from dcsr.data.formats import iter_passages, read_biencoder, read_qas
from dcsr.data.squad import CROSSES, article_splits, parse_article_range, squad_to_dpr, write_squad_dpr


def qa(qid, question, context, *answers):
    """A SQuAD question whose answers are located at their first occurrence in ``context``."""
    return {"id": qid, "question": question,
            "answers": [{"text": a, "answer_start": context.index(a)} for a in answers]}


def write_json(path, data):
    path.write_text(json.dumps({"version": "1.1", "data": data}))
    return path


# One article, 5-word passages: "one two three four five" | "six seven eight nine ten" | "eleven".
P1 = "one two three four five six seven"
P2 = "eight nine ten  eleven"
HAND = {"title": "Tiny_Town", "paragraphs": [
    {"context": P1, "qas": [qa("q-six", "After five?", P1, "six seven"),
                            qa("q-cross", "Around five?", P1, "four five six"),
                            qa("q-one", "First?", P1, "one")]},
    {"context": P2, "qas": [qa("q-ten", "Ten?", P2, "ten"), qa("q-eleven", "Last?", P2, "eleven"),
                            # three annotators: two point into passage 3, one crosses 2|3
                            qa("q-vote", "Vote?", P2, "eleven", "ten  eleven", "eleven")]}]}


def test_passages_are_disjoint_word_blocks_of_the_concatenated_article(tmp_path):
    data = squad_to_dpr(write_json(tmp_path / "s.json", [HAND]), passage_words=5, split=(1, 0, 0))
    assert [(p.id, p.text, p.title) for p in data.passages] == [
        (1, "one two three four five", "Tiny Town"), (2, "six seven eight nine ten", "Tiny Town"), (3, "eleven", "Tiny Town")]


def test_gold_passage_is_the_block_holding_the_answer_span(tmp_path):
    data = squad_to_dpr(write_json(tmp_path / "s.json", [HAND]), passage_words=5, split=(1, 0, 0))
    gold = {r["id"]: (r["positive_ctxs"][0]["passage_id"], r["answers"]) for r in data.train}
    assert gold == {"q-six": ("2", ["six seven"]), "q-one": ("1", ["one"]), "q-ten": ("2", ["ten"]),
                    "q-eleven": ("3", ["eleven"]), "q-vote": ("3", ["eleven", "ten  eleven"])}
    assert data.stats["dropped"]["train"] == {CROSSES: 1}  # q-cross: "four five | six"
    assert data.train[0]["positive_ctxs"] == [{"title": "Tiny Town", "text": "six seven eight nine ten", "passage_id": "2"}]
    assert data.train[0]["negative_ctxs"] == [] and data.train[0]["hard_negative_ctxs"] == []
    assert data.stats["questions_per_gold_passage"] == {"1": 1, "2": 2, "3": 0, ">=4": 0, "gold_passages": 3, "average": 1.667}


def test_test_questions_keep_all_answers_even_across_a_boundary(tmp_path):
    data = squad_to_dpr(write_json(tmp_path / "s.json", [HAND]), passage_words=5, split=(0, 0, 1))
    assert [(q.question, q.answers) for q in data.test][:2] == [("After five?", ["six seven"]), ("Around five?", ["four five six"])]
    assert data.test[-1].answers == ["eleven", "ten  eleven", "eleven"]
    assert data.stats["questions"]["test"] == 6 and data.stats["test_without_gold_passage"] == 1


def test_word_is_a_whitespace_token_and_answers_may_start_inside_one(tmp_path):
    ctx = "Born in\tthe 1990s,\n\nshe  left."
    art = {"title": "A_B", "paragraphs": [{"context": ctx, "qas": [qa("x", "When?", ctx, "1990"), qa("y", "Did?", ctx, "she  left")]}]}
    data = squad_to_dpr(write_json(tmp_path / "s.json", [art]), passage_words=4, split=(1, 0, 0))
    assert [p.text for p in data.passages] == ["Born in the 1990s,", "she left."]
    assert [r["positive_ctxs"][0]["passage_id"] for r in data.train] == ["1", "2"]


def articles(n, questions=2):
    out = []
    for i in range(n):
        ctx = " ".join(f"w{i}x{k}" for k in range(12))
        out.append({"title": f"Article_{i}", "paragraphs": [
            {"context": ctx, "qas": [qa(f"a{i}q{k}", f"Q {i} {k}?", ctx, f"w{i}x{k * 5}") for k in range(questions)]}]})
    return out


def test_article_split_sizes_seeded_and_disjoint():
    s = article_splits(36, {"train": 0.7, "dev": 0.05, "test": 0.25}, seed=13)
    assert {k: len(v) for k, v in s.items()} == {"train": 25, "dev": 2, "test": 9}
    assert sorted(s["train"] + s["dev"] + s["test"]) == list(range(36))
    assert s == article_splits(36, {"train": 0.7, "dev": 0.05, "test": 0.25}, seed=13)
    assert s != article_splits(36, {"train": 0.7, "dev": 0.05, "test": 0.25}, seed=14)
    assert {k: len(v) for k, v in article_splits(3, {"train": 0.98, "dev": 0.01, "test": 0.01}).items()} == {"train": 1, "dev": 1, "test": 1}
    assert {k: len(v) for k, v in article_splits(10, {"train": 3, "dev": 1, "test": 2}).items()} == {"train": 3, "dev": 1, "test": 2}
    assert article_splits(4, (0.5, 0.0, 0.5))["dev"] == []


@pytest.mark.parametrize("split, message", [({"train": 0.7, "dev": 0.1}, "must sum to 1"), ({"train": 5, "dev": 1, "test": 0}, "need 6 articles"),
                                            ({"train": 0.5, "dev": 0.25, "test": 0.25, "val": 0}, "unknown split"),
                                            ({"train": 0.98, "dev": 0.01, "test": 0.01}, "cannot fill")])
def test_bad_splits_are_rejected(split, message):
    with pytest.raises(InputError, match=message):
        article_splits(2 if "cannot" in message else 5, split)


def test_test_passages_are_never_gold_in_training(tmp_path):
    data = squad_to_dpr(write_json(tmp_path / "s.json", articles(20)), passage_words=5, split={"train": 0.6, "dev": 0.2, "test": 0.2}, seed=3)
    title = {p.id: p.title for p in data.passages}
    train_titles = {title[int(r["positive_ctxs"][0]["passage_id"])] for r in data.train}
    dev_titles = {title[int(r["positive_ctxs"][0]["passage_id"])] for r in data.dev}
    test_titles = {f"Article {q.question.split()[1]}" for q in data.test}
    assert (len(train_titles), len(dev_titles), len(test_titles)) == (12, 4, 4)
    assert not (train_titles & test_titles) and not (dev_titles & test_titles) and not (train_titles & dev_titles)
    assert data.stats["passages"] == 60 and data.stats["questions"] == {"train": 24, "dev": 8, "test": 8}
    again = squad_to_dpr(tmp_path / "s.json", passage_words=5, split={"train": 0.6, "dev": 0.2, "test": 0.2}, seed=3)
    assert again.train == data.train and again.test == data.test


def test_written_files_read_back_with_dpr_readers(tmp_path):
    data = squad_to_dpr(write_json(tmp_path / "s.json", [HAND] + articles(3)), passage_words=5, split=(2, 1, 1), seed=1)
    out = {k: tmp_path / "out" / f for k, f in [("corpus_out", "psgs_w100.tsv"), ("train_out", "train.json"),
                                               ("dev_out", "dev.json"), ("test_out", "test.qa.csv")]}
    write_squad_dpr(data, **out)
    assert list(iter_passages(out["corpus_out"])) == data.passages
    assert [r["question"] for r in read_biencoder(out["train_out"])] == [r["question"] for r in data.train]
    assert read_biencoder(out["dev_out"])[0]["positive_ctxs"][0]["passage_id"] == data.dev[0]["positive_ctxs"][0]["passage_id"]
    assert read_qas(out["test_out"]) == data.test
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dev.json", "psgs_w100.tsv", "test.qa.csv", "train.json"]


def test_no_output_appears_when_one_cannot_be_written(tmp_path):
    data = squad_to_dpr(write_json(tmp_path / "s.json", articles(3)), passage_words=5, split=(1, 1, 1))
    (tmp_path / "blocker").write_text("a file, not a folder")
    with pytest.raises(OSError, match="blocker"):  # the test file's folder, not another output
        write_squad_dpr(data, corpus_out=tmp_path / "o" / "psgs_w100.tsv", train_out=tmp_path / "o" / "train.json",
                        test_out=tmp_path / "blocker" / "test.qa.csv")
    assert list((tmp_path / "o").iterdir()) == []


def bad(tmp_path, data):
    ctx = "alpha beta gamma"
    good = {"title": "T", "paragraphs": [{"context": ctx, "qas": [qa("ok", "A?", ctx, "beta")]}]}
    return write_json(tmp_path / "bad.json", [good, data])


@pytest.mark.parametrize("article, message", [
    ({"paragraphs": []}, r"bad.json:data\[1\]: article has no string 'title'"),
    ({"title": "X", "paragraphs": [{"context": "a b", "qas": []}, {"qas": []}]},
     r"bad.json:data\[1\].paragraphs\[1\] \(article 'X'\): paragraph has no string 'context'"),
    ({"title": "X", "paragraphs": [{"context": "a b", "qas": [{"id": "q1", "question": "?", "answers": []},
                                                             {"id": "q7", "question": "?", "answers": [{"text": "b", "answer_start": 9}]}]}]},
     r"bad.json:data\[1\].paragraphs\[0\].qas\[1\] \(article 'X', id 'q7'\): answers\[0\] answer_start 9 .* outside the context"),
    ({"title": "X", "paragraphs": [{"context": "a b", "qas": [{"id": "q2", "question": "?", "answers": [{"text": "b", "answer_start": 0}]}]}]},
     r"qas\[0\] \(article 'X', id 'q2'\): answers\[0\] text 'b' is not at answer_start 0 \(found 'a'\)"),
    ({"title": "X", "paragraphs": [{"context": "a b", "qas": [{"id": "q3", "question": "?", "answers": [{"text": "b"}]}]}]},
     r"id 'q3'\): answers\[0\] has no integer 'answer_start'"),
])
def test_malformed_input_names_the_json_path(tmp_path, article, message):
    with pytest.raises(InputError, match=message):
        squad_to_dpr(bad(tmp_path, article))


def test_not_json_or_no_data_is_an_input_error(tmp_path):
    (tmp_path / "a.json").write_text('{"data": [\n  {"title": "x",,}\n]}')
    with pytest.raises(InputError, match=r"a.json:2: not valid JSON"):
        squad_to_dpr(tmp_path / "a.json")
    (tmp_path / "b.json").write_text('{"version": "1.1"}')
    with pytest.raises(InputError, match=r"b.json: no 'data' list"):
        squad_to_dpr(tmp_path / "b.json")


def test_script_writes_files_and_reports_errors_in_one_line(tmp_path, repo):
    src = write_json(tmp_path / "s.json", articles(4))
    cmd = [sys.executable, str(repo / "workflow" / "scripts" / "prepare_squad.py"), "--source", str(src),
           "--passage-words", "5", "--train", "2", "--dev", "1", "--test", "1", "--seed", "7"]
    outs = ["--corpus-out", str(tmp_path / "c.tsv"), "--train-out", str(tmp_path / "t.json"),
            "--dev-out", str(tmp_path / "d.json"), "--test-out", str(tmp_path / "q.csv")]
    ok = subprocess.run(cmd + outs, capture_output=True, text=True, check=True)
    assert json.loads(ok.stdout)["questions"] == {"train": 4, "dev": 2, "test": 2}
    assert len(list(iter_passages(tmp_path / "c.tsv"))) == 12 and len(read_qas(tmp_path / "q.csv")) == 2
    fail = subprocess.run(cmd[:3] + [str(tmp_path / "missing.json"), "--test-out", str(tmp_path / "x.csv")], capture_output=True, text=True)
    assert fail.returncode == 2 and fail.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'missing.json'}: no such file (give a local path or an http(s) URL)"
    assert not (tmp_path / "x.csv").exists()


def test_a_group_of_articles_is_a_domain_over_the_whole_corpus(tmp_path):
    src = write_json(tmp_path / "s.json", articles(20))
    split = {"train": 0.6, "dev": 0.2, "test": 0.2}
    whole = squad_to_dpr(src, passage_words=5, split=split, seed=3)
    first = squad_to_dpr(src, passage_words=5, split=split, seed=3, articles=parse_article_range("0:10"))
    last = squad_to_dpr(src, passage_words=5, split=split, seed=3, articles=parse_article_range("10:"))
    assert first.passages == last.passages == whole.passages  # the corpus keeps every article
    title = {p.id: p.title for p in whole.passages}
    first_titles = {title[int(r["positive_ctxs"][0]["passage_id"])] for r in first.train + first.dev}
    last_titles = {title[int(r["positive_ctxs"][0]["passage_id"])] for r in last.train + last.dev}
    assert first_titles <= {f"Article {i}" for i in range(10)} and last_titles <= {f"Article {i}" for i in range(10, 20)}
    assert first.stats["articles"] == last.stats["articles"] == {"train": 6, "dev": 2, "test": 2}
    assert {q.question for q in first.test}.isdisjoint({q.question for q in last.test})
    assert len(first.train) + len(last.train) == 24


@pytest.mark.parametrize("text, problem", [("5", "expected START:STOP"), ("3:3", "selects no articles"),
                                           ("a:b", "expected START:STOP"), ("1:2:3", "expected START:STOP"),
                                           ("-1:4", "selects no articles")])
def test_bad_article_ranges(text, problem):
    with pytest.raises(InputError, match=rf"^articles: .*{problem}") as e:
        parse_article_range(text)
    assert repr(text) in str(e.value)


def test_a_range_past_the_last_article_is_an_error(tmp_path):
    with pytest.raises(InputError, match="has 3 articles"):
        squad_to_dpr(write_json(tmp_path / "s.json", articles(3)), passage_words=5, split=(1, 0, 0),
                     articles=parse_article_range("5:9"))


def test_a_gzipped_source_reads_as_the_json(tmp_path):
    import gzip

    plain = write_json(tmp_path / "s.json", [HAND])
    packed = tmp_path / "s.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = squad_to_dpr(plain, passage_words=5, split=[1, 0, 0]), squad_to_dpr(packed, passage_words=5, split=[1, 0, 0])
    assert a.passages == b.passages and a.train == b.train and len(a.passages) == 3
    packed.write_bytes(gzip.compress(plain.read_bytes())[:40])  # cut short
    with pytest.raises(InputError, match=rf"^{packed}: cannot read SQuAD JSON: "):
        squad_to_dpr(packed)


def test_the_vendored_squad_subset_is_licensed_small_and_reads(repo):
    """resources/squad/: the real text of the offline real-text configs, CC BY-SA 4.0 with its
    attribution beside it, at most 2 MB, read by the converter as the configs name it."""
    import yaml

    vendored = repo / "resources" / "squad" / "squad1.1-dev-36-articles.json.gz"
    assert vendored.stat().st_size <= 2_000_000
    license_text = (vendored.parent / "LICENSE.md").read_text()
    assert "CC BY-SA 4.0" in license_text and "Rajpurkar" in license_text and "EMNLP 2016" in license_text
    # the default config runs on it offline; the other real-text configs name the official URL
    default = yaml.safe_load((repo / "config" / "config.yaml").read_text())
    assert default["corpora"]["squad"]["squad"]["source"] == "resources/squad/squad1.1-dev-36-articles.json.gz"
    for name in ("squad.yaml", "attribution-squad.yaml"):
        cfg = yaml.safe_load((repo / "config" / name).read_text())
        assert cfg["corpora"]["squad"]["squad"]["source"] == "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json"
    data = squad_to_dpr(vendored, split={"train": 0.7, "dev": 0.05, "test": 0.25})
    titles = {p.title for p in data.passages}
    assert len(titles) == 36
    n = len(data.train) + len(data.dev) + len(data.test)
    assert 7500 < n <= 8001  # 8,001 questions; a few are dropped where no answer is located


def test_a_url_source_is_downloaded_once_and_pinned_in_the_lock_file(tmp_path, repo):
    """config/squad.yaml names the official URL: prepare_squad.py downloads it (here from
    127.0.0.1), records its sha256 in the downloads' lock file, and refuses a changed file later."""
    from dcsr.fixtures.httpserve import serve

    site = tmp_path / "site"
    site.mkdir()
    write_json(site / "dev-v1.1.json", articles(4))
    lock, dl = tmp_path / "downloads" / "downloads.lock.json", tmp_path / "dl"

    def run(url, out):
        cmd = [sys.executable, str(repo / "workflow" / "scripts" / "prepare_squad.py"), "--source", url,
               "--download-dir", str(dl), "--lock", str(lock), "--passage-words", "5", "--train", "2", "--dev", "1",
               "--test", "1", "--test-out", str(tmp_path / out)]
        return subprocess.run(cmd, capture_output=True, text=True)

    with serve(site) as base:
        ok = run(f"{base}/dev-v1.1.json", "q1.csv")
        assert ok.returncode == 0, ok.stderr
        entry = json.loads(lock.read_text())["dev-v1.1.json"]
        assert entry["url"] == f"{base}/dev-v1.1.json" and entry["size"] == (site / "dev-v1.1.json").stat().st_size
        assert len(entry["sha256"]) == 64 and entry["verified"] is True
        # the published file changes: the kept download no longer matches what the lock pinned
        (dl / "dev-v1.1.json").unlink()
        write_json(site / "dev-v1.1.json", articles(5))
        bad = run(f"{base}/dev-v1.1.json", "q2.csv")
    assert bad.returncode == 2 and "sha256" in bad.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "q2.csv").exists()


def test_no_file_of_the_project_needs_the_shared_folder(repo):
    """A user's clone has no shared folder beside it: nothing tracked may point there."""
    needles = ("/".join(["..", "shared"]), "/".join(["/work", "shared"]))  # spelled so, this file is clean
    files = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True, check=True).stdout.split()
    offenders = []
    for name in files:
        path = repo / name
        if not path.is_file() or path.suffix in (".gz", ".png", ".npy", ".faiss"):
            continue
        text = path.read_text(errors="replace")
        if any(n in text for n in needles):
            offenders.append(name)
    assert offenders == [], offenders
