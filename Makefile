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
PINNED ?= binder/requirements.txt
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

# On Binder and in the Docker image the environment already holds everything (binder/requirements.txt,
# the package installed by binder/postBuild) and says so with GOODPUTLAB_ENV=system (binder/start, the
# Dockerfile): the targets use that Python and its tools and build no .venv.
ifeq ($(GOODPUTLAB_ENV),system)
  BIN := $(patsubst %/,%,$(dir $(shell command -v python3)))
endif

BOOK_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-book
WORKSHOP_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-workshop
TEST_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-test
SITE_STAMP := $(VENV)/.installed-$(TORCH_BUILD)-site
comma_book_workshop := book,workshop
comma_book_test := book,test,workshop,ft
comma_book_site := book,site
# the workshop dashboard: Voila serves it as a web app (code hidden); DASHBOARD_ARGS adds Voila flags
# (--no-browser --port=8866 --Voila.ip=0.0.0.0 on a cloud machine); RECORDED=1 starts with recorded runs
DASHBOARD ?= labs/dashboard.ipynb
DASHBOARD_ARGS ?=
RECORDED ?=
# make figures: every chapter's charts as SVG and PNG; FULL=1 runs the chapters at full size (slower)
FIGURES ?= figures
FULL ?=
# the website: Sphinx reads the repository root with book/conf.py, so book/ and labs/ keep their paths
SITE_DIR ?= book/_build/html
SPHINXOPTS ?= -q -W --keep-going
PORT ?= 8000
# JupyterLab settings for the book (no news feed: it needs the network and covers the notebook)
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: lab test install test-fast notebooks bench book book-serve clean help dashboard figures

help:
	@echo "make lab        - set up .venv (book only) and open chapter 1 in JupyterLab (about 1 min the first time)"
	@echo "                  CHAPTER=labs/01_where_did_the_time_go.ipynb opens another notebook"
	@echo "make dashboard  - serve the workshop dashboard (labs/dashboard.ipynb) with Voila; RECORDED=1: recorded runs"
	@echo "make figures    - every chapter's charts as SVG and PNG in figures/ (small runs, about 5 min; FULL=1: full-size runs for slides, about 25 min)"
	@echo "make test       - set up .venv (book and test tools) and run the whole suite (on 2 cores: about 18 min quiet, 23-25 beside two busy loops)"
	@echo "make test-fast  - the package's tests without the notebooks (about 8 min on 2 quiet cores)"
	@echo "make notebooks  - execute every chapter and lab at full size, in place (NB=path for one)"
	@echo "make book       - build the book and the labs as a static website in $(SITE_DIR) (offline, about 10 s)"
	@echo "make book-serve - build it and serve it on http://127.0.0.1:$(PORT)/ (PORT=...)"
	@echo "make bench      - run the benchmarks (figures go in benchmarks/RESULTS.md)"
	@echo "make clean      - remove run outputs (runs/, pytest caches)"
	@echo "torch build here: $(TORCH_BUILD) (override with TORCH=cpu|cuda)"

ifneq ($(GOODPUTLAB_ENV),system)
$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "goodputlab needs Python >= 3.11, found " + sys.version.split()[0]'
	$(PYTHON) -m venv $(VENV)

# $(call pip_install,EXTRAS): install the package (editable) with the right torch build and EXTRAS,
# at the versions in PINNED (binder/requirements.txt: what Binder installs, minus torch, which
# TORCH and constraints/ decide). `make install PINNED=` takes the newest releases instead
# (then `tools/binder_requirements.py` writes them into binder/requirements.txt).
define pip_install
	$(BIN)/python -m pip install --quiet --upgrade pip
	@set -e; \
	pinned=""; \
	if [ -n "$(PINNED)" ]; then \
	  grep -v -e '^-' -e '^torch==' "$(PINNED)" > $(VENV)/pinned-constraints.txt; \
	  pinned="-c $(VENV)/pinned-constraints.txt"; \
	fi; \
	if [ "$(TORCH_BUILD)" = cpu ]; then \
	  extra="-c constraints/cpu.txt"; \
	  if $(BIN)/python -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$(TORCH_CPU_INDEX)/torch/" >/dev/null 2>&1; then \
	    extra="$$extra --extra-index-url $(TORCH_CPU_INDEX)"; \
	  fi; \
	else extra=""; fi; \
	echo "installing goodputlab[$(1)] with a $(TORCH_BUILD) torch build"; \
	$(BIN)/python -m pip install --quiet $$extra $$pinned -c constraints/import_speed.txt -e '.[$(1)]'
	@find $(VENV) -maxdepth 1 -name '.installed-*' ! -name '.installed-$(TORCH_BUILD)-*' -delete
	@mkdir -p $(dir $(LAB_SETTINGS)) && cp binder/overrides.json $(LAB_SETTINGS)
endef

$(BOOK_STAMP): pyproject.toml constraints/cpu.txt constraints/import_speed.txt binder/overrides.json $(PINNED) | $(BIN)/python
	$(call pip_install,book)
	@touch $@

$(WORKSHOP_STAMP): pyproject.toml constraints/cpu.txt constraints/import_speed.txt binder/overrides.json $(PINNED) | $(BIN)/python
	$(call pip_install,$(comma_book_workshop))
	@touch $@ $(BOOK_STAMP)

# the test tools include the book's, the workshop's and the website's dependencies, so a test install serves all three;
# and torchft (the `ft` extra: the in-job recovery runs), which `make lab` leaves out
$(TEST_STAMP): pyproject.toml constraints/cpu.txt constraints/import_speed.txt binder/overrides.json $(PINNED) | $(BIN)/python
	$(call pip_install,$(comma_book_test))
	@touch $@ $(BOOK_STAMP) $(WORKSHOP_STAMP) $(SITE_STAMP)

# the website's tools (Sphinx, MyST-NB, the book theme, MathJax served locally); the test tools include them
$(SITE_STAMP): pyproject.toml constraints/cpu.txt constraints/import_speed.txt binder/overrides.json $(PINNED) | $(BIN)/python
	$(call pip_install,$(comma_book_site))
	@touch $@ $(BOOK_STAMP)
else
# nothing to install: binder/requirements.txt and binder/postBuild did it
$(BOOK_STAMP) $(WORKSHOP_STAMP) $(TEST_STAMP) $(SITE_STAMP):
	@true
endif

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

# Everything, in jobs that three workers take side by side, the longest first (tools/run_tests.py
# says why and prints each job's wall and CPU time): the notebooks under papermill, then nbval on
# the chapters (on the outputs of those executions: tools/nbval_shared.py); the tests that measure
# real runs (marked `measures` in tests/conftest.py); the rest (pure units, charts, docs, lab checks,
# layout, bad input); the browser tests (the chapters read in JupyterLab; the labs, the dashboard,
# also in Voila, and the website).
# Every job runs even when one fails; the target fails if any did.
test: $(TEST_STAMP)
	$(BIN)/python tools/run_tests.py -- $(PYTEST_ARGS)

# The package's tests alone, without notebooks.
test-fast: $(TEST_STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest tests -m "not notebooks" $(PYTEST_ARGS)

# Every chapter and lab executed at full size (not SMOKE), in place: the outputs readers see, with
# static figures, the test plumbing hidden and a caption naming the run and the machine
# (tools/execute_notebooks.py). NB=book/02_failures_at_scale.ipynb regenerates one.
NB ?= $(sort $(wildcard book/[0-9]*.ipynb)) $(sort $(wildcard labs/[0-9]*.ipynb)) labs/dashboard.ipynb $(sort $(wildcard labs/solutions/[0-9]*.ipynb))
notebooks: $(TEST_STAMP)
	env -u GOODPUTLAB_SMOKE $(BIN)/python tools/execute_notebooks.py --full $(NB)

# Every benchmark in turn (about 50 minutes on 2 cores); record what they print in benchmarks/RESULTS.md.
bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/ledger_overhead.py
	$(BIN)/python benchmarks/recorder_overhead.py
	$(BIN)/python benchmarks/sigkill_tear.py
	$(BIN)/python benchmarks/unpickler_cost.py
	$(BIN)/python benchmarks/simulate_speed.py
	$(BIN)/python benchmarks/checkpoint_stall.py
	$(BIN)/python benchmarks/pipeline.py
	$(BIN)/python benchmarks/validate_theory.py
	$(BIN)/python benchmarks/batch_sweep.py
	$(BIN)/python benchmarks/serving.py
	$(BIN)/python benchmarks/recovery.py --medium
	$(BIN)/python benchmarks/torture.py --kills 100

# The website of the book and the labs, from the committed outputs (nothing is executed).
book: $(SITE_STAMP)
	$(BIN)/sphinx-build -b html $(SPHINXOPTS) -c book . $(SITE_DIR)
	@echo "the site is in $(SITE_DIR)/index.html (make book-serve serves it)"

book-serve: book
	@echo "serving the book on http://127.0.0.1:$(PORT)/ (Ctrl-C stops)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory $(SITE_DIR) $(PORT)

clean:
	rm -rf runs .pytest_cache benchmarks/out book/_build
