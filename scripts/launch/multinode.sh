#!/usr/bin/env bash
# One SGLang server over two nodes: TP across both (`--nnodes 2 --node-rank 0|1 --dist-init-addr`).
# Usage: scripts/launch/multinode.sh NODE_RANK [EXTRA SGLANG ARGS...]   (run once per node)
# Env: MODEL (the bundled tiny GLM-5), TP (2: ranks over both nodes), NNODES (2),
#      DIST_ADDR (127.0.0.1:50000: node 0's address, the same on every node), PORT (30000: node 0's
#      HTTP port; node 1 serves no HTTP of its own), HOST (127.0.0.1), PYTHON (python).
#
# On one box (what the suite runs, test/sglang_mx/serving/test_multinode_loopback.py, float32, greedy
# equal to TP1): start rank 1 and rank 0 in two shells with the defaults; each "node" binds its
# rank to its own slice of the cores (seam/cpu_binding.py, a loopback DIST_ADDR).
# On two real nodes, what changes:
#   DIST_ADDR=<node 0's reachable IP>:<free port>   on both nodes (not 127.0.0.1)
#   HOST=0.0.0.0 on node 0, so clients reach its HTTP port
#   TP=<GPUs per node x 2> (e.g. 16 for 2x8 MI355X) and MODEL=<the checkpoint, same path on both>
#   GPU nodes: NCCL/RCCL need the interface both nodes share (NCCL_SOCKET_IFNAME=<iface>,
#   GLOO_SOCKET_IFNAME=<iface>); a CPU node uses gloo only (GLOO_SOCKET_IFNAME)
#   the ports SGLang derives from DIST_ADDR's port (it and the next few) open between the nodes
set -euo pipefail
RANK=${1:?node rank (0 or 1)}; shift
PY=${PYTHON:-python}; TP=${TP:-2}; NNODES=${NNODES:-2}; DIST_ADDR=${DIST_ADDR:-127.0.0.1:50000}
case "$RANK" in
  ''|*[!0-9]*) echo "node rank must be a number in 0..$((NNODES - 1)), got '$RANK'" >&2; exit 2;;
esac
[ "$RANK" -lt "$NNODES" ] || { echo "node rank $RANK is not below NNODES=$NNODES" >&2; exit 2; }
MODEL=${MODEL:-$($PY -c 'import sglang_mx_lab.testing.server as s; print(s.default_serve_args()[0])')}
exec $PY -m sglang_mx.cli.main serve --model-path "$MODEL" \
  --host "${HOST:-127.0.0.1}" --port "${PORT:-30000}" \
  --tp "$TP" --nnodes "$NNODES" --node-rank "$RANK" --dist-init-addr "$DIST_ADDR" "$@"
