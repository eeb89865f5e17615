# The verbs a newcomer types. Everything installs into .venv (CPU torch, SGLang without its CUDA tree).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.sglang-mx-setup
SETUP_INPUTS := pyproject.toml sgl-kernel-rocm/pyproject.toml lab/pyproject.toml requirements/cpu-constraints.txt \
	requirements/dev.txt scripts/setup.sh
HOST ?= 127.0.0.1
PORT ?= 30000
PYTEST_ARGS ?=
# pytest-xdist workers for `make test`; test/conftest.py's scheduler hands them work units (the
# tests on each kind of session server together, a module that starts servers whole, kernel tests
# one by one), server work first. 0 runs the suite in this process.
TEST_WORKERS ?= 2
FUZZ_MINUTES ?= 30

.PHONY: setup serve test compile-check fuzz bench model model-glm5 lint wheels clean

setup: $(STAMP)

$(STAMP): $(SETUP_INPUTS)
	bash scripts/setup.sh $(VENV) $(PY)
	touch $(STAMP)

serve: setup
	$(BIN)/sglang-mx serve --host $(HOST) --port $(PORT)

test: setup
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(PYTEST_ARGS)

# Compile every Triton kernel for gfx950, gfx942, sm90 and sm100 (no GPU needed), apply the gate,
# and regenerate docs/kernels-compile.md. TRITON=3.6.0 runs the same matrix under that Triton
# (installed with --no-deps beside the venv in .triton/<version>; what GPU images ship).
TRITON ?=
compile-check: setup
ifeq ($(TRITON),)
	$(BIN)/python -m sgl_kernel_rocm.compile_check --quiet --doc docs/kernels-compile.md
else
	[ -d .triton/$(TRITON)/triton ] || $(BIN)/python -m pip install -q --disable-pip-version-check \
		--no-deps --target .triton/$(TRITON) triton==$(TRITON)
	PYTHONPATH=.triton/$(TRITON) $(BIN)/python -m sgl_kernel_rocm.compile_check --quiet \
		--doc docs/kernels-compile.md
endif

# Long hostile-request campaign (random seed) against a supervised server on each bundled model
# (the default GLM-5 one, then GLM-4.5; FUZZ_MINUTES split evenly); new crashers are saved as
# regression cases under test/sglang_mx/guards/fuzz_regressions/ (replayed by `make test` on both).
fuzz: setup
	$(BIN)/python scripts/fuzz.py --minutes $(FUZZ_MINUTES)

bench: setup
	$(BIN)/python benchmark/serve_cpu.py
	$(BIN)/python benchmark/kernels/bench_moe.py --quick
	$(BIN)/python benchmark/kernels/bench_decode_attention.py --quick

# Re-train the bundled tiny model (~30 min on 2 cores) and re-quantize it; not needed to serve.
ASSETS := python/sglang_mx/assets
model: setup
	$(BIN)/python scripts/train_tiny_model.py --out $(ASSETS)/tiny-glm-moe-bf16 --minutes 30
	rm -rf $(ASSETS)/tiny-glm-moe-mxfp4  # re-quantized from the new bf16 on first use
	$(BIN)/python scripts/eval_tiny_model.py

# Re-train the bundled tiny GLM-5-architecture model (MLA + DSA, ~25 min on 2 cores), distill its
# MTP layer on the model's own greedy continuations (~55 min), write the Quark-layout default.
model-glm5: setup
	nice $(BIN)/python scripts/train_tiny_glm5.py --out $(ASSETS)/tiny-glm5-bf16 --minutes 25
	nice $(BIN)/python scripts/distill_tiny_glm5_mtp.py --out build/mtp --minutes 40 \
		--sequences 3072 --held-out 96 --prompt 32 --new 96 --steps 4
	$(BIN)/python scripts/build_tiny_glm5_quark.py --mtp build/mtp --out $(ASSETS)/tiny-glm5-quark
	$(BIN)/python scripts/eval_tiny_glm5.py

lint: setup
	$(BIN)/ruff check python sgl-kernel-rocm benchmark scripts test lab

# Both wheels into dist/, to add to an SGLang GPU image (docs/install.md).
wheels: setup
	rm -rf build sgl-kernel-rocm/build  # setuptools would reuse stale build/lib contents
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w dist ./sgl-kernel-rocm .

clean:
	rm -rf $(VENV)
