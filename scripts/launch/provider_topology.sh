#!/usr/bin/env bash
# provider -> sglang-router (cache_aware) -> N SGLang workers, all on one host.
# Usage: scripts/launch/provider_topology.sh MODEL_PATH PRICING_JSON [N_WORKERS] [EXTRA SGLANG ARGS...]
# Env: BASE_PORT (30000), ROUTER_PORT (29000), PROVIDER_PORT (8080), DB (provider.sqlite),
#      POLICY (cache_aware), HOST (127.0.0.1). Ctrl-C stops everything it started.
set -euo pipefail
MODEL=${1:?model path}; PRICING=${2:?pricing json}; N=${3:-2}; shift $(( $# < 3 ? $# : 3 ))
BASE_PORT=${BASE_PORT:-30000}; ROUTER_PORT=${ROUTER_PORT:-29000}; PROVIDER_PORT=${PROVIDER_PORT:-8080}
DB=${DB:-provider.sqlite}; POLICY=${POLICY:-cache_aware}; HOST=${HOST:-127.0.0.1}
PY=${PYTHON:-python}
source "$(dirname "$0")/provider_front.sh"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM

urls=()
for i in $(seq 0 $((N - 1))); do
  port=$((BASE_PORT + i))
  # `serve` adds --enable-cache-report (usage carries cached_tokens, billed at cache-read
  # price); --restart on-failure brings a worker back when its process tree exits (crash,
  # OOM kill) while the router serves from the others; each restart is logged with its cause.
  $PY -m sglang_mx.cli.main serve --restart on-failure --model-path "$MODEL" --host "$HOST" \
    --port "$port" "$@" > "worker-$i.log" 2>&1 &
  pids+=($!); urls+=("http://$HOST:$port")
done
for u in "${urls[@]}"; do
  until curl -sf "$u/health" > /dev/null; do sleep 2; done
  echo "worker $u ready"
done

# The suite's router flags (health every 2 s, so a dead worker is dropped in seconds).
read -r -a router_flags <<< "$($PY -m sglang_mx.provider.launch router-flags)"
$PY -m sglang_router.launch_router --host "$HOST" --port "$ROUTER_PORT" --policy "$POLICY" \
  "${router_flags[@]}" --worker-urls "${urls[@]}" > router.log 2>&1 &
pids+=($!)
router_ready "$POLICY"
start_provider
wait
