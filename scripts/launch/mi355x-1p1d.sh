#!/usr/bin/env bash
# GLM-5.2 MXFP4 on 2x8 MI355X as one prefill node and one decode node (1P1D): prefill TP8/EP8,
# decode TP8 with 8 DP-attention ranks, KV over RDMA by MoRI (TRANSFER=mooncake for Mooncake),
# SGLang Model Gateway (smg) in PD mode in front (flags: `sglang-mx recipe mi355x-1p1d --role
# ROLE`; the same layout for Kubernetes: deploy/k8s/mi355x-1p1d/). One role per invocation, role
# as $1 or ROLE:
#   prefill node:  MODEL=/ckpt IB_DEVICE=... scripts/launch/mi355x-1p1d.sh prefill
#   decode node:   MODEL=/ckpt IB_DEVICE=... scripts/launch/mi355x-1p1d.sh decode
#   router (any):  PREFILL_URL=http://PREFILL:30000 DECODE_URL=http://DECODE:30000 \
#                    scripts/launch/mi355x-1p1d.sh router
# IB_DEVICE: the node's RDMA devices for the KV transfer, comma-separated (`ibv_devices` lists
# them; unset: the backend picks). PORT: 30000 engines, 8000 router. The decode reaches the
# prefill's bootstrap port (8998) at PREFILL_URL's host. Flags checked against SGLang 0.5.23's
# and smg 1.13's parsers (test_recipes.py); never run on an MI355X here.
set -euo pipefail
ROLE="${1:-${ROLE:-}}"
NAME=mi355x-1p1d
case "$ROLE" in
  prefill | decode)
    source "$(dirname "$0")/common.sh"
    recipe_args "$NAME" --role "$ROLE" ${TRANSFER:+--transfer "$TRANSFER"}
    exec sglang-mx serve --model-path "$MODEL" --host "$HOST" --port "${PORT:-30000}" \
      "${RECIPE_ARGS[@]}" ${IB_DEVICE:+--disaggregation-ib-device "$IB_DEVICE"}
    ;;
  router)
    : "${PREFILL_URL:?set PREFILL_URL to the prefill node, http://HOST:PORT}"
    : "${DECODE_URL:?set DECODE_URL to the decode node, http://HOST:PORT}"
    mapfile -t ROUTER_ARGS < <(sglang-mx recipe "$NAME" --role router \
      --prefill-url "$PREFILL_URL" --decode-url "$DECODE_URL")
    [ "${#ROUTER_ARGS[@]}" -gt 0 ] || { echo "no router flags for recipe $NAME" >&2; exit 2; }
    exec smg launch --host "${HOST:-0.0.0.0}" --port "${PORT:-8000}" \
      "${ROUTER_ARGS[@]}"
    ;;
  *)
    echo "usage: $0 prefill|decode|router (or ROLE=...); see the header" >&2
    exit 2
    ;;
esac
