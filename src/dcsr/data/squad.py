"""SQuAD v1.1 as an open-retrieval dataset in DPR's formats.

- corpus: every article's paragraphs, concatenated and cut into disjoint ``passage_words``-word
  blocks (word = whitespace token), as DPR cut Wikipedia articles; the title is the article
  title with underscores as spaces; ids 1..N in input order, so the corpus ignores the seed.
- splits: by article (a seeded shuffle), so a test article's passages are never gold
  passages in training. Fractions (e.g. ``{train: 0.7, dev: 0.05, test: 0.25}``, at least one
  article in each non-zero split) or, when all values are integers, article counts.
- gold passage: the block holding an answer's whole character span (and its text). With
  several answers (SQuAD dev), the block holding most answer spans, ties going to the
  earlier answer. A train/dev question whose answers all cross a block boundary is dropped
  and counted; test questions keep all their answers and need no gold passage (DPR's qas
  format has none), theirs is only computed for the statistics.

Malformed input raises :class:`~dcsr.errors.InputError` naming the file and the JSON path
(``data[3].paragraphs[5].qas[2]``) with the article title and question id.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import math
import os
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from dcsr.data.answers import has_answer
from dcsr.errors import InputError, at
from dcsr.data.formats import (QA, JSONProblem, Passage, open_text, strict_object, write_biencoder, write_corpus,
                                write_qas)
from dcsr.data.literals import JSON_LIMITS, json_limit_problem
from dcsr.fsutil import atomic_path

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
DEFAULT_SPLIT = {"train": 0.7, "dev": 0.05, "test": 0.25}
DEFAULT_PASSAGE_WORDS = 100
DEFAULT_SEED = 13
_WORD = re.compile(r"\S+")
CROSSES, NOT_FOUND, NO_ANSWER = "answer crosses a passage boundary", "answer text not in passage text", "no answer"


@dataclass
class SquadDPR:
    """The converted dataset: corpus passages, biencoder records (train, dev), test qas, statistics."""

    passages: list[Passage]
    train: list[dict]
    dev: list[dict]
    test: list[QA]
    stats: dict
    test_ids: list = field(default_factory=list)  # SQuAD's id of each test question (None where it has none)


def article_splits(n_articles: int, split: Mapping[str, float | int] | Sequence = DEFAULT_SPLIT,
                   seed: int = DEFAULT_SEED) -> dict[str, list[int]]:
    """Assign article indices to train/dev/test by a seeded shuffle; each list is sorted.

    Fractions are rounded by largest remainder, then every non-zero split gets at least one
    article. All-integer values are article counts (articles left over join no split).
    """
    sizes = dict(zip(SPLITS, split)) if not isinstance(split, Mapping) else dict(split)
    if set(sizes) - set(SPLITS):
        raise InputError("split", f"unknown split names {sorted(set(sizes) - set(SPLITS))} (known: {SPLITS})")
    sizes = {s: sizes.get(s, 0) for s in SPLITS}
    if any(not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0 for v in sizes.values()):
        raise InputError("split", f"sizes must be non-negative numbers, got {sizes}")
    if all(isinstance(v, int) for v in sizes.values()):
        counts = sizes
        if sum(counts.values()) > n_articles:
            raise InputError("split", f"article counts {counts} need {sum(counts.values())} articles, the input has {n_articles}")
    else:
        if not math.isclose(sum(sizes.values()), 1.0, abs_tol=1e-6):
            raise InputError("split", f"fractions {sizes} must sum to 1")
        nonzero = [s for s in SPLITS if sizes[s] > 0]
        if n_articles < len(nonzero):
            raise InputError("split", f"{n_articles} articles cannot fill the {len(nonzero)} non-empty splits {nonzero}")
        exact = {s: sizes[s] * n_articles for s in SPLITS}
        counts = {s: int(exact[s]) for s in SPLITS}
        for s in sorted(SPLITS, key=lambda s: counts[s] - exact[s])[: n_articles - sum(counts.values())]:
            counts[s] += 1
        for s in nonzero:
            if counts[s] == 0:
                counts[max(SPLITS, key=lambda t: counts[t])] -= 1
                counts[s] = 1
    order = list(range(n_articles))
    random.Random(seed).shuffle(order)
    out, start = {}, 0
    for s in SPLITS:
        out[s] = sorted(order[start : start + counts[s]])
        start += counts[s]
    return out


_KIND = {str: "string", list: "list", int: "integer"}


def _need(obj, key: str, kind: type, where: str, what: str):
    """``obj[key]`` when ``obj`` is an object and the value has type ``kind``; else InputError."""
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or isinstance(value, bool):
        raise InputError(where, f"{what} has no {_KIND[kind]} '{key}'")
    return value


def _load(path: str | os.PathLike) -> list:
    try:
        with open_text(path) as fh:  # .json or .json.gz
            doc = json.load(fh, object_pairs_hook=strict_object)
    except json.JSONDecodeError as e:
        raise InputError(at(path, e.lineno), f"not valid JSON: {e.msg} (column {e.colno})")
    except JSONProblem as e:  # a duplicated key, a lone surrogate
        raise InputError(at(path), str(e)) from None
    except (UnicodeDecodeError, OSError, EOFError) as e:
        raise InputError(at(path), f"cannot read SQuAD JSON: {e}")
    except JSON_LIMITS as e:  # after UnicodeDecodeError, a ValueError too
        raise InputError(at(path), f"the SQuAD JSON holds {json_limit_problem(e)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise InputError(at(path), "no 'data' list: expected SQuAD v1.1 JSON ({'version': ..., 'data': [articles]})")
    return doc["data"]


def _article(path, i: int, art, passage_words: int, first_id: int):
    """Cut one article into passages and locate every question's answers.

    Returns ``(passages, questions)``; a question is ``(qa_id, question, answers, gold)``
    where gold is the passage id or a drop reason (str).
    """
    where = f"{path}:data[{i}]"
    title = _need(art, "title", str, where, "article")
    where_art = f"{where} (article {title!r})"
    words: list[str] = []
    located = []  # per question: (id, question, answers, [(first_word, last_word) per answer])
    for j, para in enumerate(_need(art, "paragraphs", list, where_art, "article")):
        pwhere = f"{path}:data[{i}].paragraphs[{j}] (article {title!r})"
        context = _need(para, "context", str, pwhere, "paragraph")
        spans = [m.span() for m in _WORD.finditer(context)]
        starts, ends, base = [s for s, _ in spans], [e for _, e in spans], len(words)
        words += [context[s:e] for s, e in spans]
        for k, qa in enumerate(_need(para, "qas", list, pwhere, "paragraph") if "qas" in para else []):
            qid = qa.get("id") if isinstance(qa, dict) else None
            qwhere = f"{path}:data[{i}].paragraphs[{j}].qas[{k}] (article {title!r}, id {qid!r})"
            question = _need(qa, "question", str, qwhere, "question")
            answers, ranges = [], []
            for a, ans in enumerate(_need(qa, "answers", list, qwhere, "question")):
                text = _need(ans, "text", str, qwhere, f"answers[{a}]")
                start = _need(ans, "answer_start", int, qwhere, f"answers[{a}]")
                end = start + len(text)
                if not text.strip():
                    raise InputError(qwhere, f"answers[{a}] has an empty text")
                if start < 0 or end > len(context):
                    raise InputError(qwhere, f"answers[{a}] answer_start {start} (+{len(text)} chars) is outside "
                                             f"the context ({len(context)} chars)")
                if context[start:end] != text:
                    raise InputError(qwhere, f"answers[{a}] text {text!r} is not at answer_start {start} "
                                             f"(found {context[start:end]!r})")
                answers.append(text)
                ranges.append((base + bisect.bisect_right(ends, start), base + bisect.bisect_left(starts, end) - 1))
            located.append((qid, question, answers, ranges))
    title = title.replace("_", " ")
    texts = [" ".join(words[s : s + passage_words]) for s in range(0, len(words), passage_words)]
    passages = [Passage(first_id + n, t, title) for n, t in enumerate(texts)]
    questions = []
    for qid, question, answers, ranges in located:
        votes, reason = Counter(), NO_ANSWER
        for text, (first, last) in zip(answers, ranges):
            block = first // passage_words
            if last // passage_words != block:
                reason = CROSSES
            elif " ".join(text.split()) not in texts[block]:
                reason = reason if reason == CROSSES else NOT_FOUND
            else:
                votes[block] += 1
        gold = first_id + votes.most_common(1)[0][0] if votes else reason
        questions.append((qid, question, answers, gold))
    return passages, questions


def split_size(value: str) -> int | float:
    """A split's size on the command line: an article count (integer) or a fraction."""
    try:
        return int(value)
    except ValueError:
        return float(value)


def parse_article_range(text: str) -> range:
    """``"0:18"`` -> ``range(0, 18)``: articles by position in the file, as a Python slice
    (``":18"``, ``"18:"``; no step)."""
    parts = str(text).split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        start = int(parts[0]) if parts[0].strip() else 0
        stop = int(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise InputError("articles", f"expected START:STOP (article positions, e.g. 0:18), got {text!r}")
    if start < 0 or (stop is not None and stop <= start):
        raise InputError("articles", f"{text!r} selects no articles")
    return range(start, stop if stop is not None else sys.maxsize)


def squad_to_dpr(squad_json_path: str | os.PathLike, *, passage_words: int = DEFAULT_PASSAGE_WORDS,
                 split: Mapping[str, float | int] | Sequence = DEFAULT_SPLIT, seed: int = DEFAULT_SEED,
                 articles: range | Sequence[int] | None = None) -> SquadDPR:
    """Convert a SQuAD v1.1 JSON file to DPR's corpus, biencoder train/dev and test qas.

    ``articles`` (positions in the file, e.g. ``range(0, 18)``) keeps only those articles'
    questions, split among them by ``split``: a dataset of one group of articles (a "domain"),
    over the corpus of all articles. Default: every article.
    """
    if passage_words < 1:
        raise InputError("passage_words", f"must be at least 1, got {passage_words}")
    path = Path(squad_json_path)
    data = _load(path)
    passages, per_article = [], []
    for i, art in enumerate(data):
        ps, qs = _article(path, i, art, passage_words, len(passages) + 1)
        passages += ps
        per_article.append((ps, qs))
    by_id = {p.id: p for p in passages}
    if articles is None:
        chosen = list(range(len(data)))
    elif isinstance(articles, range):
        chosen = list(articles[: max(0, len(data) - articles.start)])
    else:
        chosen = [i for i in articles if 0 <= i < len(data)]
    if not chosen:
        raise InputError(str(path), f"has {len(data)} articles; the selection {articles} holds none of them")
    splits = {s: [chosen[i] for i in idx] for s, idx in article_splits(len(chosen), split, seed).items()}
    out = {"train": [], "dev": [], "test": []}
    test_ids = []
    gold_of, dropped = [], {s: Counter() for s in SPLITS}
    no_dpr_match = 0
    for s in SPLITS:
        for i in splits[s]:
            for qid, question, answers, gold in per_article[i][1]:
                if not answers or (s != "test" and isinstance(gold, str)):
                    dropped[s][NO_ANSWER if not answers else gold] += 1
                    continue
                if isinstance(gold, int):
                    gold_of.append(gold)
                    no_dpr_match += not has_answer(answers, by_id[gold].text)
                if s == "test":
                    out[s].append(QA(question, list(answers)))
                    test_ids.append(qid)
                    continue
                p = by_id[gold]
                rec = {"question": question, "answers": list(dict.fromkeys(answers)),
                       "positive_ctxs": [{"title": p.title, "text": p.text, "passage_id": str(p.id)}],
                       "negative_ctxs": [], "hard_negative_ctxs": []}
                out[s].append(rec if qid is None else {"id": qid, **rec})
    per_gold = Counter(Counter(gold_of).values())
    stats = {
        "articles": {s: len(splits[s]) for s in SPLITS},
        "passages": len(passages),
        "passages_per_split": {s: sum(len(per_article[i][0]) for i in splits[s]) for s in SPLITS},
        "questions": {s: len(out[s]) for s in SPLITS},
        "dropped": {s: dict(dropped[s]) for s in SPLITS},
        "test_without_gold_passage": sum(isinstance(g, str) for i in splits["test"] for *_, g in per_article[i][1]),
        "gold_passages_without_dpr_answer_match": no_dpr_match,
        "questions_per_gold_passage": {"1": per_gold[1], "2": per_gold[2], "3": per_gold[3],
                                       ">=4": sum(v for k, v in per_gold.items() if k >= 4),
                                       "gold_passages": sum(per_gold.values()),
                                       "average": round(len(gold_of) / max(1, sum(per_gold.values())), 3)},
    }
    log.info("%s: %s", path, json.dumps(stats))
    return SquadDPR(passages, out["train"], out["dev"], out["test"], stats, test_ids)


def write_squad_dpr(data: SquadDPR, *, corpus_out=None, train_out=None, dev_out=None, test_out=None) -> None:
    """Write the files that are given; they appear together, and none does if any fails."""
    jobs = [(corpus_out, write_corpus, data.passages), (train_out, write_biencoder, data.train),
            (dev_out, write_biencoder, data.dev), (test_out, write_qas, data.test)]
    with contextlib.ExitStack() as stack:
        for final, write, items in jobs:
            if final is not None:
                write(stack.enter_context(atomic_path(final)), items)
