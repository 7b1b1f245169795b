"""Hard negatives mined by a trained dense retriever, for a second round of training (DCSR
Section 4.5, Tables 3 and 5): "use such checkpoint to acquire semantically hard negative
passages from the whole Wikipedia corpus".

The miner's question encoder encodes the training questions; every shard index of the
miner's passage encoder is searched in turn (one shard in memory at a time) and the per-shard
top hits are merged exactly (:func:`dcsr.retrieval.index.merge_topk`). The hard negatives of a question
are its top-ranked passages that are not a positive and whose text contains no answer
(DPR's ``has_answer``), in rank order, at most ``n_negatives``.

A DCSR miner indexes sentences, so its hits are sentences: a passage is kept once, at the
rank of its best sentence, and its context carries that sentence's number (``sentence``,
an index into the passage's sentence spans, as ``.sents.npy`` stores it), which DCSR's
sampler then uses as the sentence-specific negative (DCSR-hard). A DPR miner's hits are
passages (DPR-hard style).

The candidate selection (:func:`select_negatives`) is shared with BM25 mining
(:mod:`dcsr.retrieval.bm25`): the corpus is streamed once and only the texts of the passages that are
currently selected by some question are held.
"""

from __future__ import annotations

import logging
import os
import time
from bisect import insort
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm import tqdm

from dcsr.data.answers import PassageMatcher, encoder_question
from dcsr.errors import InputError
from dcsr.data.formats import iter_biencoder_at, iter_json_array, iter_passages, write_biencoder

log = logging.getLogger(__name__)

#: A DCSR hit is keyed ``passage_id * SENTENCE_SLOTS + sentence`` so one int64 id array goes
#: through the shard search and the exact merge unchanged (ties break by passage, then sentence).
SENTENCE_SLOTS = 1 << 12


# --------------------------------------------------------------------------- training questions


def training_questions(train_json: str | os.PathLike, has_hard_negatives: list[bool] | None = None,
                       wheres: list[str] | None = None):
    """``(questions, answers, positive_ids, positive_texts)`` of a DPR biencoder JSON, streamed
    (the records themselves stay on disk). ``has_hard_negatives``, if given, gets whether each
    record already has hard negatives (BM25 mining can keep those); ``wheres``, if given,
    where each record is (``file:line (record n)``, for errors).

    A record without a positive passage is read (its positive sets are empty) and mined as any
    other; training leaves it out, as DPR's does (its TriviaQA file holds many). The file must
    hold at least one record, and some record must have a positive passage (training needs one:
    this is reported here, against the training file itself, not later against the mined file)."""
    questions: list[str] = []
    answers: list[list[str]] = []
    positive_ids: list[set[int]] = []
    positive_texts: list[set[str]] = []
    for where, rec in iter_biencoder_at(train_json, require_positive=False):
        if has_hard_negatives is not None:
            has_hard_negatives.append(bool(rec["hard_negative_ctxs"]))
        if wheres is not None:
            wheres.append(where)
        questions.append(rec["question"])
        answers.append(rec["answers"])
        ids, texts = set(), set()
        for ctx in rec["positive_ctxs"]:
            pid = str(ctx.get("passage_id", "")).strip()
            digits = pid.removeprefix("-")
            # ASCII digits only ('²' and '٣' are digits to str.isdigit), and few enough for an int64
            if digits.isascii() and digits.isdigit() and len(digits) <= 19:
                ids.add(int(pid))
            texts.add(ctx["text"].strip())
        positive_ids.append(ids)
        positive_texts.append(texts)
    if not questions:
        raise InputError(str(train_json), "holds no training records (an empty JSON list); "
                                          "expected at least one record with a question and a positive passage")
    if not any(texts for texts in positive_texts):
        raise InputError(str(train_json), f"none of its {len(questions)} records has a positive passage "
                                          "('positive_ctxs'); training needs at least one")
    return questions, answers, positive_ids, positive_texts


# --------------------------------------------------------------------------- selection


def select_negatives(pids: np.ndarray, corpus_tsv: str | os.PathLike, answers: Sequence[list[str]],
                     positive_ids: Sequence[set[int]], positive_texts: Sequence[set[str]], n_negatives: int,
                     match_type: str = "string", mine: Sequence[bool] | None = None, progress: bool = False,
                     positive_wheres: Sequence[str] | None = None):
    """The hard negatives among every question's ranked hits ``pids [Q, depth]`` (-1: none).

    Per question, the ranks (0-based, ascending) of its first ``n_negatives`` hits that are not
    a positive (by id or by text) and whose text contains none of its answers; questions with
    ``mine[q]`` False are left empty. The corpus is streamed once; a passage's text is held
    only while some question selects it. With ``positive_wheres`` (where each question's record
    is, :func:`training_questions`), a positive ``passage_id`` that the corpus lacks is an error
    naming the record: the training file and the corpus do not belong together. Returns ``(selected, texts, checked)``: the ranks per
    question, ``{passage_id: (title, text)}`` of every selected passage, and the number of
    (question, passage) answer checks made.
    """
    nq, depth = pids.shape
    mine = [True] * nq if mine is None else mine
    flat = np.where(np.repeat(np.asarray(mine, dtype=bool), depth), pids.ravel(), -1)
    valid = np.flatnonzero(flat >= 0)
    order = valid[np.argsort(flat[valid], kind="stable")]
    sorted_pids = flat[order]
    uniq, starts = np.unique(sorted_pids, return_index=True)
    ends = np.append(starts[1:], len(sorted_pids))
    selected: list[list[int]] = [[] for _ in range(nq)]
    texts: dict[int, tuple[str, str]] = {}
    refs: dict[int, int] = {}
    checked = 0
    matcher = PassageMatcher(match_type)

    all_positives = np.unique(np.fromiter((i for ids in positive_ids for i in ids), dtype=np.int64))
    positive_found = np.zeros(len(all_positives), dtype=bool)

    def process(batch) -> None:
        nonlocal checked
        ids = np.fromiter((p.id for p in batch), dtype=np.int64, count=len(batch))
        if positive_wheres is not None and len(all_positives):
            at_pos = np.clip(np.searchsorted(all_positives, ids), 0, len(all_positives) - 1)
            positive_found[at_pos[all_positives[at_pos] == ids]] = True
        pos = np.searchsorted(uniq, ids)
        pos[pos >= len(uniq)] = 0
        hit = np.flatnonzero(uniq[pos] == ids) if len(uniq) else []
        for i in hit:
            p = batch[i]
            j = pos[i]
            prepared = None  # the passage tokenized once, for all questions that retrieved it
            for f in order[starts[j]:ends[j]]:
                q, rank = divmod(int(f), depth)
                sel = selected[q]
                if len(sel) >= n_negatives and rank > sel[-1]:
                    continue  # cannot enter this question's selection
                if p.id in positive_ids[q] or p.text.strip() in positive_texts[q]:
                    continue
                checked += 1
                if prepared is None:
                    prepared = matcher.prepare(p.text)
                if matcher.match(answers[q], prepared):
                    continue
                insort(sel, rank)
                texts[p.id] = (p.title, p.text)
                refs[p.id] = refs.get(p.id, 0) + 1
                if len(sel) > n_negatives:
                    dropped = int(pids[q, sel.pop()])
                    refs[dropped] -= 1
                    if refs[dropped] == 0:
                        del refs[dropped], texts[dropped]

    batch: list = []
    n_corpus = 0
    with tqdm(desc="check hits for answers", unit=" passages", disable=not progress, mininterval=2.0) as bar:
        for p in iter_passages(corpus_tsv):
            batch.append(p)
            n_corpus += 1
            if len(batch) >= 65536:
                process(batch)
                bar.update(len(batch))
                batch = []
        if batch:
            process(batch)
            bar.update(len(batch))
    if positive_wheres is not None and not positive_found.all():
        lost = set(all_positives[~positive_found].tolist())
        q = next(q for q in range(nq) if positive_ids[q] & lost)
        pid = min(positive_ids[q] & lost)
        raise InputError(positive_wheres[q], f"positive passage_id {pid} is not in the corpus {corpus_tsv} "
                                             f"({len(lost)} positive id(s) of the training file are not); "
                                             "the training file and the corpus do not belong together")
    log.info("streamed %d corpus passages; checked %d (question, passage) pairs for answers", n_corpus, checked)
    return selected, texts, checked


# --------------------------------------------------------------------------- dense search


def sentence_keys(ids: np.ndarray, sentence_numbers: np.ndarray, where: str) -> np.ndarray:
    """One int64 key per DCSR vector: ``passage_id * SENTENCE_SLOTS + sentence``."""
    ids = np.asarray(ids, dtype=np.int64)
    sents = np.asarray(sentence_numbers, dtype=np.int64)
    if len(sents) != len(ids):
        raise InputError(where, f"has {len(sents)} sentence numbers for {len(ids)} vectors")
    if len(ids) and (sents.min() < 0 or sents.max() >= SENTENCE_SLOTS or ids.min() < 0
                     or ids.max() >= np.iinfo(np.int64).max // SENTENCE_SLOTS):
        raise InputError(where, "holds a sentence number outside 0..4095 (or a passage id out of range); "
                                "was the shard embedded by a DCSR model?")
    return ids * SENTENCE_SLOTS + sents


def search_shards(queries: np.ndarray, shards: Sequence[tuple[str, str, str | None]], depth: int,
                  use_gpu: bool | str = "auto", batch_size: int = 4096, progress: bool = True,
                  search_params: str = ""):
    """The exact top-``depth`` over all shards for every query: ``(scores [Q, depth], keys [Q, depth])``.

    ``shards``: ``(index, ids .npy, sentence numbers .npy or None)`` per shard; with sentence
    numbers the keys are :func:`sentence_keys`, else passage ids. Shards are read one at a time
    and merged into the running top-k, so memory stays ``O(Q x depth)``. ``search_params``
    (``index.search_params``: nprobe, efSearch) are set on each shard index as the test-set
    search sets them."""
    from dcsr.retrieval.index import (check_ids, check_one_placement, load_npy, merge_topk, placement_of, read_index,
                                      search_index)

    scores = np.full((len(queries), depth), -np.inf, dtype=np.float32)
    keys = np.full((len(queries), depth), -1, dtype=np.int64)
    placements: list[str] = []
    for n, (index_path, ids_npy, sents_npy) in enumerate(shards):
        index = read_index(index_path, use_gpu=use_gpu, search_params=search_params, k=depth)
        placements.append(placement_of(index))  # one place for every shard: scores that rank alike
        check_one_placement([p for p, _, _ in shards[: n + 1]], placements)
        ids = load_npy(ids_npy, ndim=1)
        check_ids(ids, ids_npy, index, index_path)
        if sents_npy is not None:
            ids = sentence_keys(ids, load_npy(sents_npy, ndim=1), str(sents_npy))
        s_all = np.empty_like(scores)
        k_all = np.empty_like(keys)
        for i in tqdm(range(0, len(queries), batch_size), desc=f"search shard {n + 1}/{len(shards)}",
                      unit=" batches", disable=not progress, mininterval=2.0):
            s_all[i : i + batch_size], k_all[i : i + batch_size] = search_index(
                index, ids, queries[i : i + batch_size], depth, batch_size, where="training questions")
        del index
        scores, keys = merge_topk([scores, s_all], [keys, k_all], depth)
    return scores, keys


def first_sentence_per_passage(scores: np.ndarray, keys: np.ndarray):
    """DCSR hits ``keys [Q, M]`` (:func:`sentence_keys`, best first, -1 padding) to passages:
    each passage once, at the rank of its best sentence. Returns ``(scores, pids, sentences)``,
    each ``[Q, D]`` with D the most distinct passages of any question (-1 / -inf padding)."""
    q, m = keys.shape
    valid = keys >= 0
    pids = np.where(valid, keys // SENTENCE_SLOTS, -1)
    sents = np.where(valid, keys % SENTENCE_SLOTS, -1)
    rows = np.repeat(np.arange(q), m)
    cols = np.tile(np.arange(m), q)
    flat = pids.ravel()
    order = np.lexsort((cols, flat, rows))  # by question, passage, then rank
    first = np.ones(len(order), dtype=bool)
    first[1:] = (rows[order][1:] != rows[order][:-1]) | (flat[order][1:] != flat[order][:-1])
    keep = np.zeros(q * m, dtype=bool)
    keep[order[first]] = True
    keep = keep.reshape(q, m) & valid
    d = int(keep.sum(axis=1).max()) if q else 0
    pos = np.cumsum(keep, axis=1) - 1
    r, c = np.nonzero(keep)
    out_scores = np.full((q, d), -np.inf, dtype=np.float32)
    out_pids = np.full((q, d), -1, dtype=np.int64)
    out_sents = np.full((q, d), -1, dtype=np.int64)
    out_scores[r, pos[r, c]] = scores[r, c]
    out_pids[r, pos[r, c]] = pids[r, c]
    out_sents[r, pos[r, c]] = sents[r, c]
    return out_scores, out_pids, out_sents


def write_mined_negatives(train_json: str | os.PathLike, out_json: str | os.PathLike, nq: int,
                          selected: Sequence[Sequence[int]], pids: np.ndarray, scores: np.ndarray,
                          texts: dict, sents: np.ndarray | None = None,
                          mine: Sequence[bool] | None = None) -> tuple[int, int]:
    """Write ``train_json`` to ``out_json`` (atomically) with each mined record's
    ``hard_negative_ctxs`` replaced by its ``selected`` hits (ranks into ``pids``/``scores``
    ``[nq, depth]``; ``texts``: passage id -> (title, text); ``sents``: a DCSR miner's sentence
    numbers); ``mine[q]`` false keeps record ``q`` as it is. Returns ``(records with negatives,
    negatives written)``; a training file that changed meanwhile is an error."""
    n_with, n_total = 0, 0

    def records():
        nonlocal n_with, n_total
        for q, (_line, rec) in enumerate(iter_json_array(train_json)):
            if mine is None or mine[q]:
                negs = []
                for rank in selected[q]:
                    pid = int(pids[q, rank])
                    title, text = texts[pid]
                    ctx = {"title": title, "text": text, "score": round(float(scores[q, rank]), 6),
                           "passage_id": str(pid)}
                    if sents is not None:
                        ctx["sentence"] = int(sents[q, rank])
                    negs.append(ctx)
                rec = dict(rec)
                rec["hard_negative_ctxs"] = negs
                n_with += bool(negs)
                n_total += len(negs)
            yield rec

    written = write_biencoder(out_json, records())
    if written != nq:
        raise InputError(str(train_json), f"changed while mining ({nq} records, then {written})")
    return n_with, n_total


def mine_dense_negatives(model_dir: str | os.PathLike, train_json: str | os.PathLike,
                         corpus_tsv: str | os.PathLike, shards: Sequence[tuple[str, str, str]],
                         out_json: str | os.PathLike, n_negatives: int = 30, depth: int = 100,
                         match_type: str = "string", batch_size: int = 128, use_gpu: bool | str = "auto",
                         device: str = "auto", progress: bool = True, search_params: str = "") -> dict:
    """Replace the ``hard_negative_ctxs`` of a DPR biencoder JSON with negatives mined by the
    bi-encoder at ``model_dir`` over its shard indexes of ``corpus_tsv``.

    ``shards``: ``(index .faiss, ids .npy, sentence numbers .npy)`` of every shard (as
    ``embed_shard`` / ``index_shard`` write them). ``depth``: hits searched per question
    (passages for a DPR miner, sentences for a DCSR miner). Each negative context has
    ``title``, ``text``, ``score`` (the miner's dot product), ``passage_id`` and, for a DCSR
    miner, ``sentence``. All other fields of every record are kept. Returns statistics.
    """
    from dcsr.retrieval.embed import _load_for_inference, encode_texts, is_sentence_level

    if n_negatives < 1 or depth < 1:
        raise InputError("mine_dense_negatives", "n_negatives and depth must be >= 1")
    if not shards:
        raise InputError("mine_dense_negatives", "no shard index given")
    t0 = time.time()
    wheres: list[str] = []
    questions, answers, positive_ids, positive_texts = training_questions(train_json, wheres=wheres)
    nq = len(questions)
    dev, tokenizer, model, meta, _ = _load_for_inference(model_dir, device)
    sentence_level = is_sentence_level(meta)
    log.info("%s: %d questions; miner %s (%s), %d shards, depth %d", train_json, nq, model_dir,
             meta.get("method", "dpr"), len(shards), depth)
    side = "marked_question" if sentence_level else "question"
    max_length = int(meta.get("question_max_length", 256))
    rule, where = meta.get("question_text", "raw"), f"{model_dir}/dcsr.json: question_text"  # as the miner trained
    texts = [encoder_question(q, rule, where) for q in questions]
    vectors = encode_texts(model, tokenizer, texts, None, side, max_length, batch_size, dev, progress=progress,
                           desc="encode training questions")
    del model
    if nq == 0:
        vectors = np.zeros((0, 1), dtype=np.float32)
    scores, keys = search_shards(vectors, [(i, d, s if sentence_level else None) for i, d, s in shards], depth,
                                 use_gpu=use_gpu, progress=progress, search_params=search_params)
    if sentence_level:
        scores, pids, sents = first_sentence_per_passage(scores, keys)
    else:
        pids, sents = keys, None
    selected, texts, checked = select_negatives(pids, corpus_tsv, answers, positive_ids, positive_texts,
                                                n_negatives, match_type, progress=progress,
                                                positive_wheres=wheres)

    n_with, n_total = write_mined_negatives(train_json, out_json, nq, selected, pids, scores, texts, sents)
    stats = {"questions": nq, "with_negatives": n_with, "mean_negatives": round(n_total / nq, 3) if nq else 0.0,
             "answer_checks": checked, "shards": len(shards), "depth": depth,
             "miner": "sentences" if sentence_level else "passages"}
    log.info("dense hard negatives: %s (%.1f s) -> %s", stats, time.time() - t0, Path(out_json))
    return stats
