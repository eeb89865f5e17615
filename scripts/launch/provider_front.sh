# Shared tail of pd_topology.sh and provider_topology.sh: wait for the router they started, then
# put the provider in front of it. Sourced; reads PY, HOST, ROUTER_PORT, PROVIDER_PORT, DB,
# PRICING, PROVIDERS and PG_DIR, and adds what it starts to the caller's `pids`.

# router_ready WHAT: wait until the router answers /health, then say so (WHAT: its mode).
router_ready() {
  until curl -sf "http://$HOST:$ROUTER_PORT/health" > /dev/null; do sleep 1; done
  echo "router http://$HOST:$ROUTER_PORT ($1) ready"
}

# start_provider: the store, a first key for a new one (printed once), then PROVIDERS provider
# replicas (default 1) in the background; with more than one, HAProxy in front of them on
# PROVIDER_PORT (replicas on PROVIDER_PORT+1..N, health-checked). DB: an SQLite file (one
# replica), `postgres` (a throwaway local PostgreSQL cluster in PG_DIR, stopped with the rest),
# or a postgresql:// URL (docs/provider.md "Topology": a managed PostgreSQL is one URL).
start_provider() {
  local n=${PROVIDERS:-1} db=$DB i key
  if [ "$db" = postgres ]; then
    local pg_dir=${PG_DIR:-/tmp/sglang-mx-provider-pg-$PROVIDER_PORT}
    rm -f "$pg_dir/url"
    $PY -m sglang_mx.provider.pg_local serve "$pg_dir" > pg.log 2>&1 &
    pids+=($!)
    until [ -s "$pg_dir/url" ]; do kill -0 "${pids[-1]}" || { cat pg.log >&2; return 1; }; sleep 0.5; done
    db=$(cat "$pg_dir/url")
  elif [[ $db != postgresql://* && $db != postgres://* && $n -gt 1 ]]; then
    echo "PROVIDERS=$n needs a shared store: DB=postgres or DB=postgresql://... (an SQLite file" \
      "is one process's)" >&2
    return 2
  fi
  if [ "$($PY -m sglang_mx.provider provider keys list --db "$db" | wc -l)" -le 1 ]; then
    key=$($PY -m sglang_mx.provider provider keys create --db "$db" --name default | tail -n 1)
    echo "key: $key"
  else
    echo "key: (the store has keys; sglang-mx provider keys create --db ... makes another)"
  fi
  echo "db: $db"
  local ports=("$PROVIDER_PORT") replicas=()
  [ "$n" -gt 1 ] && ports=($(seq $((PROVIDER_PORT + 1)) $((PROVIDER_PORT + n))))
  for i in "${ports[@]}"; do
    $PY -m sglang_mx.provider provider --upstream "http://$HOST:$ROUTER_PORT" \
      --pricing "$PRICING" --db "$db" --host "$HOST" --port "$i" > "provider-$i.log" 2>&1 &
    pids+=($!); replicas+=("http://$HOST:$i")
  done
  for u in "${replicas[@]}"; do
    until curl -sf "$u/v1/models" > /dev/null; do sleep 0.5; done
  done
  if [ "$n" -gt 1 ]; then
    $PY -m sglang_mx.provider.haproxy "$PROVIDER_PORT" "${replicas[@]}" > haproxy.cfg
    haproxy -f haproxy.cfg -db > haproxy.log 2>&1 &
    pids+=($!)
    until curl -sf "http://$HOST:$PROVIDER_PORT/v1/models" > /dev/null; do sleep 0.5; done
    echo "haproxy http://$HOST:$PROVIDER_PORT -> ${replicas[*]}"
  fi
  echo "provider http://$HOST:$PROVIDER_PORT/v1 (Ctrl-C stops all)"
}
