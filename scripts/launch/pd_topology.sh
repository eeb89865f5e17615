#!/usr/bin/env bash
# provider -> SGLang Model Gateway (smg, PD mode) -> 1 prefill + 1 decode SGLang server, all on
# one host, KV moved by Mooncake's transfer engine over TCP (docs/scale-out.md).
# Usage: scripts/launch/pd_topology.sh MODEL_PATH PRICING_JSON [EXTRA SGLANG ARGS...]
# Env: PREFILL_PORT (30000), DECODE_PORT (30001), BOOTSTRAP_PORT (8998: the prefill's KV bootstrap
#      server), ROUTER_PORT (29000), ROUTER_METRICS_PORT (ROUTER_PORT + 1), PROVIDER_PORT (8080),
#      DB (provider.sqlite), HOST (127.0.0.1).
# Needs the transfer engine `make setup` installs (with libibverbs1/librdmacm1). Each side asks
# for half of this box's cores (SGLANG_CPU_OMP_THREADS_BIND; SGLang 0.5.23 binds by it only on
# CPUs with AMX or on arm64), as if on its own node; the suite runs
# the same topology (test/sglang_mx/provider/test_pd_topology.py).
# On GPU nodes: drop MC_FORCE_TCP/MOONCAKE_PROTOCOL (RDMA), add --disaggregation-ib-device.
# Ctrl-C stops everything it started.
set -euo pipefail
MODEL=${1:?model path}; PRICING=${2:?pricing json}; shift 2
PREFILL_PORT=${PREFILL_PORT:-30000}; DECODE_PORT=${DECODE_PORT:-30001}
BOOTSTRAP_PORT=${BOOTSTRAP_PORT:-8998}; ROUTER_PORT=${ROUTER_PORT:-29000}
PROVIDER_PORT=${PROVIDER_PORT:-8080}; DB=${DB:-provider.sqlite}; HOST=${HOST:-127.0.0.1}
PY=${PYTHON:-python}
source "$(dirname "$0")/provider_front.sh"
$PY -c 'import mooncake.engine' 2>/dev/null \
  || { echo "no Mooncake transfer engine: run make setup (SGLANG_MX_PD=1 to insist)" >&2; exit 2; }
# TCP on loopback: SGLang's wrapper reads MOONCAKE_PROTOCOL, the engine MC_FORCE_TCP.
export MOONCAKE_PROTOCOL=tcp MC_FORCE_TCP=1
# A request the router sent to a side that then died is dropped after 15 s, not SGLang's 300 s
# default (the client would see only keep-alives until then; docs/scale-out.md "Faults").
export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=${SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT:-15}
export SGLANG_DISAGGREGATION_WAITING_TIMEOUT=${SGLANG_DISAGGREGATION_WAITING_TIMEOUT:-15}
PD=(--disaggregation-transfer-backend mooncake)
# "a" or "a-b": cores [lo, hi]
span() { if [ "$1" = "$2" ]; then echo "$1"; else echo "$1-$2"; fi; }
N=$(nproc)
if [ "$N" -ge 2 ]; then
  PREFILL_CORES=${PREFILL_CORES:-$(span 0 $((N / 2 - 1)))}
  DECODE_CORES=${DECODE_CORES:-$(span $((N / 2)) $((N - 1)))}
fi
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM

SGLANG_CPU_OMP_THREADS_BIND=${PREFILL_CORES:-} \
$PY -m sglang_mx.cli.main serve --model-path "$MODEL" --host "$HOST" --port "$PREFILL_PORT" \
  "${PD[@]}" --disaggregation-mode prefill --disaggregation-bootstrap-port "$BOOTSTRAP_PORT" \
  "$@" > prefill.log 2>&1 &
pids+=($!)
SGLANG_CPU_OMP_THREADS_BIND=${DECODE_CORES:-} \
$PY -m sglang_mx.cli.main serve --model-path "$MODEL" --host "$HOST" --port "$DECODE_PORT" \
  "${PD[@]}" --disaggregation-mode decode "$@" > decode.log 2>&1 &
pids+=($!)
for port in "$PREFILL_PORT" "$DECODE_PORT"; do
  # /health_generate: a 1-token request through the side's own scheduler (a fake KV peer)
  until curl -sf "http://$HOST:$port/health_generate" > /dev/null; do sleep 2; done
  echo "http://$HOST:$port ready"
done

# The suite's gateway flags (sglang_mx/provider/launch.py router_flags: health every 2 s, retries
# that outlast a dead side's detection, 300 s per request); its metrics listener off 29000, the
# default ROUTER_PORT. smg's PD mode takes prompts as text on its OpenAI routes, not token ids.
read -r -a router_flags <<< "$($PY -m sglang_mx.provider.launch router-flags)"
$PY -m smg launch --host "$HOST" --port "$ROUTER_PORT" --pd-disaggregation "${router_flags[@]}" \
  --prometheus-host "$HOST" --prometheus-port "${ROUTER_METRICS_PORT:-$((ROUTER_PORT + 1))}" \
  --prefill "http://$HOST:$PREFILL_PORT" "$BOOTSTRAP_PORT" --decode "http://$HOST:$DECODE_PORT" \
  > router.log 2>&1 &
pids+=($!)
router_ready "PD"
start_provider
wait
