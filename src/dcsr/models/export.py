"""Export a saved bi-encoder (:func:`dcsr.models.biencoder.save_biencoder`'s layout) in the
format that other tools read for its family:

- **DPR's Hugging Face format**, for a CLS-pooled, dot-product model (DPR, BERT inits)::

      out_dir/question_encoder/   DPRQuestionEncoder.from_pretrained + its tokenizer
      out_dir/ctx_encoder/        DPRContextEncoder.from_pretrained + its tokenizer

  Their ``pooler_output`` (projection_dim 0: the [CLS] state) is this model's vector.

- **sentence-transformers**, for a mean-pooled or normalized model (MiniLM inits)::

      out_dir/question_encoder/   SentenceTransformer(...): Transformer, Pooling (mean or CLS)[, Normalize]
      out_dir/passage_encoder/    the same for passages

  written in sentence-transformers' classic folder layout (``modules.json``,
  ``sentence_bert_config.json``, ``1_Pooling/``), which every version since 2.0 reads. A
  normalized model's vectors here are unit vectors; this model's are those times
  ``sqrt(scale)`` (scale x cosine, sentence-transformers' training scale 20), which ranks the
  same.

Both write ``out_dir/export.json`` (the format, the similarity, the maximum lengths, how a
passage is given: title and text as a sentence pair) and a ``README.md``. Any other
combination is an :class:`~dcsr.errors.InputError` that names the model and why: DCSR's
sentence vectors (one per ``<sent>`` marker, which neither format encodes), or a scale other
than the family's (a dot product scaled by anything but 1, a cosine by anything but 20).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import torch

from dcsr.errors import InputError
from dcsr.fsutil import atomic_path
from dcsr.models.biencoder import _quiet_transformers, load_biencoder
from dcsr.models.similarity import ST_SCALE

DPR_FORMAT = "dpr"
ST_FORMAT = "sentence-transformers"
FORMATS = (DPR_FORMAT, ST_FORMAT)
EXPORT_META = "export.json"

#: sub-folders of each format: (question encoder, passage encoder)
FOLDERS = {DPR_FORMAT: ("question_encoder", "ctx_encoder"), ST_FORMAT: ("question_encoder", "passage_encoder")}

#: sentence-transformers' classic module types (v2 on; v6 still reads them)
_ST_TYPES = {"Transformer": "sentence_transformers.models.Transformer",
             "Pooling": "sentence_transformers.models.Pooling",
             "Normalize": "sentence_transformers.models.Normalize"}


def _similarity_text(pooling: str, normalize: bool, scale: float) -> str:
    score = f"{scale:g} x cosine" if normalize else ("the dot product" if scale == 1 else f"{scale:g} x the dot product")
    return f"{pooling} pooling, {score}"


def export_format(meta: Mapping[str, Any], name: str) -> str:
    """The format a saved bi-encoder (its ``dcsr.json`` ``meta``) exports to: :data:`DPR_FORMAT`
    for CLS pooling and the plain dot product, :data:`ST_FORMAT` for mean pooling with the dot
    product, or normalized vectors at scale 20. Anything else is an :class:`InputError` at
    ``name`` (the model) saying why."""
    method = meta.get("method", "dpr")
    pooling, normalize = meta.get("pooling", "cls"), bool(meta.get("normalize", False))
    scale = float(meta.get("scale", 1.0))
    what = _similarity_text(pooling, normalize, scale)
    if method != "dpr":
        raise InputError(name, f"method {method!r}: DCSR encodes a passage as one vector per sentence (a <sent> marker "
                               "before each, ranked with HasAns), which neither DPR's Hugging Face classes nor "
                               "sentence-transformers encode (they give one vector per text); only method dpr exports")
    if pooling == "cls" and not normalize:
        if scale != 1.0:
            raise InputError(name, f"scores with {what}: DPR's format is CLS and the plain dot product (scale 1, its "
                                   "pooler_output), so a model trained at another scale does not export to it")
        return DPR_FORMAT
    if pooling not in ("cls", "mean"):
        raise InputError(name, f"{pooling} pooling is neither DPR's (CLS) nor sentence-transformers' mean pooling")
    if normalize and scale != ST_SCALE:
        raise InputError(name, f"scores with {what}: sentence-transformers' normalized models are its family "
                               f"(cosine, trained at scale {ST_SCALE:g}, MultipleNegativesRankingLoss), and "
                               "sentence-transformers keeps no scale; set train.scale to 20 (or null) to export")
    if not normalize and scale != 1.0:
        raise InputError(name, f"scores with {what}: sentence-transformers' dot product has no scale (1), so a model "
                               "trained at another scale does not export to it")
    return ST_FORMAT


def fold_token_types(model) -> None:
    """For a model that encodes with every token type 0 (``token_types: zeros``, as DPR's and
    DCSR's code), set every row of each encoder's token-type embeddings to row 0, in place: the
    written encoders then give this model's vectors whatever token types a tool feeds them
    (Hugging Face's and Pyserini's code tokenize a title and text as a pair, the text type 1).
    Nothing changes for a ``pair`` model or an encoder without token types."""
    if getattr(model, "token_types", "pair") != "zeros":
        return
    for encoder in {id(e): e for e in (model.question_model, model.passage_model)}.values():
        table = getattr(getattr(encoder, "embeddings", None), "token_type_embeddings", None)
        if table is not None:
            with torch.no_grad():
                table.weight.copy_(table.weight[:1].expand_as(table.weight))


def _bert_of(encoder, name: str):
    if getattr(encoder.config, "model_type", None) != "bert":
        raise InputError(name, f"a CLS + dot-product model whose encoders are {encoder.config.model_type!r}, not BERT: "
                               "DPR's Hugging Face classes (DPRQuestionEncoder, DPRContextEncoder) hold a BERT")
    return encoder


def _dpr_config(bert_config):
    from transformers import DPRConfig

    values = {k: v for k, v in bert_config.to_dict().items()
              if k not in ("model_type", "architectures", "transformers_version", "_name_or_path", "projection_dim")}
    return DPRConfig(**values, projection_dim=0)


#: DPR's Hugging Face class of each tower, and the attribute that holds its BERT
_DPR_CLASSES = {"question": ("DPRQuestionEncoder", "question_encoder"), "passage": ("DPRContextEncoder", "ctx_encoder")}


def save_tokenizer(tokenizer, out_dir: Path) -> None:
    """``tokenizer.save_pretrained(out_dir)``, and for a WordPiece (BERT) tokenizer a ``vocab.txt``
    beside its ``tokenizer.json``: transformers 5 writes ``tokenizer.json`` alone, which the
    slow tokenizers of transformers 4 do not read, and those are what DPR's classes
    (``DPRQuestionEncoderTokenizer``, Pyserini's ``DprQuestionEncoder``) and most tools pinned
    to transformers 4 load. The vocabulary is the tokenizer's own, a token a line in id order."""
    tokenizer.save_pretrained(out_dir)
    path = Path(out_dir) / "tokenizer.json"
    if (Path(out_dir) / "vocab.txt").exists() or not path.is_file():
        return
    model = json.loads(path.read_text(encoding="utf-8")).get("model", {})
    vocab = model.get("vocab")
    if model.get("type") != "WordPiece" or not isinstance(vocab, dict) or sorted(vocab.values()) != list(range(len(vocab))):
        return
    by_id = sorted(vocab, key=vocab.__getitem__)
    if any("\n" in token or "\r" in token for token in by_id):
        return  # a token a line could not hold it
    with atomic_path(Path(out_dir) / "vocab.txt", suffix=".txt") as tmp:
        Path(tmp).write_text("".join(token + "\n" for token in by_id), encoding="utf-8")


def lowercases(tokenizer) -> bool:
    """Whether ``tokenizer`` lowercases (an uncased BERT's). transformers' DPR tokenizer classes
    (``DPRQuestionEncoderTokenizer``, ``DPRContextEncoderTokenizer``; Pyserini's
    ``DprQueryEncoder`` loads the first) lowercase every text whatever the folder says: they take
    ``do_lower_case`` and do not pass it on (transformers 5.24), so a cased model's DPR folder is
    read right only by ``AutoTokenizer``."""
    return tokenizer("A", add_special_tokens=False)["input_ids"] == tokenizer("a", add_special_tokens=False)["input_ids"]


def save_tokenizer_at(tokenizer, out_dir: Path, max_length: int) -> None:
    """:func:`save_tokenizer` with ``model_max_length`` the length the tower was trained with, where
    ``tokenizer(text, truncation=True)`` cuts (Pyserini's ``AutoQueryEncoder``); the tokenizer is
    left as it was."""
    saved = tokenizer.model_max_length
    tokenizer.model_max_length = int(max_length)
    try:
        save_tokenizer(tokenizer, out_dir)
    finally:
        tokenizer.model_max_length = saved


def write_dpr_encoder(encoder, tokenizer, out_dir: Path, side: str, name: str, max_length: int) -> None:
    """One tower, ``encoder`` (a BERT), in ``out_dir`` as DPR's Hugging Face class of its
    ``side`` (question: DPRQuestionEncoder, passage: DPRContextEncoder) with the tokenizer
    (``model_max_length`` the tower's trained ``max_length``), weight for weight; ``name`` (the
    model) is what errors name."""
    import transformers

    cls_name, attr = _DPR_CLASSES[side]
    bert = _bert_of(encoder, name)
    with _quiet_transformers():
        dpr = getattr(transformers, cls_name)(_dpr_config(bert.config))
        getattr(dpr, attr).bert_model.load_state_dict(bert.state_dict())
        dpr.to(dtype=next(bert.parameters()).dtype)
        dpr.save_pretrained(out_dir)
        save_tokenizer_at(tokenizer, out_dir, max_length)


def write_dpr(model, tokenizer, out_dir: Path, name: str, question_max_length: int, passage_max_length: int) -> None:
    """``out_dir/question_encoder/`` (a DPRQuestionEncoder) and ``out_dir/ctx_encoder/`` (a
    DPRContextEncoder), each with the tokenizer: the model's BERTs, weight for weight."""
    q_dir, p_dir = FOLDERS[DPR_FORMAT]
    write_dpr_encoder(model.question_model, tokenizer, out_dir / q_dir, "question", name, question_max_length)
    write_dpr_encoder(model.passage_model, tokenizer, out_dir / p_dir, "passage", name, passage_max_length)


def write_sentence_transformer(encoder, tokenizer, out_dir: Path, pooling: str, normalize: bool,
                               max_length: int) -> None:
    """One sentence-transformers model in ``out_dir``: the Hugging Face encoder and tokenizer at
    the root (its Transformer module), ``1_Pooling/`` (mean or CLS) and, when ``normalize``,
    ``2_Normalize/``; ``max_seq_length`` is the length the model was trained with, and so is the
    tokenizer's ``model_max_length`` (:func:`save_tokenizer_at`)."""
    import importlib.metadata

    with _quiet_transformers():
        encoder.save_pretrained(out_dir)
        save_tokenizer_at(tokenizer, out_dir, max_length)
    modules = [{"idx": 0, "name": "0", "path": "", "type": _ST_TYPES["Transformer"]},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": _ST_TYPES["Pooling"]}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": _ST_TYPES["Normalize"]})
    _write_json(out_dir / "modules.json", modules)
    _write_json(out_dir / "sentence_bert_config.json", {"max_seq_length": int(max_length), "do_lower_case": False})
    _write_json(out_dir / "1_Pooling" / "config.json", {
        "word_embedding_dimension": int(encoder.config.hidden_size),
        "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    })
    if normalize:
        (out_dir / "2_Normalize").mkdir(parents=True, exist_ok=True)

    def version(dist):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    _write_json(out_dir / "config_sentence_transformers.json", {
        # the layout is sentence-transformers 3's (similarity_fn_name); the versions that wrote the weights
        "__version__": {"sentence_transformers": "3.0.0", "transformers": version("transformers"),
                        "pytorch": version("torch")},
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine" if normalize else "dot",
    })


def _write_json(path: Path, value: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(value, fh, indent=2)
        fh.write("\n")


_README = {
    DPR_FORMAT: """# {name}: DPR's Hugging Face format

Exported by dcsr from `{source}` ({similarity}).

```python
from transformers import AutoTokenizer, DPRContextEncoder, DPRQuestionEncoder

tokenizer = AutoTokenizer.from_pretrained({q_path})
q_encoder = DPRQuestionEncoder.from_pretrained({q_path})
p_encoder = DPRContextEncoder.from_pretrained({ctx_path})
q = q_encoder(**tokenizer(["a question"], return_tensors="pt", truncation=True, max_length={qlen})).pooler_output
p = p_encoder(**tokenizer(["a title"], ["a passage"], return_tensors="pt", truncation=True,
                          max_length={plen})).pooler_output
scores = q @ p.T  # the dot product
```

A passage is its title and text as a sentence pair (`[CLS] title [SEP] text [SEP]`), as DPR; a
passage without a title is its text alone (`[CLS] text [SEP]`), not a pair with an empty title.{question_note}{case_note}
""",
    ST_FORMAT: """# {name}: sentence-transformers

Exported by dcsr from `{source}` ({similarity}).

```python
from sentence_transformers import SentenceTransformer

q_encoder = SentenceTransformer({q_path})
p_encoder = SentenceTransformer({p_path})
q = q_encoder.encode(["a question"])
p = p_encoder.encode([["a title", "a passage"]])  # title and text as a sentence pair
scores = {score}
```

A passage is its title and text as a sentence pair (`[CLS] title [SEP] text [SEP]`), as in
training; a passage without a title is its text alone (`p_encoder.encode(["a passage"])`). {note}{question_note}
""",
}


def export_model(model_dir: str | os.PathLike, out_dir: str | os.PathLike, name: str | None = None) -> dict:
    """Export the bi-encoder saved in ``model_dir`` to ``out_dir`` (atomically) in its family's
    format (:func:`export_format`); ``name`` (the model's name in the config) is what errors
    name. Returns what ``out_dir/export.json`` holds."""
    from dcsr.models.biencoder import read_meta

    model_dir, out_dir = Path(model_dir), Path(out_dir)
    name = name or str(model_dir)
    meta = read_meta(model_dir)
    fmt = export_format(meta, f"model {name}")
    tokenizer, model, meta = load_biencoder(model_dir)
    fold_token_types(model)
    qlen, plen = int(meta.get("question_max_length", 256)), int(meta.get("passage_max_length", 256))
    q_dir, p_dir = FOLDERS[fmt]
    similarity = _similarity_text(model.pooling, model.normalize, model.scale)
    info = {
        "format": fmt,
        "model": name,
        "source": str(model_dir),
        "method": meta.get("method", "dpr"),
        "base_checkpoint": meta.get("base_checkpoint"),
        "trained": meta.get("trained"),
        "step": meta.get("step"),
        "pooling": model.pooling,
        "normalize": model.normalize,
        "scale": model.scale,
        "question_encoder": q_dir,
        "passage_encoder": p_dir,
        "question_max_length": qlen,
        "passage_max_length": plen,
        "passage_input": "title and text as a sentence pair: [CLS] title [SEP] text [SEP] (the text alone without a title)",
        # zeros: trained and encoded with every token type 0; the written encoders ignore the types they are fed
        "token_types": model.token_types,
        # dpr: trained on questions with a right single quote written ' (DPR's normalize_question):
        # give it questions so written (DPR's own retrieval code does)
        "question_text": meta.get("question_text", "raw"),
        "score": ("the dot product of pooler_output" if fmt == DPR_FORMAT else
                  f"cosine; this model's scores are {model.scale:g} x it" if model.normalize else "the dot product"),
    }
    with atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True)
        if fmt == DPR_FORMAT:
            write_dpr(model, tokenizer, tmp, f"model {name}", qlen, plen)
        else:
            write_sentence_transformer(model.question_model, tokenizer, tmp / q_dir, model.pooling, model.normalize, qlen)
            write_sentence_transformer(model.passage_model, tokenizer, tmp / p_dir, model.pooling, model.normalize, plen)
        _write_json(tmp / EXPORT_META, info)
        note = (f"Vectors are unit vectors: this model's own are them times sqrt({model.scale:g}) "
                f"(scores {model.scale:g} x cosine), which ranks the same." if model.normalize else "")
        question_note = ("" if info["question_text"] != "dpr" else
                         "\n\nThe model was trained on questions written as DPR's `normalize_question` writes them (a "
                         "right single quote ’ as '), and gives its own vectors for questions so written: "
                         "`question.replace(\"\\u2019\", \"'\")` before the tokenizer.")
        case_note = ("" if fmt != DPR_FORMAT or lowercases(tokenizer) else
                     "\n\nThe tokenizer is cased: load it with `AutoTokenizer`, as above. transformers' "
                     "`DPRQuestionEncoderTokenizer` and `DPRContextEncoderTokenizer` (and Pyserini's "
                     "`DprQueryEncoder`, which loads the first) lowercase every text whatever the folder says.")
        (tmp / "README.md").write_text(_README[fmt].format(
            # paths as Python literals: a results folder named with quotes stays a string in the copied code
            q_path=repr(f"{out_dir}/question_encoder"), ctx_path=repr(f"{out_dir}/ctx_encoder"),
            p_path=repr(f"{out_dir}/passage_encoder"),
            name=name, source=model_dir, similarity=similarity, qlen=qlen, plen=plen, note=note,
            question_note=question_note, case_note=case_note,
            score="q @ p.T  # cosine (unit vectors)" if model.normalize else "q @ p.T  # the dot product"),
            encoding="utf-8")
    return info
