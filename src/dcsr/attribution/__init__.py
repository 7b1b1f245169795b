"""The encoder-attribution paper's analysis: the pair matrix of question x passage encoders, its
marginals, the data-efficiency sweep, dataset statistics, and their tables and figures.
"""
