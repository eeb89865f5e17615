# Shared tail of pd_topology.sh and provider_topology.sh: wait for the router they started, then
# put the provider in front of it. Sourced; reads PY, HOST, ROUTER_PORT, PROVIDER_PORT, DB and
# PRICING, and adds the provider's pid to the caller's `pids`.

# router_ready WHAT: wait until the router answers /health, then say so (WHAT: its mode).
router_ready() {
  until curl -sf "http://$HOST:$ROUTER_PORT/health" > /dev/null; do sleep 1; done
  echo "router http://$HOST:$ROUTER_PORT ($1) ready"
}

# start_provider: a first key for a new DB (printed once), then the provider in the background.
start_provider() {
  if [ ! -s "$DB" ]; then
    echo "first key (shown once):"
    $PY -m sglang_mx.provider provider keys create --db "$DB" --name default
  fi
  $PY -m sglang_mx.provider provider --upstream "http://$HOST:$ROUTER_PORT" --pricing "$PRICING" \
    --db "$DB" --host "$HOST" --port "$PROVIDER_PORT" &
  pids+=($!)
  echo "provider http://$HOST:$PROVIDER_PORT/v1 (Ctrl-C stops all)"
}
