#!/usr/bin/env bash
# Two TP4 engines (GPUs 0-3 and 4-7) behind sglang-router with cache-aware routing, so a
# shared prefix keeps landing on the replica that holds it. NOT RUN HERE.
set -euo pipefail
source "$(dirname "$0")/common.sh"
PORT="${PORT:-30000}"
pids=()
for i in 0 1; do
  HIP_VISIBLE_DEVICES="$((4 * i)),$((4 * i + 1)),$((4 * i + 2)),$((4 * i + 3))" \
    sglang-mx serve --host 127.0.0.1 --port "$((PORT + 1 + i))" "${COMMON_ARGS[@]}" \
    --tp-size 4 --max-running-requests 160 &
  pids+=("$!")
done
trap 'kill "${pids[@]}"' EXIT
python -m sglang_router.launch_router --host "$HOST" --port "$PORT" --policy cache_aware \
  --worker-urls "http://127.0.0.1:$((PORT + 1))" "http://127.0.0.1:$((PORT + 2))"
