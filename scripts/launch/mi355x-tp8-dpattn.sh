#!/usr/bin/env bash
# TP8 engine with DP attention (8 attention replicas, each holding its own requests' MLA KV)
# and experts split 8 ways: the layout docs/roofline.md finds best for 20k/1k/60%. NOT RUN HERE.
set -euo pipefail
source "$(dirname "$0")/common.sh"
exec sglang-mx serve --host "$HOST" --port "${PORT:-30000}" "${COMMON_ARGS[@]}" \
  --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8 --max-running-requests 1024
