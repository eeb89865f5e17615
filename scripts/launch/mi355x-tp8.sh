#!/usr/bin/env bash
# One TP8 engine with EAGLE 5/1/6 on 8x MI355X: the low-latency layout (flags: `sglang-mx recipe
# mi355x-tp8`). Ran on the CPU box scaled to TP2 (test_layouts.py); HiCache is the flag set's
# only part the CPU run drops (SGLang's HiCache is CUDA-only). Never run on an MI355X here.
set -euo pipefail
source "$(dirname "$0")/common.sh"
recipe_args mi355x-tp8
exec sglang-mx serve --model-path "$MODEL" --host "$HOST" --port "${PORT:-30000}" "${RECIPE_ARGS[@]}"
