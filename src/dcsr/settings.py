"""Every setting of the pipeline, defined once: name, type, default, allowed values, help.

The config sections ``train``, ``dcsr``, ``bm25``, ``mining``, ``embed``, ``index``,
``search`` and ``evaluate`` (and a model's own ``train:``) are checked against these
definitions when Snakemake builds the DAG (``rules/common.smk``), and the training code
fills its defaults and checks its ``--settings`` from the same table
(:func:`dcsr.training.samples.validate_settings`). Nothing here imports torch. :func:`reference` is the
settings part of config/README.md (``python -m dcsr.pipeline.config_docs > config/README.md``).

An unknown key, a wrong type or a value out of range is an :class:`~dcsr.errors.InputError`
naming the key where it sits (``config: models.dcsr.train.poolng``) and, for an unknown key,
the closest valid name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Mapping

from dcsr.errors import InputError

_NONE = type(None)


@dataclass(frozen=True)
class Setting:
    """One setting: accepted Python types, default, one line of help, and its allowed values
    (``choices``) or range (``low``/``high``, inclusive unless ``*_open``)."""

    types: tuple[type, ...]
    default: Any
    help: str
    choices: tuple | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    item: type | None = None  # a list of this type (evaluate.ks)

    def type_name(self) -> str:
        names = ["null" if t is _NONE else t.__name__ for t in self.types]
        if self.item is not None:
            names = [f"list of {self.item.__name__}" if n == "list" else n for n in names]
        return " or ".join(names)

    def allowed(self) -> str:
        """The allowed values in words (for the docs and messages)."""
        if self.choices is not None and self.low is None and self.high is None:
            return ", ".join(str(c) for c in self.choices)
        def number(x):  # an int in full (2**32-1, not 4.29497e+09), a float as %g
            return str(x) if isinstance(x, int) else f"{x:g}"

        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {number(self.low)}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {number(self.high)}")
        if self.choices is not None:  # a word or a number in range (temperature: dev or > 0)
            return ", ".join(str(c) for c in self.choices) + " or " + " and ".join(parts)
        return " and ".join(parts)


def _s(types, default, help, **kw) -> Setting:
    return Setting(types if isinstance(types, tuple) else (types,), default, help, **kw)


POOLINGS = ("auto", "cls", "mean")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AMP = ("auto", "bf16", "fp16", "off")
EMBED_BACKENDS = ("auto", "torch", "torch-cast", "onnx-int8", "openvino")  # dcsr.retrieval.embed, dcsr.models.onnx_int8, .openvino_encoder
SAMPLINGS = ("bm25_1", "bm25_2", "inpassage_bm25")
POSITIVE_TEXTS = ("whole", "kept")
INPASSAGE_NEGATIVES = ("any", "not_adjacent")
POSITIVE_MATCHES = ("tokens", "substring")
SPLITTERS = ("blingfire", "dcsr", "pysbd", "syntok", "segtok", "sentencex", "spacy")  # dcsr.data.sentences
DEFAULT_SPLITTER = "blingfire"  # benchmarks/sentence-splitting
MATCH_TYPES = ("string", "regex")
#: What a regex test answer that does not compile does (dcsr.data.answers.check_patterns): stop the
#: evaluation, or count as never found, as DPR's ``regex_match`` scores it.
BAD_PATTERNS = ("refuse", "never_found")
TOKEN_TYPES = ("pair", "zeros")  # dcsr.models.biencoder.BiEncoder
QUESTION_TEXTS = ("raw", "dpr")  # dcsr.data.answers.encoder_question
INDEX_GPU = ("auto", True, False, "torch")  # dcsr.retrieval.placement.place_index
#: The largest seed: numpy's (``RandomState``, ``default_rng``) take 0..2**32-1, and every seed of
#: the config (``seed:``, ``train.seed``, a subset's, the sweep's) reaches one of them.
SEED_MAX = 2**32 - 1
#: The most hits a search keeps per question (``search.k``): a search job holds a batch of 4,096
#: questions x k scores and ids (12 bytes a hit: 0.5 GB at 10,000, about 64 GiB at 1.4 million) and
#: its hits file questions x k; the papers read 100.
MAX_HITS = 10_000

#: What a bi-encoder's training reads (``dcsr.training.loop``). Defaults are DPR's (paper and its
#: ``biencoder_nq`` config). Every one of them determines the model except those in
#: :data:`NOT_IN_FINGERPRINT`.
TRAIN: dict[str, Setting] = {
    "batch_size": _s(int, 16, "questions per process per step (DPR: 16 per GPU)", low=1),
    "dev_batch_size": _s((int, _NONE), None, "questions per process per dev batch (null: batch_size)", low=1),
    "learning_rate": _s((float, int), 2e-5, "peak learning rate", low=0, low_open=True),
    "epochs": _s(int, 40, "passes over the training set", low=1),
    "warmup_steps": _s(int, 1237, "linear warm-up steps (DPR's NQ config)", low=0),
    "warmup_ratio": _s((float, int, _NONE), None, "warm-up as a fraction of all steps; overrides warmup_steps",
                       low=0, high=1),
    "weight_decay": _s((float, int), 0.0, "AdamW weight decay (not on biases and norm weights)", low=0),
    "adam_eps": _s((float, int), 1e-8, "AdamW epsilon", low=0, low_open=True),
    "max_grad_norm": _s((float, int), 2.0, "gradient-norm clipping of the global batch's gradient, whatever the "
                                           "process count (0: none); DPR's code clips each process's share after "
                                           "DDP's averaging, 1 / processes of it: its 2.0 on 8 GPUs is 16 here",
                        low=0),
    "hard_negatives": _s(int, 1, "hard negatives per question (from hard_negative_ctxs); DPR's: a DCSR model "
                                 "trains with the negatives of dcsr.sampling", low=0),
    "other_negatives": _s(int, 0, "other negatives per question (from negative_ctxs); DPR's: a DCSR model trains "
                                  "with the negatives of dcsr.sampling", low=0),
    "shuffle_positives": _s(bool, False, "pick a random positive instead of the first"),
    "question_max_length": _s(int, 256, "question tokens (DPR: 256)", low=1),
    "passage_max_length": _s(int, 256, "passage tokens, title + text (DPR: 256)", low=1),
    "pooling": _s(str, "auto", "auto (the init's own: a sentence-transformers model's Pooling module, else CLS), "
                               "cls (DPR: the [CLS] state; DCSR: the <sent> marker's) or mean (of the tokens)",
                  choices=POOLINGS),
    "token_types": _s(str, "pair", "the token types the encoders see: pair (the tokenizer's: a passage's text after "
                                   "its title is type 1, as a sentence pair) or zeros (every token type 0, as DPR's "
                                   "and DCSR's code feed, in training and in encoding); saved with the model, so "
                                   "every later stage encodes as it trained",
                      choices=TOKEN_TYPES),
    "question_text": _s(str, "raw", "the question text the encoders see: raw (as written) or dpr (DPR's and DCSR's "
                                    "normalize_question: a right single quote ’ written '; their code applies it "
                                    "in training and retrieval); saved with the model, so every later stage encodes "
                                    "questions as it trained",
                        choices=QUESTION_TEXTS),
    "normalize": _s((bool, _NONE), None, "unit-normalize vectors, so scores are scale x cosine (null: as the init's "
                                         "modules say: a sentence-transformers Normalize module)"),
    "scale": _s((float, int, _NONE), None, "scores are scale x the similarity (null: 20 for normalized vectors, "
                                           "sentence-transformers' scale; 1, the dot product, otherwise)",
                low=0, low_open=True),
    "tie_encoders": _s(bool, False, "one encoder for questions and passages (Tevatron's default, sentence-transformers' "
                                    "MultipleNegativesRankingLoss); false: two, as DPR and DCSR"),
    "seed": _s(int, 12345, "seed of order, negatives, dropout (0 to 2**32-1, numpy's seed limit)", low=0,
               high=SEED_MAX),
    "amp": _s(str, "auto", "auto (bf16 where the GPU computes it natively, else fp16 + GradScaler, on CUDA; bf16 on a CPU with AMX or AVX-512 BF16, else off), "
                           "bf16, fp16, off",
              choices=AMP),
    "checkpoint_every_steps": _s(int, 0, "also checkpoint every N steps (0: at each epoch end only)", low=0),
    "max_steps": _s(int, 0, "stop after N steps (0: no cap); the schedule decays to the cap", low=0),
    "log_every_steps": _s(int, 100, "log a rolling training loss every N steps (0: never)", low=0),
    "dropout": _s((float, int, _NONE), None, "override every dropout probability (null: keep the checkpoint's)",
                  low=0, high=1, high_open=True),
    "attention_dropout": _s((float, int, _NONE), None, "override the dropout of the attention probabilities only "
                                                       "(BERT's attention_probs_dropout_prob; null: as dropout says). "
                                                       "0 lets torch run its fused attention kernel in training "
                                                       "(steps 1.2-1.5x faster on a CPU; on the demo's dev questions "
                                                       "DPR no worse, DCSR 0.8 points lower at top-5: "
                                                       "benchmarks/demo/demo.md)",
                            low=0, high=1, high_open=True),
    "num_workers": _s(int, 0, "DataLoader workers building and tokenizing batches", low=0),
    "grad_cache_chunk": _s(int, 0, "GradCache (Gao et al. 2021): encode each batch this many questions at a time, "
                                   "with the passages in proportion (chunk x passages / questions), to train a large "
                                   "batch in a chunk's memory with the same loss and gradients (0: off, one pass)",
                           low=0),
    "multiset_batches": _s(str, "per_dataset", "a model trained on several datasets: per_dataset (every global batch "
                                               "one dataset's, as DCSR's code and DPR's later MultiSetDataIterator) or "
                                               "mixed (all records in one shuffled pool, as the code of DPR's paper)",
                           choices=("per_dataset", "mixed")),
    "val_av_rank_hard_neg": _s(int, 30, "hard negatives per dev question for the average rank (DPR: 30)", low=0),
    "val_av_rank_other_neg": _s(int, 30, "other negatives per dev question for the average rank (DPR: 30)", low=0),
    "val_av_rank_max_qs": _s(int, 10000, "dev questions for the average rank (DPR: 10000)", low=0),
    "val_av_rank_shards": _s(int, 1, "the average rank as DPR's on this many GPUs: the ranked dev questions cut into "
                                     "as many contiguous shards, each question ranked among its own shard's passages "
                                     "only (1: all pooled, DPR on one GPU; the papers' 8 GPUs: 8)", low=1),
    "val_max_qs": _s((int, _NONE), None, "validate on the first N dev questions only (null: all, as DPR)", low=1),
    "val_av_rank_start_epoch": _s(int, 30, "first epoch (0-based) whose validation also computes the average "
                                           "rank; earlier ones the NLL only (DPR: 30); the last always does", low=0),
    "model_from": _s(str, "last", "which encoders become the trained model: last (the end of training) or best "
                                  "(DPR's and DCSR's 'best validation checkpoint': the lowest average rank from "
                                  "val_av_rank_start_epoch on, the lowest NLL in a run that ends before it)",
                     choices=("last", "best")),
}

#: How a training job is launched (read by the rules, never passed to the training code).
LAUNCH: dict[str, Setting] = {
    "gpus": _s(int, 0, "GPUs per node; >1 starts torchrun --nproc_per_node gpus (DDP); 0 takes one where "
                       "the job runs on this machine and torch sees a GPU (dcsr.pipeline.gpus)", low=0),
    "nodes": _s(int, 1, ">1: one Slurm job over this many nodes, srun + torchrun with a c10d rendezvous", low=1),
    "cpus_per_gpu": _s(int, 2, "CPU cores per GPU of a training job (threads)", low=1),
}

#: DCSR's sample building (``dcsr.models.markers``): set under ``dcsr:`` or a DCSR model's ``train:``.
DCSR_TRAIN: dict[str, Setting] = {
    "sampling": _s(str, "inpassage_bm25", "DCSR negatives (Table 4): bm25_1 (+1 BM25), bm25_2 (+2 BM25), "
                                          "inpassage_bm25 (+1 in-passage +1 BM25)", choices=SAMPLINGS),
    "max_sentences": _s(int, 10, "<sent> markers per passage (DCSR's code: 10)", low=1),
    "positive_text": _s(str, "whole", "where a positive sentence's answer is looked for: whole (DCSR's code: the "
                                      "whole sentence, even a tail that passage_max_length cuts) or kept (only "
                                      "the tokens the encoder sees)", choices=POSITIVE_TEXTS),
    "positive_match": _s(str, "tokens", "how a sentence is found to hold an answer: tokens (DPR's answer matching, "
                                        "as retrieval is scored) or substring (DCSR's code: the lower-cased answer "
                                        "anywhere in the lower-cased sentence, inside a word too; string-matched "
                                        "datasets only)", choices=POSITIVE_MATCHES),
    "inpassage_negative": _s(str, "any", "which answer-free sentence of the gold passage can be inpassage_bm25's "
                                         "in-passage negative: any (Section 3.2.2) or not_adjacent (DCSR's code: "
                                         "none next to an answer sentence)", choices=INPASSAGE_NEGATIVES),
}

#: Set by the pipeline from the training dataset's ``match``, not by a user.
DCSR_INTERNAL: dict[str, Setting] = {
    "match_type": _s(str, "string", "answer matching for positive sentences: string or regex", choices=MATCH_TYPES),
    "splitter": _s(str, DEFAULT_SPLITTER, "the sentence splitter of the corpus's table (dcsr.splitter), for a passage "
                                     "split where the table lacks it", choices=SPLITTERS),
}

#: Settings that do not change the trained model: a checkpoint written under other values
#: resumes (logging, data-loading workers, checkpoint frequency, GradCache chunks: the same
#: loss and gradients computed in pieces).
NOT_IN_FINGERPRINT = ("log_every_steps", "num_workers", "checkpoint_every_steps", "grad_cache_chunk")


def run_only_keys(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The training settings of :data:`NOT_IN_FINGERPRINT` that change nothing of the model these
    ``settings`` make: all four, but ``grad_cache_chunk`` with dropout on (None: the checkpoint's
    own, BERT's 0.1), where chunks draw other masks than one pass over the batch (the same loss in
    expectation, not the same model)."""
    if settings.get("grad_cache_chunk") and settings.get("dropout") != 0.0:
        return tuple(k for k in NOT_IN_FINGERPRINT if k != "grad_cache_chunk")
    return NOT_IN_FINGERPRINT

SECTIONS: dict[str, dict[str, Setting]] = {
    "train": {**TRAIN, **LAUNCH},
    "dcsr": {
        **DCSR_TRAIN,
        "temperature": _s((float, int, str), 1.0, "softmax temperature of HasAns score normalization (official: 1); "
                                                  "dev: chosen per run on the dev questions of the test set's dataset "
                                                  "(a test set of dev questions, questions: dev, keeps 1: a "
                                                  "temperature chosen on it would be tuned on what it reports)",
                          choices=("dev",), low=0, low_open=True),
        "sentences_per_passage": _s((float, int, _NONE), None, "k of the top search.k x k sentences "
                                                               "searched per shard (null: the corpus mean)", low=0, low_open=True),
        "splitter": _s(str, DEFAULT_SPLITTER, "how passages are cut into sentences: blingfire (chosen on real text, "
                                         "benchmarks/sentence-splitting) or dcsr (DCSR's code, process_ctx.py: "
                                         "which made the paper's corpus; fewer, longer sentences), or pysbd, syntok, "
                                         "segtok, sentencex, spacy where installed", choices=SPLITTERS),
    },
    "bm25": {
        "mine_negatives": _s(bool, True, "fill hard_negative_ctxs of training sets from BM25, as DPR did"),
        "negatives": _s(int, 1, "hard negatives kept per question", low=1),
        "depth": _s(int, 100, "BM25 hits inspected per question when mining (at most 10,000, as search.k)", low=1,
                      high=MAX_HITS),
        "k": _s(int, 100, "hits kept per test question (at most 10,000, as search.k)", low=1, high=MAX_HITS),
        "k1": _s((float, int), 0.9, "BM25 k1 (Anserini's default)", low=0),
        "b": _s((float, int), 0.4, "BM25 b (Anserini's default)", low=0, high=1),
        "threads": _s(int, 1, "threads of an Anserini job", low=1),
    },
    "mining": {
        "depth": _s(int, 100, "hits searched per training question: passages, or sentences for a DCSR miner (at "
                               "most 10,000, as search.k)", low=1, high=MAX_HITS),
        "negatives": _s(int, 30, "hard negatives kept per question", low=1),
    },
    "embed": {
        "shards": _s(int, 1, "embedding shard jobs per corpus (unless passages_per_shard is set and the "
                                   "corpus size is known)", low=1),
        "passages_per_shard": _s((int, _NONE), None, "at most this many passages per shard job where the "
                                                     "corpus size is known (null: use shards)", low=1),
        "batch_size": _s(int, 64, "passages per encoder batch", low=1),
        "fp16": _s(bool, False, "store vectors as float16"),
        "precision": _s(str, "auto", "compute precision of the encoders: auto (bf16 on a CUDA GPU that computes it natively, else fp16; "
                                     "bf16 on a CPU with AMX or AVX-512 BF16; else fp32), fp32, bf16, fp16 (CUDA only)",
                        choices=PRECISIONS),
        "backend": _s(str, "auto", "runtime of the passage encoder in corpus embedding: auto (openvino where it "
                                   "computes in bf16 on AVX-512 BF16 without AMX, as AMD Zen 4, where it was measured "
                                   "faster than torch; torch elsewhere); torch (weights in fp32, bf16/fp16 matrix "
                                   "products under autocast); torch-cast (the weights cast once to the compute precision, "
                                   "no autocast: layer norms, residuals and pooling in it too; torch in fp32); onnx-int8 (ONNX Runtime, int8 weights, "
                                   "one passage per call; CPU only; it changes the vectors); or openvino (OpenVINO's "
                                   "CPU plugin at the compute precision, fp32 or bf16; CPU only). "
                                   "benchmarks/embedding-backends/embedding-backends.md gives their speed and top-k cost",
                      choices=EMBED_BACKENDS),
        "gpus": _s(int, 0, "GPUs requested per embedding job (0: one where the job runs on this machine and "
                           "torch sees a GPU; dcsr.pipeline.gpus); a job encodes on one GPU, so more leave the rest "
                           "idle but for dense mining's FAISS search: spread a corpus over GPUs with embed.shards",
                   low=0),
    },
    "index": {
        "factory": _s(str, "Flat", "a FAISS index_factory string (inner product; no PCA, L2norm or narrowing rotation, which change its scores); Flat = exact inner product"),
        "train_size": _s(int, 100000, "vectors used to train factories that need training", low=1),
        "search_params": _s(str, "", "FAISS ParameterSpace string set on each shard index before searching, such "
                                     "as nprobe=64 (IVF), efSearch=128 (HNSW) or nprobe=32,quantizer_efSearch=64 "
                                     "(empty: FAISS's defaults, nprobe=1 and efSearch=16); changing it searches "
                                     "again without rebuilding the indexes"),
        "gpu": _s((str, bool), "auto", "where each shard index is searched (dcsr.retrieval.placement.place_index): "
                                       "auto (faiss-gpu where faiss sees a GPU; else torch on CUDA for a Flat index "
                                       "where torch sees a GPU; else faiss on the CPU); true (faiss-gpu, the index "
                                       "sharded over every GPU, Flat in fp16; an index faiss-gpu cannot hold, such as "
                                       "SQ8 or HNSW32, stays on the CPU, and a search deeper than the 2,048 hits "
                                       "faiss-gpu returns a query goes to torch if Flat, else the CPU); torch (exact search of a Flat index in torch "
                                       "on CUDA, fp16 vectors and questions, fp32 scores, as faiss-gpu's Flat, for faiss-cpu "
                                       "beside a CUDA torch; other factories: faiss on the CPU); false (faiss on the "
                                       "CPU). true and torch without their GPU are an error",
                  choices=INDEX_GPU),
        "gpus": _s(int, 0, "GPUs requested per search job (faiss-gpu or torch; 0: one where the job runs on "
                           "this machine and index.gpu would search on a GPU there; dcsr.pipeline.gpus)", low=0),
    },
    "search": {
        "k": _s(int, 100, "passages retrieved per question (at most 10,000: a search job holds a batch of 4,096 "
                           "questions x k scores and ids, 12 bytes a hit, 0.5 GB at 10,000; the papers read 100)",
                 low=1, high=MAX_HITS),
    },
    "evaluate": {
        "ks": _s(list, [1, 5, 20, 100], "the k of top-k answer recall", item=int, low=1),
    },
}


def _where(where: str, key: str | None = None) -> str:
    return where if key is None else f"{where}.{key}"


def closest(key: str, known) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or ``''``."""
    match = difflib.get_close_matches(str(key), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {match[0]!r}?" if match else ""


def check_value(spec: Setting, value: Any, where: str) -> Any:
    """``value`` checked against ``spec`` (an int where a float is accepted becomes a float)."""
    def bad(msg):
        raise InputError(where, msg)

    # bool is an int in Python: a flag must not pass as a count, nor a count as a flag
    if not isinstance(value, spec.types) or (isinstance(value, bool) and bool not in spec.types):
        bad(f"expected {spec.type_name()}, found {value!r}")
    if isinstance(value, list):
        if not value:
            bad("must not be empty")
        for i, v in enumerate(value):
            check_value(Setting((spec.item,), None, "", low=spec.low, high=spec.high), v, f"{where}[{i}]")
        return list(value)
    # with a range as well (temperature: dev or a number), the choices are the strings allowed
    ranged = spec.low is not None or spec.high is not None
    if spec.choices is not None and (not ranged or isinstance(value, str)) and value not in spec.choices:
        bad(f"must be {spec.allowed()}, found {value!r}" if ranged else f"expected one of {spec.allowed()}, found {value!r}")
    if value is None or isinstance(value, (str, bool)):
        return value
    if spec.low is not None and (value < spec.low or (spec.low_open and value == spec.low)):
        bad(f"must be {spec.allowed()}, found {value!r}")
    if spec.high is not None and (value > spec.high or (spec.high_open and value == spec.high)):
        bad(f"must be {spec.allowed()}, found {value!r}")
    if float in spec.types and isinstance(value, int):
        return float(value)
    return value


def check(spec: Mapping[str, Setting], values: Mapping[str, Any] | None, where: str,
          hints: Mapping[str, str] | None = None) -> dict:
    """The given ``values`` checked against ``spec`` (defaults not filled in). ``where`` is the
    section's place (``config: train``, ``config: models.dcsr.train``, or ``settings`` for the
    training code);
    ``hints`` explain keys that belong elsewhere."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise InputError(_where(where), f"expected a mapping of keys to values, found {type(values).__name__}")
    out = {}
    for key, value in values.items():
        if key not in spec:
            hint = (hints or {}).get(key)
            if hint is None:
                hint = closest(key, spec) or f"; valid keys: {', '.join(sorted(spec))}"
            else:
                hint = f": {hint}"
            raise InputError(_where(where, key), f"unknown key {key!r}{hint}")
        out[key] = check_value(spec[key], value, _where(where, key))
    return out


def defaults(spec: Mapping[str, Setting]) -> dict:
    return {k: (list(s.default) if isinstance(s.default, list) else s.default) for k, s in spec.items()}


def filled(spec: Mapping[str, Setting], values: Mapping[str, Any] | None, where: str, **kw) -> dict:
    """The checked ``values`` with every default filled in."""
    return {**defaults(spec), **check(spec, values, where, **kw)}


class Settings(Mapping):
    """Checked settings with every default filled in, read-only: ``s.batch_size`` or
    ``s["batch_size"]``. Its keys are those of the :class:`Setting` specs it was checked against
    (:data:`TRAIN`, plus a sample builder's), so each name, type, default and range is written
    once, there; ``dict(s)`` is the plain mapping that checkpoints and ``dcsr.json`` record."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = dict(values)

    def __getattr__(self, key: str) -> Any:
        try:
            return self.__dict__["_values"][key]
        except KeyError:
            raise AttributeError(f"no setting {key!r}") from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Settings({self._values!r})"


_ELSEWHERE = {
    **{k: "a DCSR setting: set it under dcsr: (all DCSR models) or a DCSR model's own train:" for k in DCSR_TRAIN},
    "match_type": "set by the pipeline from the training dataset's match",
    "splitter": "set under dcsr: for every DCSR model (one sentence table a corpus), not a model's train:",
}


def check_train_combination(values: Mapping[str, Any], where: str) -> None:
    """What a filled training section's keys must satisfy together: ``model_from: best`` picks
    the validation with the lowest average rank, which ``val_av_rank_max_qs: 0`` never computes."""
    if values.get("model_from") == "best" and values.get("val_av_rank_max_qs") == 0:
        raise InputError(_where(where, "model_from"), "best picks the validation with the lowest average rank, "
                                                      "which val_av_rank_max_qs: 0 never computes; set "
                                                      "val_av_rank_max_qs above 0, or model_from: last")


def check_train_sections(cfg: Mapping[str, Any]) -> None:
    """The top-level ``train:`` and every model's ``train:`` (a DCSR model's may also set
    :data:`DCSR_TRAIN`); run at DAG build."""
    check(SECTIONS["train"], cfg.get("train"), "config: train", hints=_ELSEWHERE)
    for name, model in cfg.get("models", {}).items():
        own = model.get("train") if isinstance(model, Mapping) else None
        if model.get("method") == "dcsr":
            check({**SECTIONS["train"], **DCSR_TRAIN}, own, f"config: models.{name}.train", hints=_ELSEWHERE)
        else:
            hints = {k: f"a DCSR setting, and model {name!r} has method {model.get('method')!r}" for k in DCSR_TRAIN}
            check(SECTIONS["train"], own, f"config: models.{name}.train", hints={**_ELSEWHERE, **hints})
        own = own if isinstance(own, Mapping) else {}
        where = f"config: models.{name}.train" if {"model_from", "val_av_rank_max_qs"} & set(own) else "config: train"
        check_train_combination({**defaults(TRAIN), **(cfg.get("train") or {}), **own}, where)


def check_sections(cfg: dict) -> None:
    """Check every settings section of ``cfg`` and fill in the defaults of all but ``train``
    (whose values travel to the training code as given, which fills its own)."""
    check_train_sections(cfg)
    cfg.setdefault("train", {})
    for section in ("dcsr", "bm25", "mining", "embed", "index", "search", "evaluate"):
        cfg[section] = filled(SECTIONS[section], cfg.get(section), f"config: {section}")


def markdown_table(section: str) -> str:
    """A Markdown table of a section's settings (name, type, default, allowed values, help)."""
    rows = ["| key | type | default | allowed | what it is |", "|---|---|---|---|---|"]
    spec = SECTIONS[section] if section in SECTIONS else {"train_dcsr": DCSR_TRAIN}[section]
    for key, s in spec.items():
        default = "null" if s.default is None else str(s.default).lower() if isinstance(s.default, bool) else s.default
        rows.append(f"| `{key}` | {s.type_name()} | `{default}` | {s.allowed()} | {s.help} |")
    return "\n".join(rows)


_INTRO = {
    "train": "Training of every model; a model's own `train:` overrides any key for that model. "
             "`gpus`, `nodes` and `cpus_per_gpu` say how the job is launched.",
    "train_dcsr": "DCSR's sample building: under `dcsr:` for every DCSR model, or in a DCSR model's own `train:`.",
    "dcsr": "DCSR models (method `dcsr`): sample building and retrieval.",
    "bm25": "BM25 (Pyserini/Anserini): retrieval of test questions and hard-negative mining.",
    "mining": "Hard negatives mined by a dense model (`models.<name>.negatives_from`).",
    "embed": "Corpus embedding, one job per shard.",
    "index": "FAISS indexes, one per shard.",
    "search": "Dense search.",
    "evaluate": "Top-k answer recall (DPR's matching rules).",
}


def reference() -> str:
    """Every section's table: the settings part of config/README.md (``python -m dcsr.settings``
    prints it alone; ``python -m dcsr.pipeline.config_docs > config/README.md`` writes the whole file)."""
    parts = ["## Settings", "",
             "Generated from `src/dcsr/settings.py` (`python -m dcsr.settings` prints this part alone), the one "
             "definition that `snakemake` checks the config against before the first job and that the training "
             "code fills its defaults from. An unknown key or a bad value fails `snakemake -n` naming the key "
             "(and the closest valid one).", ""]
    for section in ("train", "train_dcsr", "dcsr", "bm25", "mining", "embed", "index", "search", "evaluate"):
        title = "DCSR keys of `train:`" if section == "train_dcsr" else f"`{section}:`"
        parts += [f"### {title}", "", _INTRO[section], "", markdown_table(section), ""]
    return "\n".join(parts)


if __name__ == "__main__":
    print(reference(), end="")
