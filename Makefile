# The verbs a newcomer types. Everything installs into .venv (CPU torch, SGLang without its CUDA tree).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.sglang-mx-setup
SETUP_INPUTS := pyproject.toml sgl-kernel-rocm/pyproject.toml requirements/cpu-constraints.txt \
	requirements/dev.txt scripts/setup.sh
HOST ?= 127.0.0.1
PORT ?= 30000
PYTEST_ARGS ?=

.PHONY: setup serve test bench lint clean

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	bash scripts/setup.sh $(VENV) $(PY)
	touch $(STAMP)

serve: setup
	$(BIN)/sglang-mx serve --host $(HOST) --port $(PORT)

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: setup
	$(BIN)/python benchmark/kernels/bench_moe.py --quick
	$(BIN)/python benchmark/kernels/bench_decode_attention.py --quick

lint: setup
	$(BIN)/ruff check python sgl-kernel-rocm benchmark scripts test

clean:
	rm -rf $(VENV)
