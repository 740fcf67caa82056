# goodputlab: `make lab` opens the book, `make test` runs every test.
# Both create .venv and install into it on first use.
#
# Which torch: TORCH=auto (default) installs a CUDA build where `nvidia-smi -L`
# finds a GPU and the CPU build everywhere else (constraints/cpu.txt, plus the
# PyTorch CPU wheel index when it is reachable). Force one with TORCH=cpu or TORCH=cuda.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= auto
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
CHAPTER ?= book/01_what_is_goodput.ipynb
LAB_ARGS ?=
PYTEST_ARGS ?=
# JupyterLab refuses to run as root unless told; containers and CI often are root
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

ifeq ($(TORCH),auto)
  TORCH_BUILD := $(shell nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
else
  TORCH_BUILD := $(TORCH)
endif

STAMP := $(VENV)/.installed-$(TORCH_BUILD)

.PHONY: lab test install test-fast notebooks bench clean help

help:
	@echo "make lab    - set up .venv and open the book in JupyterLab"
	@echo "make test   - set up .venv and run the whole test suite"
	@echo "make bench  - run the benchmarks (figures go in benchmarks/RESULTS.md)"
	@echo "torch build here: $(TORCH_BUILD) (override with TORCH=cpu|cuda)"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "goodputlab needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml constraints/cpu.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	@set -e; \
	if [ "$(TORCH_BUILD)" = cpu ]; then \
	  extra="-c constraints/cpu.txt"; \
	  if $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$(TORCH_CPU_INDEX)/torch/" >/dev/null 2>&1; then \
	    extra="$$extra --extra-index-url $(TORCH_CPU_INDEX)"; \
	  fi; \
	else extra=""; fi; \
	echo "installing goodputlab with a $(TORCH_BUILD) torch build"; \
	$(BIN)/python -m pip install --quiet $$extra -e '.[book,test]'
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab $(ALLOW_ROOT) $(LAB_ARGS) $(CHAPTER)

# Everything: unit and end-to-end tests, every notebook under papermill, nbval on the committed notebooks.
test: $(STAMP)
	GOODPUTLAB_SMOKE=1 $(BIN)/python -m pytest tests --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg book labs $(PYTEST_ARGS)

# The package's tests alone, without notebooks.
test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not notebooks" $(PYTEST_ARGS)

# Every benchmark in turn (about 25 minutes on 2 cores); record what they print in benchmarks/RESULTS.md.
bench: $(STAMP)
	$(BIN)/python benchmarks/ledger_overhead.py
	$(BIN)/python benchmarks/simulate_speed.py
	$(BIN)/python benchmarks/checkpoint_stall.py
	$(BIN)/python benchmarks/pipeline.py
	$(BIN)/python benchmarks/validate_theory.py
	$(BIN)/python benchmarks/serving.py

clean:
	rm -rf runs .pytest_cache
