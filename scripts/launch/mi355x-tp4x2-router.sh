#!/usr/bin/env bash
# Two TP4/EP4 engines with EAGLE 5/1/6 (GPUs 0-3 and 4-7) behind smg (SGLang Model Gateway) with
# cache-aware routing, so a shared prefix keeps landing on the replica that holds it (flags:
# `sglang-mx recipe mi355x-tp4x2-router`). One engine's flag set ran on the CPU box scaled to TP2/EP2
# (test_layouts.py), HiCache dropped; the router in front of CPU replicas is
# provider_topology.sh. Never run on an MI355X here.
set -euo pipefail
source "$(dirname "$0")/common.sh"
recipe_args mi355x-tp4x2-router
mapfile -t ROUTER_ARGS < <(sglang-mx recipe mi355x-tp4x2-router --field router)
PORT="${PORT:-30000}"
pids=()
for i in 0 1; do
  HIP_VISIBLE_DEVICES="$((4 * i)),$((4 * i + 1)),$((4 * i + 2)),$((4 * i + 3))" \
    sglang-mx serve --model-path "$MODEL" --host 127.0.0.1 --port "$((PORT + 1 + i))" \
    "${RECIPE_ARGS[@]}" &
  pids+=("$!")
done
trap 'kill "${pids[@]}"' EXIT
smg launch --host "$HOST" --port "$PORT" "${ROUTER_ARGS[@]}" \
  --worker-urls "http://127.0.0.1:$((PORT + 1))" "http://127.0.0.1:$((PORT + 2))"
