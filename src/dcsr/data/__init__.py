"""DPR's file formats and the data the pipeline starts from: the corpus TSV, the bi-encoder
train/dev JSON and test QA CSV, TREC runs, SQuAD conversion, sentence splitting, downloads, the
passage store, corpus and training-set subsets, dataset variants, and DPR's answer matching.
Imports nothing of dcsr but the top-level modules (errors, fsutil, yamlutil, settings).
"""
