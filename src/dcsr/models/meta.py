"""A saved bi-encoder's ``dcsr.json``, read and checked (:func:`read_meta`).

A model folder (in ``results:``, or copied from another lab) may have been written by someone
else, so every field that a reader of the model uses is checked for its type here, where the
file is read: a length that is not a positive integer, a scale that is not a finite number, a
digest record that is not ``{file: sha256}`` is an :class:`~dcsr.errors.InputError` naming the
file and the key, not a ``ValueError`` or ``TypeError`` in the job that meets it. A field may be
absent (the format before it was written); readers keep their defaults for it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from dcsr.data.literals import read_json_object
from dcsr.errors import InputError
from dcsr.integrity import check_digest_map

META_FILE = "dcsr.json"


def _whole(low: int):
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= low


def _finite_positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _of(*kinds: type):
    return lambda v: isinstance(v, kinds)


#: ``{key: (test, what the value must be)}`` of the top-level fields that readers use.
FIELDS = {
    "format_version": (_whole(1), "a positive integer"),
    "method": (_of(str), "a string (dpr or dcsr)"),
    "pooling": (_of(str), "a string (cls or mean)"),
    "normalize": (_of(bool), "true or false"),
    "scale": (_finite_positive, "a finite number above 0"),
    "token_types": (_of(str), "a string"),
    "similarity_source": (_of(str, type(None)), "a string or null"),
    "question_max_length": (_whole(1), "a positive integer"),
    "passage_max_length": (_whole(1), "a positive integer"),
    "question_text": (_of(str), "a string"),
    "trained": (_of(bool), "true or false"),
    "step": (_whole(0), "an integer >= 0"),
    "epoch": (_whole(0), "an integer >= 0"),
    "settings": (_of(dict), "an object"),
}

#: The fields of ``settings`` (the training settings) that readers use.
SETTINGS_FIELDS = {
    "max_sentences": (_whole(1), "a positive integer"),
    "splitter": (_of(str), "a string"),
}


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:50]}..."


def check_meta(meta: dict, meta_path: str | os.PathLike) -> dict:
    """``meta`` (a ``dcsr.json`` read) when every field of :data:`FIELDS` (and of its
    ``settings``, :data:`SETTINGS_FIELDS`) that it has holds a value of its type, and its
    ``weights_sha256`` and ``files_sha256`` are ``{file: sha256}``; else an
    :class:`InputError` naming the file and the key."""
    for fields, values, prefix in ((FIELDS, meta, ""), (SETTINGS_FIELDS, meta.get("settings") or {}, "settings.")):
        for key, (test, what) in fields.items():
            if key in values and not test(values[key]):
                raise InputError(f"{meta_path}: {prefix}{key}", f"must be {what}, found {_shown(values[key])}; the "
                                                                "file was changed or not written by this code: delete "
                                                                "the model and train it again")
    for key in ("weights_sha256", "files_sha256"):
        if key in meta:
            check_digest_map(meta[key], f"{meta_path}: {key}")
    return meta


def read_meta(path: str | os.PathLike) -> dict:
    """The checked ``dcsr.json`` of the saved bi-encoder in folder ``path`` (:func:`check_meta`),
    read strictly (:func:`dcsr.data.literals.read_json_object`)."""
    meta_path = Path(path) / META_FILE
    if meta_path.is_symlink():  # a saved model holds no links: one could lead out of the folder
        raise InputError(str(meta_path), "is a symbolic link; a saved bi-encoder holds none: not followed")
    if not meta_path.is_file():
        raise InputError(str(path), f"not a saved bi-encoder (no {META_FILE})")
    return check_meta(read_json_object(meta_path), meta_path)
