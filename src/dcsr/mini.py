"""Miniature stand-ins of DPR's data files and SQuAD v1.1, generated from a seed.

``config/paper-mini.yaml`` runs the DAG of the full-scale paper config on these: every
file under the name it has in DPR's resource map (``dpr/data/download_data.py``) or on the
SQuAD site, in the same format (gzipped where DPR's is), but a few hundred passages and
questions, so that the whole experiment matrix runs end to end in CI, served from a local
HTTP server instead of ``dl.fbaipublicfiles.com``.

One generated world (:mod:`dcsr.synth`) gives the corpus, and five of its question domains
stand in for the five datasets (:data:`DATASETS`):

- NQ: the encyclopedic domain, its questions lower-cased without "?" as NQ's search queries;
  ``biencoder-nq-adv-hn-train.json.gz`` holds the same training questions with harder hard
  negatives (the gold entity's other passages and its namesakes' passages first, where DPR
  mined them with its own NQ model);
- TriviaQA: the terse domain; its contexts carry ``psg_id``, as DPR's TriviaQA files do;
- SQuAD: a domain with several questions per passage; ``train-v1.1.json`` holds the
  articles of its train and dev questions and ``dev-v1.1.json`` those of its test questions
  (DPR's SQuAD test set is SQuAD's dev set), each paragraph a corpus passage;
- WebQuestions: the chatty domain;
- CuratedTREC: a small factoid domain whose answers are regular expressions (DPR matches
  them with ``match_type="regex"``), in every split.

Contexts are corpus passages (same id, title and text): the positive is the gold passage,
``negative_ctxs`` are random passages and ``hard_negative_ctxs`` the top of a BM25 ranking
over the corpus, both without an answer under the dataset's matching rule. Questions are
split by entity, so no dev or test entity has a training question of the same dataset.

``MANIFEST.json`` lists every file with its size and sha256. The same seed gives the same
bytes (gzip headers carry no time or name).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import math
import os
import random
import re
import shutil
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .answers import PassageMatcher, tokens
from .bm25 import B as BM25_B
from .bm25 import K1 as BM25_K1
from .download import file_sha256
from .errors import InputError
from .resources import RESOURCES
from .formats import QA, Passage, write_biencoder, write_corpus, write_qas
from .fsutil import atomic_open, atomic_path
from .synth import DemoData, DemoPassage, DemoQuestion, build_demo

SPLITS = ("train", "dev", "test")
DEFAULT_SEED = 13
DEFAULT_N_ENTITIES = 300
DEFAULT_SIZES = {"train": 120, "dev": 30, "test": 60}
DEFAULT_HARD_NEGATIVES = 5
N_RANDOM_NEGATIVES = 2
MANIFEST = "MANIFEST.json"
CORPUS_FILE = "psgs_w100.tsv.gz"
SQUAD_TRAIN_FILE, SQUAD_DEV_FILE = "train-v1.1.json", "dev-v1.1.json"
NQ_ADV_HN_FILE = "biencoder-nq-adv-hn-train.json.gz"


@dataclass(frozen=True)
class MiniDataset:
    """A DPR dataset and the generator domain standing in for it."""

    name: str  # DPR's file prefix: biencoder-<name>-train.json.gz, <name>-test.qa.csv
    domain: str  # the dcsr.synth domain of its questions
    match: str = "string"  # DPR's answer matching for it: "string" or "regex"
    id_key: str = "passage_id"  # the context field holding the passage id
    test_gz: bool = False  # DPR ships its test qas gzipped
    min_questions_per_passage: int = 1  # keep only gold passages of this many questions or more

    def files(self) -> dict[str, str]:
        test = f"{self.name}-test.qa.csv" + (".gz" if self.test_gz else "")
        return {"train": f"biencoder-{self.name}-train.json.gz", "dev": f"biencoder-{self.name}-dev.json.gz",
                "test": test}


DATASETS: tuple[MiniDataset, ...] = (
    MiniDataset("nq", "encyclopedia"),
    MiniDataset("trivia", "trivia", id_key="psg_id", test_gz=True),
    # SQuAD's workers wrote up to five questions per paragraph: a passage with one is rare.
    MiniDataset("squad1", "reading", min_questions_per_passage=2),
    MiniDataset("webquestions", "chat"),
    MiniDataset("curatedtrec", "trec", match="regex"),
)

# Every file of the resource map (dcsr.resources), one name each: the miniature set stands in
# for exactly the files the pipeline downloads.
RESOURCE_FILES: dict[str, str] = {r.key: r.file for r in RESOURCES}


def file_names() -> list[str]:
    """Every file :func:`write_paper_mini` writes, MANIFEST.json last."""
    return sorted(RESOURCE_FILES.values()) + [MANIFEST]


# --------------------------------------------------------------------------- answers


def answer_regex(answer: str, rng: random.Random) -> str:
    """A CuratedTREC-style pattern that matches ``answer``: its words with any whitespace
    between them, a number's thousands comma optional, and sometimes an alternative spelling
    with one letter optional ("Varnholm|Varnhol?m"), as CuratedTREC's patterns allow
    variants."""
    words = answer.split()
    exact = r"\s+".join(re.escape(w).replace(",", ",?") if w.replace(",", "").isdigit() else re.escape(w)
                        for w in words)
    long_words = [i for i, w in enumerate(words) if w.isalpha() and len(w) >= 5]
    if not long_words or rng.random() < 0.5:
        return exact
    i = rng.choice(long_words)
    w = words[i]
    k = rng.randint(2, len(w) - 2)
    variant = r"\s+".join(re.escape(x) if j != i else f"{re.escape(w[:k])}{w[k]}?{re.escape(w[k + 1:])}"
                          for j, x in enumerate(words))
    return f"{exact}|{variant}"


# --------------------------------------------------------------------------- splits


def split_by_entity(questions: Sequence[DemoQuestion], sizes: Mapping[str, int],
                    rng: random.Random) -> dict[str, list[DemoQuestion]]:
    """Up to ``sizes[split]`` questions per split, whole entities at a time (so a passage's
    several questions stay together, and no dev/test entity is seen in training). When the
    domain has fewer questions than asked for, every split shrinks in proportion; each split
    gets at least one entity."""
    by_entity: dict[int, list[DemoQuestion]] = defaultdict(list)
    for q in questions:
        by_entity[q.entity].append(q)
    total, wanted = len(questions), sum(sizes[s] for s in SPLITS)
    scale = min(1.0, total / wanted) if wanted else 0.0
    want = {s: math.floor(sizes[s] * scale) for s in SPLITS}
    order = sorted(by_entity)
    rng.shuffle(order)
    out: dict[str, list[DemoQuestion]] = {s: [] for s in SPLITS}
    fill = ("test", "dev", "train")
    for ent in order:
        group = sorted(by_entity[ent], key=lambda q: (q.passage_id, q.sentence, q.question))
        # Every split gets one entity first, even one above its cap: an empty dev or test
        # file would stop the pipeline that the miniature set is for.
        split = next((s for s in fill if not out[s]), None) or next(
            (s for s in fill if len(out[s]) + len(group) <= want[s]), None)
        if split is not None:
            out[split].extend(group)
    for split in SPLITS:
        rng.shuffle(out[split])
    return out


# --------------------------------------------------------------------------- BM25


class _BM25:
    """BM25 over the corpus in memory (a term x passage weight matrix): the ranking DPR's
    hard negatives come from, small enough here not to need Lucene."""

    def __init__(self, passages: Sequence[DemoPassage]):
        self.ids = np.array([p.id for p in passages])
        counts = [Counter(t for t in tokens(p.text) if t.isalnum()) for p in passages]
        self.vocab = {t: i for i, t in enumerate(sorted({t for c in counts for t in c}))}
        tf = np.zeros((len(self.vocab), len(passages)))
        for row, c in enumerate(counts):
            for term, n in c.items():
                tf[self.vocab[term], row] = n
        length = tf.sum(axis=0)
        df = (tf > 0).sum(axis=1)
        idf = np.log(1 + (len(passages) - df + 0.5) / (df + 0.5))
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / length.mean())
        self.weights = idf[:, None] * tf * (BM25_K1 + 1) / (tf + norm[None, :])

    def ranking(self, query: str, among: Collection[int] | None = None) -> Iterator[tuple[int, float]]:
        """``(passage_id, score)`` of the passages (of ``among`` when given) sharing a word
        with ``query``, best first (ties by id)."""
        terms = sorted({self.vocab[t] for t in tokens(query) if t in self.vocab})
        scores = self.weights[terms].sum(axis=0)
        keep = scores > 0
        if among is not None:
            keep &= np.isin(self.ids, list(among))
        rows = np.flatnonzero(keep)
        for i in rows[np.lexsort((self.ids[rows], -scores[rows]))]:
            yield int(self.ids[i]), round(float(scores[i]), 4)


# --------------------------------------------------------------------------- records


@dataclass
class MiniQuestion:
    """One question of a stand-in dataset, as its files state it."""

    question: str
    answers: list[str]
    gold: int
    negatives: list[int]
    hard: list[tuple[int, float]]
    adv_hard: list[tuple[int, float]]
    source: DemoQuestion


@dataclass
class PaperMini:
    passages: list[DemoPassage]
    # dataset name -> split -> questions
    questions: dict[str, dict[str, list[MiniQuestion]]]
    squad: dict[str, dict]  # SQuAD file name -> its JSON document

    def passage(self, pid: int) -> DemoPassage:
        return self.passages[pid - 1]


def _styled(dataset: MiniDataset, question: str) -> str:
    # NQ's questions are search-engine queries: lower case, no question mark.
    return question.rstrip("?").lower() if dataset.name == "nq" else question


def _answers(dataset: MiniDataset, q: DemoQuestion, rng: random.Random) -> list[str]:
    return [answer_regex(a, rng) for a in q.answers] if dataset.match == "regex" else list(q.answers)


def _negatives(answers: list[str], gold: int, ranking: Iterable[tuple[int, float]], n: int,
               has: Callable[[list[str], int], bool], skip: set[int] = frozenset()) -> list[tuple[int, float]]:
    out = []
    for pid, score in ranking:
        if len(out) == n:
            break
        if pid != gold and pid not in skip and not has(answers, pid):
            out.append((pid, score))
    return out


def _dataset_questions(dataset: MiniDataset, data: DemoData, bm25: _BM25, matcher: PassageMatcher,
                       sizes: Mapping[str, int], n_hard: int, seed: int) -> dict[str, list[MiniQuestion]]:
    rng = random.Random(f"dcsr-mini:{seed}:{dataset.name}")

    def has(answers: list[str], pid: int) -> bool:
        return matcher(answers, pid, data.passage(pid).text)

    by_name: dict[str, list[int]] = defaultdict(list)
    for p in data.passages:
        by_name[data.entities[p.entity].name].append(p.id)
    questions = data.questions[dataset.domain]["train"]
    per_gold = Counter(q.passage_id for q in questions)
    questions = [q for q in questions if per_gold[q.passage_id] >= dataset.min_questions_per_passage]
    splits = split_by_entity(questions, sizes, rng)
    out: dict[str, list[MiniQuestion]] = {}
    for split in SPLITS:
        out[split] = []
        for q in splits[split]:
            answers = _answers(dataset, q, rng)
            text = _styled(dataset, q.question)
            hard = _negatives(answers, q.passage_id, bm25.ranking(text), n_hard, has)
            # The hardest distractors of the generated world: the gold entity's other
            # passages and its namesakes' (same name, other facts), best BM25 first; then
            # BM25's next ranks. Most differ from the BM25 hard negatives, as DPR's
            # model-mined ones differ from its BM25 ones.
            near = by_name[data.entities[q.entity].name]
            adv = _negatives(answers, q.passage_id, bm25.ranking(text, among=near), n_hard, has)
            adv += _negatives(answers, q.passage_id, bm25.ranking(text), n_hard - len(adv), has,
                              skip={pid for pid, _ in hard + adv})
            random_negs = []
            while len(random_negs) < N_RANDOM_NEGATIVES:
                pid = rng.choice(data.passages).id
                if pid != q.passage_id and pid not in random_negs and not has(answers, pid):
                    random_negs.append(pid)
            out[split].append(MiniQuestion(text, answers, q.passage_id, random_negs, hard, adv, q))
    return out


def _answer_start(text: str, answer: str) -> int:
    m = re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", text)
    if m is None:
        raise InputError("mini generator", f"answer {answer!r} not in its gold passage {text[:60]!r}...")
    return m.start()


def _shorter_span(answer: str) -> str:
    """The answer's last word ("1875" of "3 March 1875", "Morell" of "Tesa Morell"), or its
    first where the last is a unit ("540" of "540 kilometres"); the whole of a one-word answer."""
    words = answer.split()
    return words[0] if words[-1].islower() else words[-1]


def _squad_docs(data: DemoData, questions: Mapping[str, list[MiniQuestion]], seed: int) -> dict[str, dict]:
    """SQuAD v1.1 JSON: an article per entity, a paragraph per corpus passage; the train and
    dev questions in the train file, the test questions in the dev file with three answers
    each (SQuAD's dev set has several annotators' answers)."""
    passages_of: dict[int, list[DemoPassage]] = defaultdict(list)
    for p in data.passages:
        passages_of[p.entity].append(p)
    docs = {}
    for name, splits in ((SQUAD_TRAIN_FILE, ("train", "dev")), (SQUAD_DEV_FILE, ("test",))):
        qs_of: dict[int, list[MiniQuestion]] = defaultdict(list)
        for split in splits:
            for q in questions[split]:
                qs_of[q.gold].append(q)
        entities = sorted({data.passage(pid).entity for pid in qs_of})
        articles = []
        for ent in entities:
            paragraphs = []
            for p in passages_of[ent]:
                qas = []
                for q in qs_of.get(p.id, []):
                    answer = q.answers[0]
                    start = _answer_start(p.text, answer)
                    answers = [{"answer_start": start, "text": answer}]
                    if name == SQUAD_DEV_FILE:
                        # SQuAD's dev set has three annotators' answers, some a shorter span.
                        short = _shorter_span(answer)
                        answers += [{"answer_start": start, "text": answer},
                                    {"answer_start": start + answer.rindex(short), "text": short}]
                        # DPR's SQuAD test qas list the dev set's distinct answers.
                        q.answers = list(dict.fromkeys(a["text"] for a in answers))
                    qid = hashlib.sha1(f"dcsr-mini:{seed}:{name}:{q.question}:{p.id}".encode()).hexdigest()[:24]
                    qas.append({"answers": answers, "question": q.question, "id": qid})
                paragraphs.append({"context": p.text, "qas": qas})
            articles.append({"title": passages_of[ent][0].title.replace(" ", "_"), "paragraphs": paragraphs})
        docs[name] = {"data": articles, "version": "1.1"}
    return docs


def build_paper_mini(seed: int = DEFAULT_SEED, n_entities: int = DEFAULT_N_ENTITIES,
                     sizes: Mapping[str, int] | None = None,
                     hard_negatives: int = DEFAULT_HARD_NEGATIVES) -> PaperMini:
    """The miniature data set in memory (see :func:`write_paper_mini`)."""
    sizes = {**DEFAULT_SIZES, **(sizes or {})}
    for split, n in sizes.items():
        if split not in SPLITS or not isinstance(n, int) or n < 1:
            raise InputError(f"sizes.{split}", f"must be a positive number of questions (train, dev, test), got {n!r}")
    if hard_negatives < 1:
        raise InputError("hard_negatives", f"must be at least 1, got {hard_negatives}")
    # Every question lands in the generator's "train" split: the stand-ins split by their own sizes.
    data = build_demo(seed, n_entities, domains=[d.domain for d in DATASETS], dev_fraction=0.0, test_fraction=0.0,
                      random_negatives=False)
    bm25 = _BM25(data.passages)
    matchers = {m: PassageMatcher(m) for m in sorted({d.match for d in DATASETS})}
    questions = {d.name: _dataset_questions(d, data, bm25, matchers[d.match], sizes, hard_negatives, seed)
                 for d in DATASETS}
    return PaperMini(data.passages, questions, _squad_docs(data, questions["squad1"], seed))


# --------------------------------------------------------------------------- writing


def _ctx(p: DemoPassage, id_key: str, score: float, title_score: int) -> dict:
    return {"title": p.title, "text": p.text, "score": score, "title_score": title_score, id_key: str(p.id)}


def _records(mini: PaperMini, dataset: MiniDataset, split: str, adversarial: bool = False):
    for q in mini.questions[dataset.name][split]:
        gold = mini.passage(q.gold)
        yield {
            "dataset": f"{dataset.name}_{split}_psgs_w100",
            "question": q.question,
            "answers": q.answers,
            "positive_ctxs": [_ctx(gold, dataset.id_key, 1000, 1)],
            "negative_ctxs": [_ctx(mini.passage(pid), dataset.id_key, 0, 0) for pid in q.negatives],
            "hard_negative_ctxs": [_ctx(mini.passage(pid), dataset.id_key, s, 0)
                                   for pid, s in (q.adv_hard if adversarial else q.hard)],
        }


@contextlib.contextmanager
def _gzip_path(final: Path):
    """A plain temporary path to write; gzipped onto ``final`` when the block succeeds. The
    header holds no time and no name, so the bytes depend on the content only."""
    with atomic_path(final) as tmp:
        plain = tmp.with_name(tmp.name + ".plain")
        try:
            yield plain
            with open(plain, "rb") as src, open(tmp, "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
                shutil.copyfileobj(src, gz)
        finally:
            plain.unlink(missing_ok=True)


def _write(final: Path, write: Callable[[Path, Iterable], int], items: Iterable) -> int:
    if final.name.endswith(".gz"):
        with _gzip_path(final) as plain:
            return write(plain, items)
    return write(final, items)


def summarize(mini: PaperMini) -> dict:
    """Passages, and per dataset its questions per split and its train gold passages' question counts."""
    out: dict = {"passages": len(mini.passages), "datasets": {}}
    for name, splits in mini.questions.items():
        per_gold = Counter(Counter(q.gold for q in splits["train"]).values())
        out["datasets"][name] = {**{s: len(qs) for s, qs in splits.items()},
                                 "train_questions_per_gold_passage": {str(k): per_gold[k] for k in sorted(per_gold)}}
    return out


def write_paper_mini(out_dir: str | os.PathLike, seed: int = DEFAULT_SEED, n_entities: int = DEFAULT_N_ENTITIES,
                     sizes: Mapping[str, int] | None = None, hard_negatives: int = DEFAULT_HARD_NEGATIVES,
                     log: Callable[[str], None] | None = None) -> dict:
    """Write every file of :data:`RESOURCE_FILES` and ``MANIFEST.json`` into ``out_dir``.

    ``sizes`` caps each dataset's questions per split (default :data:`DEFAULT_SIZES`; fewer
    where a domain has fewer). Each file appears whole under its name; the manifest, written
    last, lists each file's bytes and sha256. Returns :func:`summarize`'s summary.
    """
    mini = build_paper_mini(seed, n_entities, sizes, hard_negatives)
    write_mini_files(mini, out_dir, log)
    return summarize(mini)


def write_mini_files(mini: PaperMini, out_dir: str | os.PathLike, log: Callable[[str], None] | None = None) -> None:
    """Write a built miniature set into ``out_dir``, ``MANIFEST.json`` last."""
    log = log or (lambda msg: print(msg, file=sys.stderr))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = _write(out / CORPUS_FILE, write_corpus, (Passage(p.id, p.text, p.title) for p in mini.passages))
    log(f"wrote {n} passages to {out / CORPUS_FILE}")
    for d in DATASETS:
        files = d.files()
        for split in ("train", "dev"):
            n = _write(out / files[split], write_biencoder, _records(mini, d, split))
            log(f"wrote {n} {d.name} {split} questions to {out / files[split]}")
        n = _write(out / files["test"], write_qas, (QA(q.question, q.answers) for q in mini.questions[d.name]["test"]))
        log(f"wrote {n} {d.name} test questions to {out / files['test']}")
    nq = next(d for d in DATASETS if d.name == "nq")
    _write(out / NQ_ADV_HN_FILE, write_biencoder, _records(mini, nq, "train", adversarial=True))
    for name, doc in mini.squad.items():
        with atomic_open(out / name, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
    manifest = {name: {"bytes": (out / name).stat().st_size, "sha256": file_sha256(out / name)}
                for name in sorted(RESOURCE_FILES.values())}
    with atomic_open(out / MANIFEST, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
        fh.write("\n")
    log(f"wrote {len(manifest)} files and {MANIFEST} to {out}")
