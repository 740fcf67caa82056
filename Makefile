# goodputlab: `make lab` opens the book, `make test` runs every test, `make dashboard` serves
# the workshop dashboard, `make figures` writes every chapter's charts for slides.
# They create .venv and install into it on first use: `make lab` only what the book
# needs (the `book` extra), `make dashboard` Voila too (the `workshop` extra), `make test`
# the test tools as well (the `test` extra).
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
# the folder JupyterLab serves (the repository, so book/ and labs/ are both reachable)
LAB_ROOT ?= $(CURDIR)
LAB_ARGS ?=
PYTEST_ARGS ?=
# JupyterLab refuses to run as root unless told; containers and CI often are root
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

ifeq ($(TORCH),auto)
  TORCH_BUILD := $(shell nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)
else
  TORCH_BUILD := $(TORCH)
endif

BOOK_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-book
WORKSHOP_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-workshop
TEST_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-test
comma_book_workshop := book,workshop
comma_book_test := book,test,workshop
# the workshop dashboard: Voila serves it as a web app (code hidden); DASHBOARD_ARGS adds Voila flags
# (--no-browser --port=8866 --Voila.ip=0.0.0.0 on a cloud machine); RECORDED=1 starts with recorded runs
DASHBOARD ?= labs/dashboard.ipynb
DASHBOARD_ARGS ?=
RECORDED ?=
# make figures: every chapter's charts as SVG and PNG; FULL=1 runs the chapters at full size (slower)
FIGURES ?= figures
FULL ?=
# JupyterLab settings for the book (no news feed: it needs the network and covers the notebook)
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: lab test install test-fast notebooks bench clean help dashboard figures

help:
	@echo "make lab        - set up .venv (book only) and open chapter 1 in JupyterLab (about 1 min the first time)"
	@echo "                  CHAPTER=labs/01_where_did_the_time_go.ipynb opens another notebook"
	@echo "make dashboard  - serve the workshop dashboard (labs/dashboard.ipynb) with Voila; RECORDED=1: recorded runs"
	@echo "make figures    - every chapter's charts as SVG and PNG in figures/ (FULL=1: full-size runs)"
	@echo "make test       - set up .venv (book and test tools) and run the whole suite (about 16 min on 2 cores)"
	@echo "make test-fast  - the package's tests without the notebooks (about 8 min on 2 cores)"
	@echo "make bench      - run the benchmarks (figures go in benchmarks/RESULTS.md)"
	@echo "make clean      - remove run outputs (runs/, pytest caches)"
	@echo "torch build here: $(TORCH_BUILD) (override with TORCH=cpu|cuda)"

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "goodputlab needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)

# $(call pip_install,EXTRAS): install the package (editable) with the right torch build and EXTRAS
define pip_install
	$(BIN)/python -m pip install --quiet --upgrade pip
	@set -e; \
	if [ "$(TORCH_BUILD)" = cpu ]; then \
	  extra="-c constraints/cpu.txt"; \
	  if $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$(TORCH_CPU_INDEX)/torch/" >/dev/null 2>&1; then \
	    extra="$$extra --extra-index-url $(TORCH_CPU_INDEX)"; \
	  fi; \
	else extra=""; fi; \
	echo "installing goodputlab[$(1)] with a $(TORCH_BUILD) torch build"; \
	$(BIN)/python -m pip install --quiet $$extra -e '.[$(1)]'
	@find $(VENV) -maxdepth 1 -name '.installed-*' ! -name '.installed-$(TORCH_BUILD)-*' -delete
	@mkdir -p $(dir $(LAB_SETTINGS)) && cp binder/overrides.json $(LAB_SETTINGS)
endef

$(BOOK_STAMP): pyproject.toml constraints/cpu.txt binder/overrides.json | $(BIN)/python
	$(call pip_install,book)
	@touch $@

$(WORKSHOP_STAMP): pyproject.toml constraints/cpu.txt binder/overrides.json | $(BIN)/python
	$(call pip_install,$(comma_book_workshop))
	@touch $@ $(BOOK_STAMP)

# the test tools include the book's and the workshop's dependencies, so a test install serves both too
$(TEST_STAMP): pyproject.toml constraints/cpu.txt binder/overrides.json | $(BIN)/python
	$(call pip_install,$(comma_book_test))
	@touch $@ $(BOOK_STAMP) $(WORKSHOP_STAMP)

install: $(TEST_STAMP)

# The server's root is the repository, so book/, labs/ and docs/ are all reachable; CHAPTER opens first.
lab: $(BOOK_STAMP)
	$(BIN)/jupyter lab $(ALLOW_ROOT) --ServerApp.root_dir=$(LAB_ROOT) --LabApp.default_url=/lab/tree/$(CHAPTER) $(LAB_ARGS)

# The workshop dashboard as a web app: Voila runs labs/dashboard.ipynb and shows its widgets, not its code.
# Nothing it serves comes from the network (the chart JavaScript comes from vl-convert).
dashboard: $(WORKSHOP_STAMP)
	GOODPUTLAB_RECORDED=$(if $(RECORDED),1,0) JUPYTER_PATH=$(CURDIR)/labs/jupyter$(if $(JUPYTER_PATH),:$(JUPYTER_PATH)) \
	  $(BIN)/voila --template=goodputlab --strip_sources=True --VoilaConfiguration.show_tracebacks=True \
	  $(DASHBOARD) $(DASHBOARD_ARGS)

# Every chapter's charts as SVG and PNG in $(FIGURES)/, for slides (SMOKE sizes unless FULL=1).
figures: $(BOOK_STAMP)
	$(BIN)/python tools/make_figures.py --out $(FIGURES) $(if $(FULL),--full) book/*.ipynb

# Everything: unit and end-to-end tests, every notebook under papermill, nbval on the committed notebooks.
test: $(TEST_STAMP)
	GOODPUTLAB_SMOKE=1 $(BIN)/python -m pytest tests --nbval-lax --nbval-sanitize-with tests/nbval_sanitize.cfg book labs $(PYTEST_ARGS)

# The package's tests alone, without notebooks.
test-fast: $(TEST_STAMP)
	$(BIN)/python -m pytest tests -m "not notebooks" $(PYTEST_ARGS)

# Every benchmark in turn (about 35 minutes on 2 cores); record what they print in benchmarks/RESULTS.md.
bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/ledger_overhead.py
	$(BIN)/python benchmarks/recorder_overhead.py
	$(BIN)/python benchmarks/simulate_speed.py
	$(BIN)/python benchmarks/checkpoint_stall.py
	$(BIN)/python benchmarks/pipeline.py
	$(BIN)/python benchmarks/validate_theory.py
	$(BIN)/python benchmarks/batch_sweep.py
	$(BIN)/python benchmarks/serving.py

clean:
	rm -rf runs .pytest_cache benchmarks/out
