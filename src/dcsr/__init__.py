"""dcsr: reproduce DCSR and DPR encoder attribution end to end.

Stages pass data to each other through files in documented formats (see README,
"Files"): DPR's TSV/JSON for inputs, `.npy` shards with ids for vectors, TREC runs
for retrieval, JSON for metrics, CSV/Markdown for tables.
"""

__version__ = "0.1.0"
