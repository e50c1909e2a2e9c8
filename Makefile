# memoryhub — `make run` serves on the embedded database; `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test install lint bench clean help

help:
	@echo "make run    serve memoryhub on http://127.0.0.1:$${PORT:-8000} (embedded PostgreSQL, no settings)"
	@echo "make test   run the whole test suite"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 12))' || { echo "memoryhub needs Python >= 3.12 (pyenv install 3.12)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(PY) manage.py serve

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	@echo "see bench/README.md"

clean:
	rm -rf $(VENV) staticfiles .pytest_cache
