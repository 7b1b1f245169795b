"""Retrieval: BM25 (Pyserini), embedding corpora and questions, FAISS shard indexes and their
search, DCSR's HasAns score normalization, and the mining of hard negatives.
"""
