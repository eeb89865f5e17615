#!/usr/bin/env bash
# One TP8 engine on 8x MI355X: the layout of the public 2,626 tok/s result. NOT RUN HERE.
set -euo pipefail
source "$(dirname "$0")/common.sh"
exec sglang-mx serve --host "$HOST" --port "${PORT:-30000}" "${COMMON_ARGS[@]}" \
  --tp-size 8 --max-running-requests 192
