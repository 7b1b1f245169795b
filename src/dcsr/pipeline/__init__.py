"""What the config means: validation of the config file (``config``), the settings' documentation
(``config_docs``), resources to download (``resources``), and the plan (``plan``, ``paths``)
that turns a config into datasets, models, runs, tables and file paths for the Snakemake rules.
"""
