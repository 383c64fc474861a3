# `make test` builds .venv (torch pinned by constraints.txt: the CPU wheel where the index serves it; see README) and runs the suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install test test-compat test-fast lint time-test bench main demo clean

$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt requirements-test.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch
	$(BIN)/pip install -q -c constraints.txt -r requirements-test.txt -e .
	touch $@

install: $(VENV)/.installed

# the suite runs on TEST_WORKERS processes (pytest-xdist), the slowest tests first (tests/conftest.py)
TEST_WORKERS ?= 2

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal tests

# the oldest releases setup.cfg accepts, beside spacy-transformers 1.4.0 (transformers 4.53.2, huggingface_hub 0.x):
# .venv-compat pinned by constraints-compat.txt, the faces' tests (the model and its HF face, spaCy, formats, the
# command line, the shipped spaCy configs); then transformers' own lower bound, TRANSFORMERS_FLOOR, under the HF
# face's tests and the first hour's (Auto classes, pipeline()). Of requirements-test.txt, only the test runner (no
# lint or release tools). `.ci/run` runs it after `make test`
COMPAT_VENV := .venv-compat
COMPAT_BIN := $(COMPAT_VENV)/bin
TRANSFORMERS_FLOOR := 4.46.1
COMPAT_TESTS := tests/hf tests/spacy tests/formats tests/cli tests/tools/test_spacy_tools.py
FLOOR_TESTS := tests/hf tests/cli/test_first_hour.py

$(COMPAT_VENV)/.installed: setup.cfg pyproject.toml constraints-compat.txt
	test -x $(COMPAT_BIN)/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_BIN)/pip install -q --upgrade pip
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt torch
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt -e ".[package]" spacy-transformers "pytest>=8" "pytest-xdist>=3.5"
	grep -v '^transformers==' constraints-compat.txt > $(COMPAT_VENV)/constraints-floor.txt
	touch $@

test-compat: $(COMPAT_VENV)/.installed
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt transformers  # (back from the floor, if a run stopped there)
	$(COMPAT_BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(COMPAT_TESTS)
	$(COMPAT_BIN)/pip install -q -c $(COMPAT_VENV)/constraints-floor.txt transformers==$(TRANSFORMERS_FLOOR)
	$(COMPAT_BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal $(FLOOR_TESTS)
	$(COMPAT_BIN)/pip install -q -c constraints-compat.txt transformers

# for a change to the package alone: its test folders (tests/ mirrors spacy_elmo/; tests/lab is the lab's,
# tests/project the project's workflows, docs, layout and release) without the tests marked `slow` (end-to-end and multi-process runs); `make test` runs everything
FAST_TESTS := tests/hf tests/spacy tests/formats tests/kernels tests/training tests/tools tests/cli

test-fast: install
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist worksteal -m "not slow" $(FAST_TESTS)

# ruff (lint and format, over the whole repository's Python) and mypy (the library, spacy_elmo/), as configured
# in pyproject.toml; .ci/run runs it after `make test`
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# `make test` in a fresh clone of HEAD, timed: writes bench/results/make_test.txt (the duration the README cites)
time-test: install
	$(BIN)/python -m lab.time_make_test

# inference speed: appends a run to bench/results/runs.jsonl and writes bench/results/inference.md from it
bench: install
	$(BIN)/python -m lab.bench

clean:
	rm -rf $(VENV) $(COMPAT_VENV) build *.egg-info

# `make main` states its own wall time: its start (UTC), taken when make reads this file, before it builds .venv,
# goes to the report, which gives the time from it to the report's end. Its test scorings repeat the published
# `all` run's recipe when nothing changed, which lab/evaluate_runs.py scores only with a reason (test_looks.json keeps it)
MAIN_STARTED := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)

main: install
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m weasel run all . --vars.make_main_started $(MAIN_STARTED) \
		--vars.test_look_reason "make main, a reproduction of the all workflow"

# the converted model goes to models/ (as in the README and docs/), which `make clean` leaves alone
demo: install
	$(BIN)/spacy-elmo convert tests/fixtures/allennlp_elmo/options.json tests/fixtures/allennlp_elmo/lm_weights.hdf5 models/fixture_elmo --overwrite
	echo "The cat sat on the mat ." | $(BIN)/spacy-elmo embed models/fixture_elmo
