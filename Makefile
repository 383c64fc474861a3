# `make test` builds .venv (torch pinned by constraints.txt: the CPU wheel where the index serves it; see README) and runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test test-compat test-newest test-fast lint time-test bench main demo clean

$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt requirements-test.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch
	$(BIN)/pip install -q -c constraints.txt -r requirements-test.txt -e .
	touch $@

install: $(VENV)/.installed

# the suite runs on TEST_WORKERS processes (pytest-xdist), the slowest tests first (tests/conftest.py)
TEST_WORKERS ?= 2
# the package's test folders (tests/ mirrors spacy_elmo/; tests/lab is the lab's, tests/project the project's
# workflows, docs, layout and release): what the compat and newest legs run, and `make test-fast` without `slow`
PACKAGE_TESTS := tests/hf tests/spacy tests/formats tests/kernels tests/training tests/tools tests/cli

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal tests

# The compat leg: a spacy-transformers user's environment at the other end of every range setup.cfg declares.
# .venv-compat is made fresh on COMPAT_PYTHON (pyenv's 3.10, the oldest Python accepted) in three steps:
#   1. the user's environment: torch, transformers and spacy-transformers 1.4.0 (constraints-compat.txt: torch at
#      its floor, transformers 4.53.2, the newest spacy-transformers takes), pip freeze → freeze-before.txt;
#   2. spacy-elmo as the README installs it (`pip install ".[package]"`, no constraints), pip freeze →
#      freeze-after.txt (tests/spacy/test_spacy_transformers.py: nothing of step 1 lost or changed);
#   3. every other declared floor (what step 2 added at the newest releases) and what the tests use besides
#      (TEST_TOOLS: the runner, the `plot` extra, the build backend of the tests that build the wheel in place).
# Then the package's tests (PACKAGE_TESTS: the faces, formats, kernels with the private torch ops at the floor,
# training, the tools and the command line); then transformers' own lower bound, TRANSFORMERS_FLOOR, under the HF
# face's tests and the first hour's (Auto classes, pipeline()). `.ci/run` runs it after `make test`
COMPAT_PYTHON ?= $(HOME)/.pyenv/versions/3.10.13/bin/python
COMPAT_VENV := .venv-compat
COMPAT_BIN := $(COMPAT_VENV)/bin
TRANSFORMERS_FLOOR := 4.46.1
FLOOR_TESTS := tests/hf tests/cli/test_first_hour.py
TEST_TOOLS := "pytest>=8" "pytest-xdist>=3.5" "matplotlib>=3.5" "setuptools>=77"
# each name constraints-compat.txt pins
COMPAT_PINS = $(shell sed -n 's/^\([A-Za-z0-9_.-]*\)==.*/\1/p' constraints-compat.txt)

# a clear line, not make's "No such file", where a leg's Python is not there
need-python = @test -x "$(1)" || { echo "make: $(2)=$(1) is not an executable Python; pass the path of a Python $(3): make $(4) $(2)=/path/to/python$(3)" >&2; exit 1; }

$(COMPAT_VENV)/.installed: setup.cfg pyproject.toml constraints-compat.txt
	$(call need-python,$(COMPAT_PYTHON),COMPAT_PYTHON,3.10,test-compat)
	rm -rf $(COMPAT_VENV)
	$(COMPAT_PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_BIN)/pip install -q --upgrade pip
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt torch transformers spacy-transformers
	$(COMPAT_BIN)/pip freeze --all > $(COMPAT_VENV)/freeze-before.txt
	$(COMPAT_BIN)/pip install -q ".[package]"
	$(COMPAT_BIN)/pip freeze --all > $(COMPAT_VENV)/freeze-after.txt
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt $(COMPAT_PINS) $(TEST_TOOLS)
	$(COMPAT_BIN)/pip check
	grep -v '^transformers==' constraints-compat.txt > $(COMPAT_VENV)/constraints-floor.txt
	touch $@

# (the installed copy refreshed from the checkout first, without its dependencies: the commands the tests run
# import it)
test-compat: $(COMPAT_VENV)/.installed
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt transformers  # (back from the floor, if a run stopped there)
	$(COMPAT_BIN)/pip install -q --no-deps --force-reinstall .
	$(COMPAT_BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(PACKAGE_TESTS)
	$(COMPAT_BIN)/pip install -q -c $(COMPAT_VENV)/constraints-floor.txt transformers==$(TRANSFORMERS_FLOOR)
	$(COMPAT_BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(FLOOR_TESTS)
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt transformers

# The newest end: NEWEST_PYTHON (pyenv's 3.13, the newest CPython accepted) with the newest torch and transformers
# pip resolves (no constraints), the package's tests; `python -m lab.benchmarks.environments` runs it once and
# records versions, counts, time and machine in bench/results/environments.md
NEWEST_PYTHON ?= $(HOME)/.pyenv/versions/3.13.0/bin/python
NEWEST_VENV := .venv-newest
NEWEST_BIN := $(NEWEST_VENV)/bin

$(NEWEST_VENV)/.installed: setup.cfg pyproject.toml
	$(call need-python,$(NEWEST_PYTHON),NEWEST_PYTHON,3.13,test-newest)
	rm -rf $(NEWEST_VENV)
	$(NEWEST_PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_BIN)/pip install -q --upgrade pip
	$(NEWEST_BIN)/pip install -q --upgrade torch
	$(NEWEST_BIN)/pip install -q ".[package]" $(TEST_TOOLS)
	$(NEWEST_BIN)/pip check
	touch $@

test-newest: $(NEWEST_VENV)/.installed
	$(NEWEST_BIN)/pip install -q --no-deps --force-reinstall .
	$(NEWEST_BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(PACKAGE_TESTS)

# for a change to the package alone: its test folders without the tests marked `slow` (end-to-end and
# multi-process runs); `make test` runs everything

test-fast: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal -m "not slow" $(PACKAGE_TESTS)

# ruff (lint and format, over the whole repository's Python) and mypy (the library, spacy_elmo/), as configured
# in pyproject.toml; .ci/run runs it after `make test`
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# `make test` in a fresh clone of HEAD, timed: writes bench/results/make_test.txt (the duration the README cites)
time-test: install
	$(BIN)/python -m lab.benchmarks.time_make_test

# inference speed: appends a run to bench/results/runs.jsonl and writes bench/results/inference.md from it
bench: install
	$(BIN)/python -m lab.benchmarks.bench

clean:
	rm -rf $(VENV) $(COMPAT_VENV) $(NEWEST_VENV) build *.egg-info

# `make main` states its own wall time: its start (UTC), taken when make reads this file, before it builds .venv,
# goes to the report, which gives the time from it to the report's end. Its test scorings repeat the published
# `all` run's recipe when nothing changed, which lab/experiments/evaluate_runs.py scores only with a reason (test_looks.json keeps it)
MAIN_STARTED := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)

main: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m weasel run all . --vars.make_main_started $(MAIN_STARTED) \
		--vars.test_look_reason "make main, a reproduction of the all workflow"

# the converted model goes to models/ (as in the README and docs/), which `make clean` leaves alone
demo: install
	$(BIN)/spacy-elmo convert tests/fixtures/allennlp_elmo/options.json tests/fixtures/allennlp_elmo/lm_weights.hdf5 models/fixture_elmo --overwrite
	echo "The cat sat on the mat ." | $(BIN)/spacy-elmo embed models/fixture_elmo
