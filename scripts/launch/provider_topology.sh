#!/usr/bin/env bash
# provider -> SGLang Model Gateway (smg, cache_aware) -> N SGLang workers, all on one host.
# Usage: scripts/launch/provider_topology.sh MODEL_PATH PRICING_JSON [N_WORKERS] [EXTRA SGLANG ARGS...]
# Env: BASE_PORT (30000), ROUTER_PORT (29000), ROUTER_METRICS_PORT (ROUTER_PORT + 1),
#      PROVIDER_PORT (8080), DB (provider.sqlite; `postgres`: a throwaway local PostgreSQL;
#      or a postgresql:// URL), PROVIDERS (1; N > 1: N replicas on the DB's PostgreSQL behind
#      HAProxy on PROVIDER_PORT), PG_DIR, POLICY (cache_aware), HOST (127.0.0.1),
#      ROUTER_ARGS (more smg flags; those whose job the provider or the workers own are refused,
#      docs/scale-out.md "Layers"). Ctrl-C stops everything it started.
set -euo pipefail
MODEL=${1:?model path}; PRICING=${2:?pricing json}; N=${3:-2}; shift $(( $# < 3 ? $# : 3 ))
BASE_PORT=${BASE_PORT:-30000}; ROUTER_PORT=${ROUTER_PORT:-29000}; PROVIDER_PORT=${PROVIDER_PORT:-8080}
DB=${DB:-provider.sqlite}; POLICY=${POLICY:-cache_aware}; HOST=${HOST:-127.0.0.1}
PY=${PYTHON:-python}
source "$(dirname "$0")/provider_front.sh"
read -r -a extra_router_args <<< "${ROUTER_ARGS:-}"
# Before anything starts: an smg flag whose job the provider or the workers own is refused.
$PY -m sglang_mx.provider.launch check-router-args "${extra_router_args[@]}"
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

# The suite's gateway flags (sglang_mx/provider/launch.py router_flags: health every 2 s so a
# dead worker is dropped in seconds, retries that outlast that detection, 300 s per request).
read -r -a router_flags <<< "$($PY -m sglang_mx.provider.launch router-flags)"
# --prometheus-port: smg's metrics listener, 29000 by default, is ROUTER_PORT's default here.
$PY -m smg launch --host "$HOST" --port "$ROUTER_PORT" --policy "$POLICY" "${router_flags[@]}" \
  --prometheus-host "$HOST" --prometheus-port "${ROUTER_METRICS_PORT:-$((ROUTER_PORT + 1))}" \
  "${extra_router_args[@]}" --worker-urls "${urls[@]}" > router.log 2>&1 &
pids+=($!)
router_ready "$POLICY"
start_provider
wait
