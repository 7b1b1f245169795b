"""Every file the pipeline writes, as one Snakemake path pattern each: the one definition of the
layout of ``results/`` (README, "Files"). ``{corpus}``, ``{dataset}``, ``{model}``, ``{qmodel}``,
``{pmodel}``, ``{shard}``, ``{table}``, ``{percent}``, ``{family}`` and ``{retriever}`` are wildcards; the rules
use these names as they are (``rules/common.smk`` puts them in the workflow's namespace).
"""

from __future__ import annotations

from types import SimpleNamespace


def patterns(results: str, downloads_dir: str) -> SimpleNamespace:
    """The path patterns under ``results`` (the config's ``results``), and ``DOWNLOADED``, DPR's
    files as published under ``downloads_dir`` (shared by every config that names the same
    ``downloads.dir``)."""
    CORPUS_TSV = f"{results}/data/{{corpus}}/psgs_w100.tsv"
    GENERATED_TRAIN = f"{results}/data/{{corpus}}/{{dataset}}-train.json"
    GENERATED_DEV = f"{results}/data/{{corpus}}/{{dataset}}-dev.json"
    GENERATED_TEST = f"{results}/data/{{corpus}}/{{dataset}}-test.qa.csv"
    # a dataset's dev questions as a test set (variants with questions: dev; DCSR Table 8)
    DEV_QUESTIONS = f"{results}/data/{{corpus}}/{{dataset}}-dev.qa.csv"
    # a BEIR folder (dcsr.data.beir): its corpus's passage id -> document _id, and a test set's
    # queries (a question file without answers), their _ids and its qrels with the original ids
    BEIR_DOC_IDS = f"{results}/data/{{corpus}}/beir-doc-ids.tsv"
    BEIR_QUERIES = f"{results}/data/{{corpus}}/{{dataset}}-test.queries.tsv"
    BEIR_QUERY_IDS = f"{results}/data/{{corpus}}/{{dataset}}-test.query-ids.tsv"
    BEIR_QRELS = f"{results}/data/{{corpus}}/{{dataset}}-test.qrels"
    SENTENCES = f"{results}/sentences/{{corpus}}/sentences.tsv"
    # a corpus's passages by id (dcsr.data.passage_store): what scoring a run and embedding a shard read
    STORE_DIR = f"{results}/store/{{corpus}}"
    STORE = {k: f"{STORE_DIR}/{v}" for k, v in (("passages", "passages.jsonl"), ("ids", "ids.npy"), ("offsets", "offsets.npy"))}
    SENTENCE_STATS = f"{results}/sentences/{{corpus}}/stats.json"
    BM25_INDEX = f"{results}/bm25/{{corpus}}/index"
    MINED_TRAIN = f"{results}/bm25/negatives/{{dataset}}-train.json"
    # a training set with the hard negatives a dense model (the miner, {model}) retrieves
    DENSE_NEGATIVES = f"{results}/negatives/{{model}}/{{dataset}}-train.json"
    SAMPLED_TRAIN = f"{results}/samples/{{dataset}}/train-{{percent}}pct.json"
    # the concatenated training and dev sets of a model trained on a list of datasets (DCSR's Multi)
    MERGED_TRAIN = f"{results}/train/{{model}}/train.json"
    MERGED_DEV = f"{results}/train/{{model}}/dev.json"
    MODEL_DIR = f"{results}/models/{{model}}"
    CHECKPOINT_DIR = f"{results}/checkpoints/{{model}}"
    # a model in the format its family's tools read (DPR's Hugging Face classes or
    # sentence-transformers: dcsr.models.export); made on request only, not by the default target
    EXPORT_DIR = f"{results}/export/{{model}}"
    # a passage encoder's index of a corpus in Pyserini's dense layout (index, docid; a DPR model's
    # question encoder for Pyserini's query encoders: dcsr.retrieval.pyserini_export); on request only
    PYSERINI_EXPORT_DIR = f"{results}/export/pyserini/{{corpus}}/{{pmodel}}"
    QUERY_DIR = f"{results}/queries/{{qmodel}}"  # one job per question encoder: every test set it is searched with
    QUERY_VECTORS = f"{QUERY_DIR}/{{dataset}}.npy"
    SHARD_VECTORS = f"{results}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.npy"
    SHARD_IDS = f"{results}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.ids.npy"
    SHARD_SENTENCE_NUMBERS = f"{results}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.sents.npy"
    # what embedded the shard: its stats and kind (device, compute precision, runtime; dcsr.evaluation.pins)
    SHARD_STATS = f"{results}/embeddings/{{corpus}}/{{pmodel}}/shard-{{shard}}.json"
    SHARD_INDEX = f"{results}/index/{{corpus}}/{{pmodel}}/shard-{{shard}}.faiss"
    # one search job per passage-encoder shard answers every question set searched against it
    SHARD_HITS_DIR = f"{results}/hits/{{corpus}}/{{pmodel}}/shard-{{shard}}"
    SHARD_HITS_IN_DIR = "{qmodel}/{dataset}.npz"
    # BM25 is the (question, passage) "encoder pair" (bm25, bm25), so every retriever's run,
    # metrics and table row share one path shape.
    RUN = f"{results}/runs/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.trec"
    # hybrid retrieval (retriever: hybrid rows): BM25's run fused with the dense run of (qmodel, pmodel)
    HYBRID_RUN = f"{results}/runs/{{corpus}}/hybrid-{{fusion}}/{{qmodel}}/{{pmodel}}/{{dataset}}.trec"
    HYBRID_METRICS = f"{results}/metrics/{{corpus}}/hybrid-{{fusion}}/{{qmodel}}/{{pmodel}}/{{dataset}}.json"
    HYBRID_QUESTIONS = f"{results}/metrics/{{corpus}}/hybrid-{{fusion}}/{{qmodel}}/{{pmodel}}/{{dataset}}.questions.jsonl"
    FUSION_WEIGHT = f"{results}/fusion/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.json"  # linear fusion's weight, chosen on dev
    TEMPERATURE = f"{results}/temperature/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.json"  # dcsr.temperature: dev
    # a BEIR test set's run (RUN or HYBRID_RUN: {retriever} is qmodel/pmodel or hybrid-fusion/qmodel/pmodel)
    # with the collection's original query and document ids, beside it, for its own qrels and tools
    ORIGINAL_ID_RUN = f"{results}/runs/{{corpus}}/{{retriever}}/{{dataset}}.original-ids.run"
    METRICS = f"{results}/metrics/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.json"
    QUESTION_RESULTS = f"{results}/metrics/{{corpus}}/{{qmodel}}/{{pmodel}}/{{dataset}}.questions.jsonl"
    # answer-match qrels pooled over every run of a test set (TREC pooling), for the standard measures
    POOLED_QRELS = f"{results}/qrels/{{table}}/{{corpus}}/{{dataset}}.qrels"
    POOL_INFO = f"{results}/qrels/{{table}}/{{corpus}}/{{dataset}}.pool.json"
    TABLE_CSV = f"{results}/tables/{{table}}.csv"
    TABLE_MD = f"{results}/tables/{{table}}.md"
    # DCSR Table 1 (questions per gold passage of every dataset's training set) and Figure 4
    # (in-batch dev accuracy after each epoch, per training dataset)
    TABLE1_CSV = f"{results}/tables/table1_questions_per_passage.csv"
    TABLE1_MD = f"{results}/tables/table1_questions_per_passage.md"
    VALIDATION_PNG = f"{results}/figures/validation-{{dataset}}.png"
    VALIDATION_CSV = f"{results}/figures/validation-{{dataset}}.csv"
    # DCSR Appendix B: dev positives (and their titles) among the training positives, per dataset
    APPENDIX_B = f"{results}/tables/dcsr_appendix_b"  # + .csv / .md
    CLAIMS = f"{results}/claims"  # + .csv / .md: the claims ledger
    # Encoder attribution (second paper): every pair's metrics in one file, then its tables and figures
    PAIR_MATRIX = f"{results}/attribution/pair_matrix.csv"
    ATTRIBUTION_TABLE1 = f"{results}/tables/attribution_table1"  # + .csv / .md: questions per dataset
    ATTRIBUTION_TABLE2 = f"{results}/tables/attribution_table2"  # + .csv / .md
    MARGINALS = f"{results}/tables/attribution_marginals-{{family}}"  # + .csv / .md
    MARGINALS_PNG = f"{results}/figures/attribution_marginals-{{family}}.png"
    PAIR_HEATMAP = f"{results}/figures/pair_matrix-{{family}}"  # + .png / .csv
    SWEEP_FIGURE = f"{results}/figures/data_efficiency"  # + .png / .csv
    ATTRIBUTION_TABLE4 = f"{results}/tables/attribution_table4"  # + .csv / .md
    FAMILY_COMPARISON = f"{results}/tables/attribution_compare"  # + .csv / .md
    ATTRIBUTION_TABLE3 = f"{results}/tables/attribution_table3"  # + .csv / .md
    COVERAGE_FIGURE = f"{results}/figures/coverage"  # + .png / .csv
    # DPR's files as published (rules/download.smk), outside results/: shared by every config that
    # names the same downloads.dir
    # DPR's files as published (rules/download.smk), outside results/
    DOWNLOADED = f"{downloads_dir}/{{file}}"
    return SimpleNamespace(**{k: v for k, v in locals().items() if k.isupper()})


def log_path(results: str, rule_name: str, name: str) -> str:
    return f"{results}/logs/{rule_name}/{name}.log"


def bench_path(results: str, rule_name: str, name: str) -> str:
    return f"{results}/benchmarks/{rule_name}/{name}.tsv"
