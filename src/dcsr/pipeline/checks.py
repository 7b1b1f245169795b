"""Checks at DAG build of what the schema cannot say, so that ``snakemake -n`` stops on a value
that would otherwise fail a job minutes or hours later: an integer written as a float, a local
SQuAD source that is not there (with the closest file's name), a BEIR folder without the files
its corpus and test sets read, a model trained on a BEIR test set, an index factory FAISS does
not parse, claims whose sides were trained with different numbers of seeds, and a table row's
key that its kind would ignore. Each is an
:class:`~dcsr.errors.InputError` naming the config key."""

from __future__ import annotations

import codecs
import difflib
import errno
import locale
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any, Mapping

from dcsr.errors import InputError
from dcsr.pipeline.config import DEV_VARIANT, _key, claim_pair, corpus_shards, corpus_size, model_init


def _resolve(schema: Mapping, node: Any) -> Any:
    while isinstance(node, Mapping) and "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            break
        target = schema
        for part in ref[2:].split("/"):
            target = target[part]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _types(node: Any) -> set[str]:
    t = node.get("type") if isinstance(node, Mapping) else None
    return set(t) if isinstance(t, list) else {t} if t else set()


def check_integers(config: Any, schema: Mapping, node: Any = None, path: tuple = ()) -> None:
    """A value the schema types as an integer must be written as one: JSON Schema takes 13.0 for
    an integer, and Python code downstream then meets a float (``seed: 13.0`` failed at job
    time). Walks the schema's properties, additionalProperties, items and oneOf/anyOf."""
    node = _resolve(schema, schema if node is None else node)
    if not isinstance(node, Mapping):
        return
    branches = [_resolve(schema, b) for b in node.get("oneOf", []) + node.get("anyOf", [])]
    types = _types(node).union(*(_types(b) for b in branches)) if branches else _types(node)
    if isinstance(config, float) and "integer" in types and "number" not in types:
        raise InputError(_key(*path), f"expected an integer, found {config!r}; write it as {int(config)}"
                         if config.is_integer() else f"expected an integer, found {config!r}")
    if isinstance(config, Mapping):
        props = node.get("properties", {})
        extra = node.get("additionalProperties")
        for k, v in config.items():
            if k in props:
                check_integers(v, schema, props[k], path + (k,))
            elif isinstance(extra, Mapping):
                check_integers(v, schema, extra, path + (k,))
    if isinstance(config, list) and isinstance(node.get("items"), Mapping):
        for i, v in enumerate(config):
            check_integers(v, schema, node["items"], path + (i,))
    for b in branches:
        if isinstance(config, Mapping) and "properties" in b or isinstance(config, list) and "items" in b:
            check_integers(config, schema, b, path)


def _input_files(config: Mapping, basedir: Path):
    """``(key, path as written, path)`` of every input data file the config names: the corpora's
    ``path`` and local ``squad.source`` (from the working directory, else the repository, as
    :func:`check_local_sources` looks it up) and the datasets' ``files``."""
    for name, corpus in (config.get("corpora") or {}).items():
        if isinstance(corpus.get("path"), str):
            yield ("corpora", name, "path"), corpus["path"], Path(corpus["path"])
        squad = corpus.get("squad")
        source = squad.get("source") if isinstance(squad, Mapping) else None
        if isinstance(source, str) and source and "://" not in source:
            here = Path(source)
            path = here if here.is_absolute() or os.path.lexists(here) else basedir / here
            yield ("corpora", name, "squad", "source"), source, path
    for name, ds in (config.get("datasets") or {}).items():
        for split, file in (ds.get("files") or {}).items():
            if isinstance(file, str):
                yield ("datasets", name, "files", split), file, Path(file)


#: What a path that is not a regular file is, by its stat mode.
_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def check_input_files(config: Mapping, basedir: Path) -> None:
    """Every input data file the config names (:func:`_input_files`) that exists is a regular file
    (through any links): a FIFO hung the job that read it, a directory ended in a traceback, and a
    symbolic link loop too. Each is one line naming the key; nothing is opened (a FIFO would block).
    A path that does not exist is left to :func:`check_local_sources` and Snakemake's missing-input
    message."""
    for key, given, path in _input_files(config, basedir):
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise InputError(_key(*key), f"{given!r} is a symbolic link that leads round in a loop ({e.strerror}); "
                                             "point it at the file itself") from None
            raise InputError(_key(*key), f"{given!r} cannot be looked at ({e.strerror})") from None
        if stat.S_ISREG(mode):
            continue
        kind = next((what for test, what in _FILE_KINDS if test(mode)), "not a file")
        wait = ": a job reading it would wait for a writer forever;" if stat.S_ISFIFO(mode) else ";"
        raise InputError(_key(*key), f"{given!r} is {kind}, not a regular file{wait} give the file itself")


def check_local_sources(config: Mapping, basedir: Path) -> None:
    """A corpus's ``squad.source`` that is not a URL must exist, in the working directory or in
    the repository; otherwise say so, with the closest file name in its folder. First, every
    input data file that exists must be a regular file (:func:`check_input_files`)."""
    check_input_files(config, basedir)
    for name, corpus in config.get("corpora", {}).items():
        source = (corpus.get("squad") or {}).get("source") if isinstance(corpus.get("squad"), Mapping) else None
        if not source or "://" in source:
            continue
        candidates = [Path(source)] + ([] if Path(source).is_absolute() else [basedir / source])
        if any(p.exists() for p in candidates):
            continue
        hint = ""
        for p in candidates:
            if p.parent.is_dir():
                close = difflib.get_close_matches(p.name, [c.name for c in p.parent.iterdir()], n=1)
                if close:
                    hint = f"; did you mean {str(Path(source).parent / close[0])!r}?"
                    break
        raise InputError(_key("corpora", name, "squad", "source"),
                         f"{source!r} is neither a URL nor an existing file (looked in the working directory and in "
                         f"{basedir}){hint}")
    check_beir_folders(config, basedir)


def beir_folder(config: Mapping, corpus: str, basedir: Path) -> Path:
    """A corpus's ``beir`` folder: as given when it exists there (from the working directory),
    else in the repository (``basedir``), else as given."""
    folder = Path(config["corpora"][corpus]["beir"])
    if not folder.is_absolute() and not folder.exists() and (basedir / folder).exists():
        return basedir / folder
    return folder


def check_beir_folders(config: Mapping, basedir: Path) -> None:
    """Every BEIR folder has the files its corpus and test sets read (corpus.jsonl, queries.jsonl,
    qrels/<split>.tsv), and no model trains on a BEIR test set (it has no answers; see
    :func:`dcsr.pipeline.config.beir_training_refusal`): both at DAG build, naming the key."""
    from dcsr.data.beir import CORPUS, QUERIES, qrels_file
    from dcsr.pipeline.config import beir_training_refusal, train_datasets

    corpora, datasets = config.get("corpora", {}), config.get("datasets", {})
    for name, corpus in corpora.items():
        if "beir" not in corpus:
            continue
        folder = beir_folder(config, name, basedir)
        if not folder.is_dir():
            raise InputError(_key("corpora", name, "beir"), f"{corpus['beir']!r} is not a folder (looked in the working "
                                                            f"directory and in {basedir}); give a BEIR-format folder "
                                                            "(corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
        if not (folder / CORPUS).is_file():
            raise InputError(_key("corpora", name, "beir"), f"{str(folder)!r} has no {CORPUS}; a BEIR folder holds "
                                                            "corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
    for name, ds in datasets.items():
        if "beir" not in ds or "beir" not in corpora.get(ds["corpus"], {}):
            continue
        folder = beir_folder(config, ds["corpus"], basedir)
        qrels = qrels_file(folder, ds["beir"]["split"])
        for need, key in ((folder / QUERIES, ("corpus",)), (qrels, ("beir", "split"))):
            if not need.is_file():
                found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
                raise InputError(_key("datasets", name, *key), f"{str(need)!r} does not exist (the test set reads "
                                 f"{QUERIES} and qrels/{ds['beir']['split']}.tsv of its corpus's folder; its qrels "
                                 f"splits: {', '.join(found) or 'none'})")
    for model, m in config.get("models", {}).items():
        for i, ds in enumerate(train_datasets(m)):
            if "beir" in datasets.get(ds, {}):
                folder = beir_folder(config, datasets[ds]["corpus"], basedir)
                where = _key("models", model, "train_on", *([] if isinstance(m["train_on"], str) else [i]))
                raise InputError(where, beir_training_refusal(ds, qrels_file(folder, "train").is_file()))


#: The width an index factory is checked at where no indexed encoder's width is known at DAG
#: build (a hub id): bert-base's, DPR's.
DEFAULT_WIDTH = 768


#: FAISS's pre-transforms that keep inner products at the vectors' width (rotations, zero
#: padding): the index under them still ranks by the model's score (a rotation keeps it up to
#: float rounding; the PQ codes after OPQ approximate it, as PQ alone does). One that narrows
#: the vectors (OPQ16_64, RR64 of 768) is a projection and is refused.
KEEP_INNER_PRODUCTS = ("OPQMatrix", "RandomRotationMatrix", "RemapDimensionsTransform")
KEEP_ADVICE = ("keep the width and let PQ compress (OPQ64,IVF65536,PQ64: a rotation, then 64 bytes a vector), or "
               "use Flat, SQ8 or HNSW32")

#: Why the others do not.
CHANGES_SCORES = {
    "PCAMatrix": "PCA subtracts the training vectors' mean first, so it ranks by (q - m).(x - m), not q.x, and each "
                 "shard centres on its own mean, so shards' scores are not comparable; ",
    "NormalizationTransform": "L2norm turns a dot product into a cosine and drops a normalized model's scale, which "
                              "DCSR's HasAns softmax reads; ",
}


def check_index_factory(factory: str, dim: int = DEFAULT_WIDTH, whose: str = ""):
    """``index.factory`` must be a plain string (letters, digits and ``, _ . -``) that FAISS's
    ``index_factory`` builds at width ``dim`` (the indexed vectors', ``whose`` in the message;
    :func:`check_indexes`), with no pre-transform that changes inner products
    (:data:`KEEP_INNER_PRODUCTS`: PCA, L2norm and a narrowing rotation are refused), and no
    IDMap (which takes vectors only with ids). Returns the empty index it built."""
    if not re.fullmatch(r"[A-Za-z0-9_,.\-]{1,200}", factory):
        raise InputError("config: index.factory", f"{factory!r} is not an index_factory string (letters, digits "
                                                  "and , _ . -, such as Flat, SQ8, HNSW32, IVF4096,PQ64)")
    import faiss

    from dcsr.retrieval.placement import faiss_message  # FAISS's words, without its C++ function and line

    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise InputError("config: index.factory",
                         f"FAISS cannot build {factory!r}{whose}: {faiss_message(e)}") from None
    node = faiss.downcast_index(index)
    if isinstance(node, (faiss.IndexIDMap, faiss.IndexIDMap2)):
        raise InputError("config: index.factory", f"{factory!r} asks for an IDMap, whose index takes vectors only with "
                                                  "their ids (add_with_ids); the pipeline keeps each shard's passage "
                                                  "ids beside its index itself: leave out the IDMap prefix")
    while isinstance(node, faiss.IndexPreTransform):
        for k in range(node.chain.size()):
            vt = faiss.downcast_VectorTransform(node.chain.at(k))
            name = type(vt).__name__
            if name not in KEEP_INNER_PRODUCTS:
                raise InputError("config: index.factory", f"{factory!r} puts a {name} before the index, which "
                                 f"changes the inner products the model's scores are: {CHANGES_SCORES.get(name, '')}"
                                 f"{KEEP_ADVICE}")
            if vt.d_out < vt.d_in:
                raise InputError("config: index.factory", f"{factory!r} turns the {vt.d_in}-d vectors into {vt.d_out}-d "
                                 f"ones before the index ({name}): a projection, which changes the inner products the "
                                 "model's scores are and their scale, which DCSR's HasAns softmax reads; "
                                 f"{KEEP_ADVICE}")
        node = faiss.downcast_index(node.index)
    return index


def check_search_params(search_params: str, factory: str, dim: int = DEFAULT_WIDTH, whose: str = ""):
    """``index.factory`` (:func:`check_index_factory`), then ``index.search_params`` set on an
    empty index of it: a malformed string, or a parameter the factory's index does not have, is
    one line at DAG build (the loaded shard index is checked again at search time). Returns the
    empty index."""
    from dcsr.retrieval.index import set_search_params

    index = check_index_factory(factory, dim, whose)
    set_search_params(index, search_params, f"index.factory {factory!r}")
    return index


def check_indexes(config: Mapping, indexed, is_dcsr) -> None:
    """The shard indexes the plan builds, ``indexed`` ``(corpus, passage model)`` pairs, checked
    before any job: ``index.factory`` and ``index.search_params`` at the width of each passage
    encoder (:func:`dcsr.models.checkpoints.encoder_width`; :data:`DEFAULT_WIDTH` where it is not
    known: PQ256 builds at 768 but not at MiniLM's 384), and the vectors a factory that trains
    k-means (IVF lists, PQ codebooks) gets: ``index.train_size`` at most, and a shard's vectors
    where the corpus's size is known (:func:`dcsr.pipeline.config.corpus_size`). A shard of a
    DPR model holds one vector a passage; of a DCSR model (``is_dcsr``), one a sentence, of which
    its passages are only a lower bound, so its shortfall is the index job's error, which names
    the shard and the numbers (dcsr.retrieval.index.build_index)."""
    from dcsr.models.checkpoints import encoder_width
    from dcsr.retrieval.index import training_clusters

    index_cfg = config["index"]
    factory, train_size = index_cfg["factory"], int(index_cfg["train_size"])
    widths: dict[int, str] = {}
    for model in sorted({pmodel for _, pmodel in indexed}):
        init = config["models"][model]["init"]
        encoder = init if isinstance(init, str) else init["passage"]
        checkpoint = model_init(config, model)
        width = encoder_width(checkpoint if isinstance(checkpoint, str) else checkpoint["passage"])
        widths.setdefault(width or DEFAULT_WIDTH,
                          f" for the {width}-d vectors of model {model} (encoder {encoder})" if width else
                          f" for {DEFAULT_WIDTH}-d vectors (assumed: the width of model {model}'s encoder {encoder} "
                          "is not known before it is loaded)")
    index = None
    for dim, whose in sorted(widths.items()) or [(DEFAULT_WIDTH, "")]:
        index = check_search_params(index_cfg["search_params"], factory, dim, whose)
    if index.is_trained or not indexed:
        return
    what, need = max(training_clusters(index), key=lambda c: c[1], default=("centroids", 1))
    learns = f"{factory!r} learns {need} {what} by k-means, which needs at least {need} training vectors, but "
    if train_size < need:
        raise InputError("config: index.factory", f"{learns}index.train_size is {train_size}; raise "
                                                  f"index.train_size to at least {need} or choose a factory with "
                                                  "fewer centroids")
    for corpus in sorted({c for c, pmodel in indexed if not is_dcsr(pmodel)}):
        size = corpus_size(config, corpus)
        if size is None:
            continue
        shards = corpus_shards(config, corpus)
        smallest = size // shards  # shard s holds the passages r with r % shards == s
        if smallest < need:
            split = f"{size} passages in {shards} shards, the smallest {smallest}" if shards > 1 else f"{size} passages"
            raise InputError("config: index.factory", f"{learns}a shard of corpus {corpus} gives {smallest} ({split}; "
                             f"index.train_size {train_size}): choose a factory with fewer centroids (a smaller IVF "
                             "list count, PQ with fewer bits) or fewer, larger shards (embed.shards, "
                             "embed.passages_per_shard)")


def check_claim_seeds(config: Mapping) -> None:
    """The models of one claim that were trained several times must have the same number of seeds:
    seed k of one side is compared with seed k of the other (a model with one run is repeated)."""
    models = config["models"]
    for i, claim in enumerate(config.get("claims", [])):
        counts = {}
        for side in ("baseline", "method"):
            for m in claim_pair(claim[side]):
                n = int(models.get(m, {}).get("seeds", 1)) if m != "bm25" else 1
                if n > 1:
                    counts[m] = n
        if len(set(counts.values())) > 1:
            raise InputError(_key("claims", i), "compares models trained with different numbers of seeds ("
                             + ", ".join(f"{m}: {n}" for m, n in counts.items())
                             + "); seed k is paired with seed k, so give them the same seeds: (or 1)")


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")

#: Where a line ends: Markdown's ``\n`` and ``\r``, and every other character at which
#: ``str.splitlines`` (so docutils, reading the report's reStructuredText) ends one.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
#: The config values the report's captions (workflow/report/*.rst) quote as ``literal``s.
RST_LITERALS = ("results", "encoders")


def check_dev_sets_not_tested(config: Mapping, is_dcsr) -> None:
    """Under ``dcsr.temperature: dev`` a dataset ``<d>.dev`` is where ``<d>``'s HasAns temperature
    is chosen, and a DCSR run on it is ranked with what was chosen there: as a test set of a
    table, a claim or the attribution analysis, a DCSR run on it would be scored with a
    temperature chosen on its own questions. Refused there, naming the key (``<d>-dev``, say, is a
    test set of dev questions, scored at temperature 1). ``is_dcsr(model)``: a DCSR model."""
    if config.get("dcsr", {}).get("temperature") != "dev":
        return
    from dcsr.evaluation.tables import table_cells

    used = []  # (config key, test set, passage encoder)
    for t, table in config.get("tables", {}).items():
        for c in table_cells(table):
            where = _key("tables", t, "test_sets") if c.dataset == c.column else _key("tables", t, "rows", c.row,
                                                                                        "datasets")
            used.append((where, c.dataset, c.pmodel))
    for i, claim in enumerate(config.get("claims", [])):
        used += [(_key("claims", i, "test_set"), claim["test_set"], claim_pair(claim[side])[1])
                 for side in ("baseline", "method")]
    attribution = config.get("attribution") or {}
    used += [(_key("attribution", "test_sets"), t, p) for t in attribution.get("test_sets", [])
             for family in attribution.get("families", {}).values() for p in family.values()]
    for where, name, pmodel in used:
        root = name[: -len(DEV_VARIANT)] if name.endswith(DEV_VARIANT) else None
        if root in config["datasets"] and is_dcsr(pmodel):
            raise InputError(where, f"{name} is where {root}'s HasAns temperature is chosen (dcsr.temperature: dev), "
                                    f"so {pmodel}'s run scored on it as a test set would be ranked with a "
                                    "temperature chosen on its own questions; name the dataset otherwise (e.g. "
                                    f"{root}-dev) to test on dev questions")


def check_text(config: Any, path: tuple = ()) -> None:
    """Every string of the config, key or value, is one line: titles, labels and claims become
    Markdown table rows (a line break in a claim put a forged "holds" row into claims.md) and
    values reach the report's reStructuredText, where a line that starts ``.. raw::`` or
    ``.. include::`` is a directive (live HTML, another file's text). The paths the report
    quotes (``results:``, ``encoders:``) hold no backquote either, which would close their
    ``literal`` early, and neither start nor end with white space, which docutils does not take
    for a ``literal`` at all. (A ``|`` is legal: the Markdown writers escape it.)"""
    def text(where, value, what=""):
        if not isinstance(value, str):
            return
        shown = value if len(value) <= 80 else f"{value[:40]}...{value[-10:]}"
        for ch in value:
            if ch in LINE_BREAKS:
                raise InputError(_key(*where) if where else "config", f"{what}{shown!r} holds a line break ({ch!r}); config text is written into "
                                               "Markdown tables and the report's reStructuredText, where a line break "
                                               "starts a new row or a directive: write it on one line")
        if where and where[0] in RST_LITERALS and "`" in value:
            raise InputError(_key(*where), f"{shown!r} holds a backquote (`), which would end the report's ``literal`` "
                                           "around it and let the rest be read as reStructuredText; write the path "
                                           "without one")
        if where and where[0] in RST_LITERALS and value != value.strip():
            raise InputError(_key(*where), f"{shown!r} starts or ends with white space, which makes the report's "
                                           "``literal`` around it no literal (its text, a javascript: link say, would "
                                           "be read as reStructuredText); write the path without it")

    if isinstance(config, Mapping):
        for key, value in config.items():
            text(path, key, "the key ")
            check_text(value, path + (key,))
    elif isinstance(config, (list, tuple)):
        for i, value in enumerate(config):
            check_text(value, path + (i,))
    else:
        text(path, config)


def check_names(config: Mapping) -> None:
    """The names that become wildcards, file names and arguments (corpora, datasets, models,
    encoders, tables, attribution families, generated domains, the papers' names of datasets) in one line each, before the
    schema's longer message: letters, digits and ``_ . -``, starting with a letter or digit, 64
    characters at most (config/schema.yaml's ``name``)."""
    def bad(where, name):
        shown = name if len(str(name)) <= 80 else f"{str(name)[:40]}...{str(name)[-10:]}"
        raise InputError(_key(*where), f"{shown!r} ({len(str(name))} characters) is not a valid name: letters, digits "
                                      "and _ . -, starting with a letter or digit, at most 64 characters")

    for section in ("corpora", "datasets", "models", "encoders", "tables"):
        for name in (config.get(section) or {}):
            if not isinstance(name, str) or not NAME.fullmatch(name):
                bad((section,), name)
    for name, ds in (config.get("datasets") or {}).items():
        # a domain, and the papers' name of a dataset, which a table's script takes as an argument
        # (one starting with "-" was read as an option, a "-" as "no name")
        for key in ("generated", "paper_name"):
            value = ds.get(key) if isinstance(ds, Mapping) else None
            if value is not None and (not isinstance(value, str) or not NAME.fullmatch(value)):
                bad(("datasets", name, key), value)
    for name in ((config.get("attribution") or {}).get("families") or {}):
        if not isinstance(name, str) or not NAME.fullmatch(name):
            bad(("attribution", "families"), name)


def check_table_rows(config: Mapping) -> None:
    """A table row's keys that its kind would ignore, refused before the schema fills its defaults
    (it gives every row ``fusion: linear``): ``fusion`` on a row that is not ``retriever: hybrid``,
    and ``question`` or ``passage`` on a BM25 row. Either was dropped without a word, so a row
    meant as a fusion ran as the plain dense pair or as BM25 under its label."""
    for tname, table in (config.get("tables") or {}).items():
        rows = table.get("rows") if isinstance(table, Mapping) else None
        for i, row in enumerate(rows if isinstance(rows, list) else []):
            if not isinstance(row, Mapping):
                continue
            kind = row.get("retriever")
            if "fusion" in row and kind != "hybrid":
                what = "a BM25 row" if kind == "bm25" else "a dense row (no retriever: hybrid)"
                raise InputError(_key("tables", tname, "rows", i, "fusion"),
                                 f"only a hybrid row fuses, and this is {what}: its fusion {row['fusion']!r} would be "
                                 "ignored; write 'retriever: hybrid' to fuse BM25 with its pair, or remove fusion")
            for side in ("question", "passage"):
                if kind == "bm25" and side in row:
                    raise InputError(_key("tables", tname, "rows", i, side),
                                     f"a BM25 row ranks with BM25 alone, so its {side} would be ignored; write "
                                     "'retriever: hybrid' to fuse BM25 with the pair, or remove question and passage")


def check_generated_domains(config: Mapping, domains) -> None:
    """A dataset's ``generated:`` names a domain of ``domains``, those the corpus generator makes
    (:data:`dcsr.fixtures.synth.DOMAINS`; rules/common.smk passes them, as the generator sits
    above this package), with the closest one when it does not."""
    known = list(domains)
    for name, ds in (config.get("datasets") or {}).items():
        domain = ds.get("generated") if isinstance(ds, Mapping) else None
        if domain is not None and domain not in known:
            close = difflib.get_close_matches(domain, known, n=1)
            raise InputError(_key("datasets", name, "generated"), f"the generator has no domain {domain!r}"
                             + (f"; did you mean {close[0]!r}?" if close else "")
                             + f" (domains: {', '.join(known)})")


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def check_results_folder(results: str) -> None:
    """``results:`` at DAG build (rules/common.smk), so that ``snakemake -n`` stops rather than the
    first job: a folder this process's effective user can write, or, where it does not exist yet,
    one whose nearest existing folder it can write in (a file on the way, or a read-only folder,
    failed at the first job, a file in a traceback at DAG build); and a path with non-ASCII
    characters only under a UTF-8 locale. Python reads paths as UTF-8 even under ``LC_ALL=C`` (its
    UTF-8 mode), so the C library's codeset (``nl_langinfo(CODESET)``), which the jobs' programs
    inherit, is checked too: Anserini's Java fails on such a path, its cause in the job's log only."""
    where = "config: results"
    if "{" in results or "}" in results:
        raise InputError(where, f"{results!r} holds a brace, which Snakemake reads as a wildcard in every path under "
                                "it (its rules would fail with a message about wildcards): give a path without { or }")
    if not results.isascii():
        codesets = [locale.nl_langinfo(locale.CODESET), sys.getfilesystemencoding()]
        wrong = next((c for c in codesets if not _is_utf8(c)), None)
        if wrong is not None:
            setting = next((f"{v}={os.environ[v]}" for v in ("LC_ALL", "LC_CTYPE", "LANG") if os.environ.get(v)),
                           "no LC_ALL, LC_CTYPE or LANG set")
            raise InputError(where, f"{results!r} holds non-ASCII characters, but this locale's encoding is {wrong} "
                                    f"({setting}), not UTF-8: Anserini's Java (BM25) would fail on the path, with the "
                                    "cause in the job's log only; set a UTF-8 locale (export LC_ALL=C.UTF-8) or give "
                                    "results: an ASCII path")
    fix = "give results: a folder you can write, or make it writable"
    path = os.path.abspath(results)
    here = path
    try:
        while not os.path.lexists(here):
            here = os.path.dirname(here)
        mode = os.stat(here).st_mode
    except OSError as e:  # a link loop on the way
        raise InputError(where, f"{results!r} cannot be looked at ({e.strerror}: {e.filename}); {fix}") from None
    made = here != path  # results: does not exist yet: it is made in ``here``
    if not stat.S_ISDIR(mode):
        what = f"cannot be made: {here!r} is a file" if made else "is a file"
        raise InputError(where, f"{results!r} {what}, not a folder; give results: a folder you can write")
    effective = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    if not os.access(here, os.W_OK | os.X_OK, **effective):
        what = f"cannot be made: the folder it would be made in, {here!r}, is" if made else "is"
        raise InputError(where, f"{results!r} {what} not writable by this user; {fix}")


def check_marker_lengths(model: str, settings: Mapping) -> None:
    """A DCSR model's inputs hold markers: a passage ``[CLS] <sent> token [SEP]`` at the least (4
    tokens), a question ``[CLS] <sent> token [SEP]`` minus the title (3); shorter max lengths
    would fail in every training and embedding job (dcsr.models.markers)."""
    for key, least in (("passage_max_length", 4), ("question_max_length", 3)):
        if settings[key] < least:
            raise InputError(_key("models", model, "train", key), f"{settings[key]} is too short for DCSR's "
                             f"sentence markers: at least {least} ([CLS] <sent> a token [SEP])")


def check_positive_match(model: str, settings: Mapping) -> None:
    """``dcsr.positive_match: substring`` looks for an answer's text in a sentence; a training set
    whose answers are regular expressions (``match: regex``, CuratedTREC) would fail at training."""
    if settings.get("positive_match") == "substring" and settings.get("match_type") == "regex":
        raise InputError(_key("models", model, "train", "positive_match"), "substring looks for an answer's text, "
                         "but this model's training set matches answers as regular expressions (match: regex); "
                         "use tokens")


def check_splitter(config: Mapping) -> None:
    """``dcsr.splitter`` names a splitter whose package is installed, where a DCSR model needs the
    sentence table: a missing one (pysbd, syntok, segtok, sentencex, spacy: not in the envs)
    would fail in the split job, after the DAG started."""
    import importlib.util

    from dcsr.data.sentences import SPLITTER_PACKAGES

    splitter = config["dcsr"]["splitter"]
    package = SPLITTER_PACKAGES[splitter]
    if package and any(m.get("method") == "dcsr" for m in config["models"].values()) \
            and importlib.util.find_spec(package) is None:
        raise InputError("config: dcsr.splitter", f"{splitter!r} needs the package {package!r}, which is not installed "
                                                  f"here (pip install {package}); blingfire and dcsr need none")
