"""A passage encoder's index of a corpus in Pyserini's dense layout, for
``pyserini.search.faiss.FaissSearcher``.

Pyserini opens a folder that holds ``index`` (one FAISS index) and ``docid`` (line i: the
docid of the index's vector i). Ours is sharded (``results/index/<corpus>/<pmodel>/shard-<n>.faiss``)
with the ids apart (``results/embeddings/...shard-<n>.ids.npy``, and ``.sents.npy`` for DCSR).
:func:`export_pyserini` writes::

    out_dir/index            every vector of the corpus in one FAISS index (inner product)
    out_dir/docid            DPR: the passage id; DCSR: <passage id>#<sentence number> (a BEIR
                             corpus: its document _id in place of the passage id, as its qrels)
    out_dir/query_encoder/   DPR models: the question encoder, for Pyserini's DprQueryEncoder
                             (CLS + dot product) or AutoQueryEncoder (mean-pooled or normalized)
    out_dir/export.json      what it holds, how to search it, the sha256 of index and docid
    out_dir/README.md        the same for a reader, with the Python to search it

**The shards.** One shard is copied as it is, whatever ``index.factory`` built it, with
``index.search_params`` set on it first (FAISS writes ``nprobe`` and ``efSearch`` into the
file, so Pyserini searches it as our search jobs do). Several ``Flat`` shards become one
``IndexFlatIP``: each shard's vectors read back from its index (``reconstruct_n``: a Flat
index stores them as they are), shard after shard, the docids in the same order, so
Pyserini's exact search finds what our per-shard search and exact merge find (ties aside: we
break them by the smaller passage id, FAISS by row). Shards of any other factory are refused:
each was trained on its own shard (IVF centroids, PQ codebooks, SQ ranges) or holds its own
graph (HNSW), so their codes do not go into one index, re-encoding their vectors would search
other vectors than ours, and FAISS cannot write the one index that holds several
(``IndexShards``). The merge holds the merged index in memory (4 x dim bytes a vector, as
Pyserini does to search it) and one shard at a time.

**DCSR.** The index holds sentences: the docid ``<passage id>#<sentence number>`` names the
sentence (the number counts the passage's sentences from 0, as ``.sents.npy``), and
Pyserini's searcher returns raw sentence hits, a passage once per sentence it finds. Turning
them into a passage ranking (the top 100 x k sentences, a softmax, HasAns) is this pipeline's
merge step (:mod:`dcsr.retrieval.hasans`), not Pyserini's; our passage runs are the TREC files
under ``results/runs/``. A DCSR question vector is the state at its ``<sent>`` marker
(``[CLS] <sent> question [SEP]``), which neither of Pyserini's query encoders computes (they
take ``[CLS]`` or the mean of all tokens): no query encoder is written, and the question
vectors are passed to the searcher as an array (ours: ``results/queries/<qmodel>/<dataset>.npy``).
So is a DPR model whose similarity DPR's and sentence-transformers' formats do not hold
(:func:`dcsr.models.export.export_format`).
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from dcsr.data.beir import md_code_span, read_doc_ids
from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.integrity import file_digests
from dcsr.retrieval.index import check_ids, load_npy, parse_search_params, read_index
from dcsr.retrieval.placement import load_faiss

log = logging.getLogger(__name__)

INDEX_FILE = "index"
DOCID_FILE = "docid"
QUERY_ENCODER_DIR = "query_encoder"
EXPORT_META = "export.json"
README = "README.md"
#: between the passage id and the sentence number of a DCSR docid: the first of these that no
#: document _id holds (Pyserini's ``--max-passage-delimiter`` splits a docid at its first one)
SENTENCE_SEPARATORS = ("#", "|", "~", "^", "@", "!")
SENTENCE_SEPARATOR = SENTENCE_SEPARATORS[0]
#: ParameterSpace settings FAISS does not write into an index file: IVF-PQ's polysemous
#: threshold is read back as 0 (Pyserini's search would then rank otherwise than ours)
NOT_WRITTEN = ("ht",)
_CHUNK = 1 << 16  # vectors read back from a shard and added at a time, docids written at a time


def _refuse_merge(factory: str, n: int, path) -> InputError:
    return InputError("config: index.factory", (
        f"{factory} ({path}): {n} shard indexes of a factory other than Flat do not merge into the one index "
        "Pyserini reads: each shard trained its own codes (IVF centroids, PQ codebooks, SQ ranges) or built its "
        "own graph (HNSW), and FAISS writes no index of indexes; export a corpus indexed in one shard "
        "(embed.shards: 1, embed.passages_per_shard unset), whose index is copied as it is, or with "
        "index.factory: Flat, whose shards merge exactly"))


def _flat_ip(index):
    """The shard index as a FAISS Flat index of inner products, or None when it is another kind."""
    faiss = load_faiss()
    flat = faiss.downcast_index(index)
    if isinstance(flat, faiss.IndexFlat) and flat.metric_type == faiss.METRIC_INNER_PRODUCT:
        return flat
    return None


def sentence_separator(names: Mapping[int, str] | None) -> str:
    """The separator of a DCSR docid: ``#``, or with a BEIR corpus's ``names`` the first of
    :data:`SENTENCE_SEPARATORS` that no ``_id`` holds, so that Pyserini's ``--max-passage`` gives
    the document's ``_id`` back whole."""
    if not names:
        return SENTENCE_SEPARATOR
    held = set().union(*(set(n) for n in names.values())) & set(SENTENCE_SEPARATORS)
    free = next((c for c in SENTENCE_SEPARATORS if c not in held), None)
    if free is None:
        raise InputError("export_pyserini", f"the corpus's document _ids hold every one of {' '.join(SENTENCE_SEPARATORS)}, "
                                            "so no separator can set a sentence number apart from an _id")
    return free


def docid_lines(ids: np.ndarray, sentence_numbers: np.ndarray | None, where: str,
                names: Mapping[int, str] | None = None, separator: str = SENTENCE_SEPARATOR) -> Iterator[str]:
    """The ``docid`` lines of one shard's vectors, in order: the passage ids, or with
    ``sentence_numbers`` (DCSR) ``<passage id><separator><sentence number>``; with ``names`` (a BEIR
    corpus's ``{passage id: _id}``), the document's ``_id`` in place of the passage id. ``where``
    names the sentence numbers' file in errors (raised before the first line)."""
    if sentence_numbers is not None:
        if len(sentence_numbers) != len(ids):
            raise InputError(where, f"has {len(sentence_numbers)} sentence numbers for {len(ids)} vectors; the two "
                                    "files come from different runs of the shard: embed it again")
        if len(sentence_numbers) and int(sentence_numbers.min()) < 0:
            raise InputError(where, "holds sentence number -1 (a whole-passage vector): these are a DPR model's "
                                    "passage vectors, not DCSR's sentences")
    return _docids(ids, sentence_numbers, names, separator)


def _docids(ids: np.ndarray, sentence_numbers: np.ndarray | None, names: Mapping[int, str] | None,
            separator: str) -> Iterator[str]:
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK].tolist()
        if names is not None:
            chunk = [names[i] for i in chunk]
        if sentence_numbers is None:
            yield from (f"{i}\n" for i in chunk)
        else:
            sents = sentence_numbers[start : start + _CHUNK].tolist()
            yield from (f"{i}{separator}{s}\n" for i, s in zip(chunk, sents))


def write_index_and_docids(shards: Sequence[tuple[str | os.PathLike, str | os.PathLike, str | os.PathLike | None]],
                           out_dir: Path, search_params: str = "", doc_ids: str | os.PathLike | None = None) -> dict:
    """``out_dir/index`` and ``out_dir/docid`` from the shards ``(index, ids .npy, sentence numbers
    .npy or None)`` in shard order (see the module's text); ``doc_ids``: a BEIR corpus's
    ``beir-doc-ids.tsv``, whose ``_id`` names each passage in ``docid``. Returns what they hold."""
    faiss = load_faiss()
    if not shards:
        raise InputError("export_pyserini", "no shard indexes to export")
    merged, kind, dim = None, None, None
    if doc_ids is not None:
        names = read_doc_ids(doc_ids)
    else:
        names = None
    separator = sentence_separator(names) if any(s is not None for _, _, s in shards) else None
    with open(out_dir / DOCID_FILE, "w", encoding="utf-8") as docid:
        for n, (index_path, ids_path, sents_path) in enumerate(shards):
            index = read_index(index_path, use_gpu=False, search_params=search_params if len(shards) == 1 else "")
            ids = load_npy(ids_path, ndim=1)
            check_ids(ids, ids_path, index, index_path)
            sents = load_npy(sents_path, ndim=1) if sents_path is not None else None
            docid.writelines(docid_lines(ids, sents, str(sents_path), _beir_names(names, doc_ids, ids, ids_path),
                                         separator or SENTENCE_SEPARATOR))
            kind = type(faiss.downcast_index(index)).__name__
            if dim is not None and index.d != dim:
                raise InputError(str(index_path), f"holds vectors of dimension {index.d}, and shard 0 of {dim}; "
                                                  "the shards come from different encoders: embed them again")
            dim = int(index.d)
            if len(shards) == 1:
                merged = index
                break
            flat = _flat_ip(index)
            if flat is None:
                raise _refuse_merge(kind, len(shards), index_path)
            if merged is None:
                merged = faiss.IndexFlatIP(dim)
            for start in range(0, flat.ntotal, _CHUNK):
                merged.add(flat.reconstruct_n(start, min(_CHUNK, flat.ntotal - start)))
            log.info("shard %d/%d: %d vectors added (%s)", n + 1, len(shards), flat.ntotal, index_path)
            del index, flat
    faiss.write_index(merged, str(out_dir / INDEX_FILE))
    return {"vectors": int(merged.ntotal), "dim": dim, "shards": len(shards),
            **({"sentence_separator": separator} if separator else {}),
            "index_type": type(faiss.downcast_index(merged)).__name__,
            "merge": "copied as it is" if len(shards) == 1 else
                     f"{len(shards)} Flat shards' vectors in one IndexFlatIP, shard after shard"}


def _beir_names(names: Mapping[int, str] | None, doc_ids, ids: np.ndarray, ids_path) -> Mapping[int, str] | None:
    """``names`` (a BEIR corpus's ``{passage id: _id}``), checked to name each of a shard's passages."""
    if names is not None:
        missing = next((i for i in ids.tolist() if i not in names), None)
        if missing is not None:
            raise InputError(str(ids_path), f"names passage {missing}, which {doc_ids} lacks; the shard and the id "
                                            "mapping come from different conversions of the corpus")
    return names


_DCSR_QUERIES = ("DCSR encodes a question as the state at its <sent> marker ([CLS] <sent> question [SEP]), which "
                 "neither DprQueryEncoder nor AutoQueryEncoder computes (they pool [CLS] or every token)")


def write_query_encoder(model_dir: str | os.PathLike, out_dir: Path, name: str) -> tuple[dict | None, str | None]:
    """The question encoder of the bi-encoder in ``model_dir`` in ``out_dir``, in the form
    Pyserini's query encoders load: DPR's Hugging Face format for a CLS + dot-product model
    (``DprQueryEncoder``), a Hugging Face encoder (with sentence-transformers' modules) for a
    mean-pooled or normalized one, or a cased one, whose questions ``DprQueryEncoder``'s tokenizer
    would lowercase (:func:`dcsr.models.export.lowercases`) (``AutoQueryEncoder``). Returns ``(what was written, None)``,
    or ``(None, why not)`` for a model Pyserini cannot encode questions of (DCSR, or a similarity
    neither format holds), of which nothing is written."""
    from dcsr.models.biencoder import load_biencoder, read_meta
    from dcsr.models.export import (DPR_FORMAT, export_format, fold_token_types, lowercases, write_dpr_encoder,
                                    write_sentence_transformer)

    meta = read_meta(model_dir)
    if meta.get("method", "dpr") == "dcsr":
        return None, _DCSR_QUERIES
    try:
        fmt = export_format(meta, f"model {name}")
        tokenizer, model, meta = load_biencoder(model_dir)
        fold_token_types(model)  # Pyserini's encoders feed the tokenizer's token types
        qlen = int(meta.get("question_max_length", 256))
        if fmt == DPR_FORMAT and lowercases(tokenizer):
            write_dpr_encoder(model.question_model, tokenizer, out_dir, "question", f"model {name}", qlen)
            cls, kwargs = "DprQueryEncoder", {}
        else:  # sentence-transformers' format, or a cased CLS model: DprQueryEncoder's tokenizer would lowercase it
            write_sentence_transformer(model.question_model, tokenizer, out_dir, model.pooling, model.normalize, qlen)
            cls, kwargs = "AutoQueryEncoder", {"pooling": model.pooling, "l2_norm": bool(model.normalize)}
    except InputError as e:
        shutil.rmtree(out_dir, ignore_errors=True)
        return None, str(e)
    score = ("the dot product" if not model.normalize else
             f"sqrt({model.scale:g}) x cosine (Pyserini's unit question vectors against our passage vectors, unit "
             f"vectors times sqrt({model.scale:g})): the ranking of our {model.scale:g} x cosine")
    return {"class": f"pyserini.encode.{cls}", "kwargs": kwargs, "format": fmt, "score": score,
            "question_max_length": int(meta.get("question_max_length", 256)),
            "question_text": meta.get("question_text", "raw")}, None


_README = """# {name} on {corpus}: a Pyserini dense index

Exported by dcsr from {shards} shard index(es) of `{name}` ({method}); {vectors} vectors of
dimension {dim}, {index_type}. `index` is a FAISS index, `docid` names its vectors in order
({docids}).

```python
{search}
```

{notes}
"""


def _command(*args: str) -> str:
    """``python -m pyserini.search.faiss`` with ``args`` (then ``...``, the rest of the user's) as
    a Markdown code span: each argument quoted for the shell (``shlex.quote``), so that a results
    folder named ``r $(touch x)`` or ``r'; touch x; '`` stays one argument when the line is
    copied, and fenced so that no backtick in it ends the span."""
    return md_code_span(" ".join(["python -m pyserini.search.faiss", *map(shlex.quote, args), "..."]))


def _not_written(search_params: str, shards: int) -> list[str]:
    """The settings of ``search_params`` that FAISS does not write with a single shard's index
    (:data:`NOT_WRITTEN`), each with a warning; a merged Flat index has none to write."""
    lost = [n for n, _ in parse_search_params(search_params) if n in NOT_WRITTEN] if shards == 1 else []
    for n in lost:
        log.warning("index.search_params: FAISS does not write %s into the exported index; Pyserini must set it "
                    "(the README says how), or it ranks otherwise than our search", n)
    return lost


def _readme(info: dict, out: str) -> str:
    """The README's code: paths as Python literals (``repr``), so that a results folder named with
    quotes (``x"); __import__("os").system("..."); ("``) stays a string when the code is copied,
    and quoted for the shell in its command lines (:func:`_command`)."""
    enc, corpus = info["query_encoder"], info["corpus"] or "<corpus>"
    if enc is not None:
        cls = enc["class"].rsplit(".", 1)[1]
        kwargs = "".join(f", {k}={v!r}" for k, v in enc["kwargs"].items())
        search = (f"from pyserini.encode import {cls}\n"
                  "from pyserini.search.faiss import FaissSearcher\n\n"
                  f"searcher = FaissSearcher({out!r}, {cls}(encoder_dir={f'{out}/{QUERY_ENCODER_DIR}'!r}{kwargs}))\n"
                  "hits = searcher.search(\"who wrote hamlet?\", k=100)  # [DenseSearchResult(docid, score)]")
        notes = f"Scores are {enc['score']}. "
        if cls == "AutoQueryEncoder":
            notes += (f"AutoQueryEncoder cuts a question at the tokenizer's model_max_length, saved as the model's "
                      f"question_max_length ({enc['question_max_length']} tokens), as our search does. From the "
                      "command line, name the class and its settings: "
                      + _command("--index", out, "--encoder", f"{out}/{QUERY_ENCODER_DIR}", "--encoder-class", "auto",
                                 "--pooling", str(enc["kwargs"]["pooling"]),
                                 *(["--l2-norm"] if enc["kwargs"]["l2_norm"] else []))
                      + "; without --encoder-class, Pyserini picks a class from the folder's name, and a DPR class "
                      "loads this encoder with new random weights, without an error.")
            encoder_path = f"{out}/{QUERY_ENCODER_DIR}"
            if not enc["kwargs"]["l2_norm"] and ("clip" in encoder_path or "dse" in encoder_path.lower()):
                notes += (" This encoder's path holds 'clip' or 'dse', for which Pyserini's command line turns "
                          "--l2-norm on whatever is given: the ranking is the same, its scores are cosines, not "
                          "the dot product (the Python above keeps them).")
        else:
            notes += (f"DprQueryEncoder does not cut a question at the model's question_max_length "
                      f"({enc['question_max_length']} tokens): a longer question is encoded whole (ours are cut). "
                      "From the command line: "
                      + _command("--index", out, "--encoder", f"{out}/{QUERY_ENCODER_DIR}", "--encoder-class", "dpr")
                      + ".")
        if enc.get("question_text") == "dpr":
            notes += (" The model trained on questions with a right single quote written ' (DPR's normalize_question, "
                      "`question_text: dpr`), and Pyserini's encoders take a question as given: write "
                      "`question.replace(\"\\u2019\", \"'\")` before `search`.")
    else:
        depth = ("100" if info["method"] == "dpr" else
                 "100 * 5  # DCSR: the top 100 x k sentences, k the corpus's mean sentences per passage "
                 f"(results/sentences/{corpus}/stats.json)")
        search = ("import numpy as np\n"
                  "from pyserini.search.faiss import FaissSearcher\n\n"
                  f"searcher = FaissSearcher({out!r}, None)  # no query encoder: question vectors are passed\n"
                  "q = np.load(\"results/queries/<qmodel>/<dataset>.npy\")  # a row per line of the test file\n"
                  f"hits = searcher.batch_search(q, [str(i) for i in range(len(q))], k={depth})")
        notes = f"No query encoder: {info['no_query_encoder']}. Pass question vectors (ours, as above)."
    if info["method"] == "dcsr":
        sep = info.get("sentence_separator", SENTENCE_SEPARATOR)
        notes += (f"\n\nThe hits are sentences (`{info['docid'].split(' (')[0]}`), a passage once per sentence "
                  "found. Pyserini's " + md_code_span(f"--max-passage --max-passage-delimiter {shlex.quote(sep)}")
                  + " keeps each passage's best sentence; DCSR's passage ranking (the top 100 x k sentences, a "
                  "softmax over their scores, HasAns = 1 - prod(1 - p) per passage) is dcsr's, not Pyserini's: "
                  f"dcsr's passage runs are results/runs/{corpus}/<qmodel>/{info['model']}/<dataset>.trec.")
    if info["search_params"]:
        lost = info.get("search_params_not_written", [])
        notes += f"\n\nindex.search_params ({info['search_params']}) are set on the index and written with it"
        notes += (f", but for {', '.join(lost)}, which FAISS does not write into the file (IVF-PQ's polysemous "
                  "threshold is read back as 0): set it on the index Pyserini loads, "
                  + md_code_span(f"faiss.ParameterSpace().set_index_parameters(searcher.index, "
                                 f"{info['search_params']!r})")
                  + ", or its ranking is not ours." if lost else ".")
    return _README.format(name=info["model"], corpus=corpus, shards=info["shards"], method=info["method"],
                          vectors=info["vectors"], dim=info["dim"], index_type=info["index_type"],
                          docids=info["docid"], search=search, notes=notes)


def export_pyserini(shards: Sequence[tuple[str | os.PathLike, str | os.PathLike, str | os.PathLike | None]],
                    out_dir: str | os.PathLike, model_dir: str | os.PathLike | None = None, *,
                    method: str | None = None, name: str | None = None, corpus: str | None = None,
                    search_params: str = "", doc_ids: str | os.PathLike | None = None) -> dict:
    """Write ``out_dir`` (atomically) for Pyserini's ``FaissSearcher``: the shards ``(index, ids
    .npy, sentence numbers .npy or None)`` of one passage encoder over one corpus, in shard
    order, as one index and its docids, and beside them the question encoder of ``model_dir``
    where Pyserini's query encoders can load it (see the module's text). ``method`` (dpr or
    dcsr) is the model's unless given; a DCSR export needs every shard's sentence numbers.
    ``search_params`` (``index.search_params``) are set on a single shard's index before it is
    written. ``doc_ids``: a BEIR corpus's ``beir-doc-ids.tsv``: ``docid`` then names the collection's
    documents by their ``_id``, as its qrels do. Returns what ``out_dir/export.json`` holds."""
    from dcsr.models.biencoder import read_meta

    out_dir = Path(out_dir)
    meta = read_meta(model_dir) if model_dir is not None else {}
    method = method or meta.get("method", "dpr")
    name = name or (str(model_dir) if model_dir is not None else "vectors")
    if method not in ("dpr", "dcsr"):
        raise InputError(f"model {name}", f"method {method!r}; expected dpr or dcsr")
    sentence_level = method == "dcsr"
    if sentence_level and any(s is None for _, _, s in shards):
        raise InputError(f"model {name}", "a DCSR index holds sentences: give every shard's sentence numbers "
                                          "(.sents.npy) to name them <passage id>#<sentence number>")
    shards = [(i, d, s if sentence_level else None) for i, d, s in shards]
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        stats = write_index_and_docids(shards, tmp, search_params, doc_ids)
        encoder, why = (None, "no model given") if model_dir is None else \
            write_query_encoder(model_dir, tmp / QUERY_ENCODER_DIR, name)
        info: dict[str, Any] = {
            "format": "pyserini-faiss",
            "model": name,
            "corpus": corpus,
            "method": method,
            "source": {"indexes": [str(i) for i, _, _ in shards], "model": str(model_dir) if model_dir else None},
            **stats,
            "search_params": search_params,
            **({"search_params_not_written": lost} if (lost := _not_written(search_params, len(shards))) else {}),
            "docid": (f"{'<document _id>' if doc_ids else '<passage id>'}{stats.get('sentence_separator')}<sentence "
                      "number> (the passage's sentences counted from 0)" if sentence_level else
                      "the BEIR document _id, as the collection's qrels name it" if doc_ids else "the passage id"),
            "hits": ("sentences: a passage once per sentence found; DCSR's passage ranking (HasAns) is dcsr's "
                     "merge step, not Pyserini's" if sentence_level else "passages"),
            "query_encoder": None if encoder is None else {"dir": QUERY_ENCODER_DIR, **encoder},
            **({"no_query_encoder": why} if encoder is None else {}),
            "files_sha256": file_digests(tmp, [INDEX_FILE, DOCID_FILE]),
        }
        with open(tmp / EXPORT_META, "w", encoding="utf-8") as fh:
            json.dump(info, fh, indent=2)
            fh.write("\n")
        (tmp / README).write_text(_readme(info, str(out_dir)), encoding="utf-8")
    log.info("exported %d vectors (%s) of %s to %s", info["vectors"], info["merge"], name, out_dir)
    return info
