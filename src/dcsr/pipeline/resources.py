"""The files the papers' experiments start from, as data: DPR's resource map and SQuAD v1.1.

DPR's keys and paths are those of ``RESOURCES_MAP`` in ``dpr/data/download_data.py`` of
facebookresearch/DPR (its ``s3_url`` minus the base ``https://dl.fbaipublicfiles.com/dpr/``).
Only the files the two papers use are listed: the Wikipedia passages, the retriever training and
dev sets of the five datasets (and NQ with DPR's adversarial hard negatives), and their test
questions. Files keep DPR's names, compressed as published: the pipeline reads ``.gz`` directly,
so nothing is unpacked (DPR's script unpacks; note ``trivia-test.qa.csv.gz``, the one gzipped
question file). SQuAD v1.1 itself comes from its official site, under its own base URL.
"""

from __future__ import annotations

import os

from dataclasses import dataclass
from pathlib import PurePosixPath

from dcsr.errors import InputError

DPR_BASE_URL = "https://dl.fbaipublicfiles.com/dpr/"
SQUAD_BASE_URL = "https://rajpurkar.github.io/SQuAD-explorer/dataset/"


@dataclass(frozen=True)
class Resource:
    key: str  # DPR's resource key (ours for SQuAD)
    path: str  # relative to the base URL of ``site``
    site: str = "dpr"  # "dpr" or "squad": which base URL

    @property
    def file(self) -> str:
        """The name it is stored under: the published file name."""
        return PurePosixPath(self.path).name


def _retriever(key: str, name: str) -> Resource:
    return Resource(f"data.retriever.{key}", f"data/retriever/{name}")


RESOURCES: tuple[Resource, ...] = (
    Resource("data.wikipedia_split.psgs_w100", "wikipedia_split/psgs_w100.tsv.gz"),
    # DPR's keys say "webq", its files "webquestions"
    *(_retriever(f"{key}-{split}", f"biencoder-{name}-{split}.json.gz")
      for key, name in (("nq", "nq"), ("trivia", "trivia"), ("squad1", "squad1"), ("webq", "webquestions"),
                        ("curatedtrec", "curatedtrec"))
      for split in ("train", "dev")),
    _retriever("nq-adv-hn-train", "biencoder-nq-adv-hn-train.json.gz"),
    _retriever("qas.nq-test", "nq-test.qa.csv"),
    _retriever("qas.trivia-test", "trivia-test.qa.csv.gz"),
    _retriever("qas.squad1-test", "squad1-test.qa.csv"),
    _retriever("qas.webq-test", "webquestions-test.qa.csv"),
    _retriever("qas.curatedtrec-test", "curatedtrec-test.qa.csv"),
    Resource("squad.v1.1.train", "train-v1.1.json", site="squad"),
    Resource("squad.v1.1.dev", "dev-v1.1.json", site="squad"),
)

# settings of the config's ``downloads`` section left unset (the lock file: in ``dir``)
DOWNLOAD_DEFAULTS = {"dir": "downloads", "base_url": DPR_BASE_URL, "squad_base_url": SQUAD_BASE_URL,
                     "lock_name": "downloads.lock.json", "retries": 5, "timeout": 60}


def resource_files() -> list[str]:
    return [r.file for r in RESOURCES]


def resource_of_file(name: str) -> Resource:
    for r in RESOURCES:
        if r.file == name:
            return r
    raise InputError(name, f"not a known resource (known: {', '.join(resource_files())})")


def download_settings(section: dict) -> dict:
    """The config's ``downloads`` section with its defaults filled in."""
    out = {k: v for k, v in DOWNLOAD_DEFAULTS.items() if k != "lock_name"}
    out.update(section)
    out.setdefault("lock", f"{out['dir'].rstrip('/')}/{DOWNLOAD_DEFAULTS['lock_name']}")
    # The downloads folder may lie outside results: (a cache shared by several runs), so what
    # lands there is named by the pipeline: DPR's file names, and a lock file that is a .json,
    # never a name a config chose for it (~/.bashrc, which the lock's JSON would replace: its
    # URLs, the config's, would then run as shell at the next login).
    for key in ("dir", "lock"):
        if "{" in str(out[key]) or "}" in str(out[key]):
            raise InputError(f"config: downloads.{key}", f"{out[key]!r} holds a brace, which Snakemake reads as a "
                                                         "wildcard in a path: give a path without { or }")
    name = os.path.basename(str(out["lock"]).rstrip("/"))
    if not name.endswith(".json") or name.startswith("."):
        raise InputError("config: downloads.lock", f"{out['lock']!r}: the lock file's name must end in .json and not "
                                                   "start with a dot (it is written, replacing what is there): give "
                                                   f"one such as {DOWNLOAD_DEFAULTS['lock_name']}")
    return out


def resource_url(resource: Resource, settings: dict) -> str:
    """Where ``resource`` is fetched from: its site's base URL (a mirror, or a local server) + its path."""
    base = settings["squad_base_url" if resource.site == "squad" else "base_url"]
    return f"{base.rstrip('/')}/{resource.path}"


def site_path(resource: Resource) -> str:
    """Where ``resource`` lies in a local copy of both sites (``dpr/...``, ``squad/...``): serve
    that folder and set ``base_url`` to ``<url>/dpr/`` and ``squad_base_url`` to ``<url>/squad/``."""
    return f"{resource.site}/{resource.path}"


def lay_out_site(flat_dir, site_dir) -> list[str]:
    """Copy the resource files found in ``flat_dir`` (stored under their file names) to their
    places in a local site copy ``site_dir`` (:func:`site_path`). Returns the files laid out."""
    import shutil
    from pathlib import Path

    flat, site, done = Path(flat_dir), Path(site_dir), []
    for r in RESOURCES:
        if (flat / r.file).is_file():
            dest = site / site_path(r)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(flat / r.file, dest)
            done.append(r.file)
    return done
