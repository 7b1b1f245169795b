"""Scoring runs and reporting them: DPR's top-k answer recall, confidence intervals and paired
tests, the results tables, figures, the claims ledger and the regression pins.
"""
