#!/usr/bin/env bash
# TP8 with DP attention (8 attention replicas), EP8, dense MLPs unsplit, vocab-parallel LM head,
# MTP 1/1/2: the layout docs/roofline.md finds best for 20k/1k/60% (flags: `sglang-mx recipe
# mi355x-tp8-dpattn`). Ran on the CPU box scaled to TP2/DP2/EP2 (test_layouts.py), HiCache
# dropped (CUDA-only in SGLang). Never run on an MI355X here.
set -euo pipefail
source "$(dirname "$0")/common.sh"
recipe_args mi355x-tp8-dpattn
exec sglang-mx serve --model-path "$MODEL" --host "$HOST" --port "${PORT:-30000}" "${RECIPE_ARGS[@]}"
