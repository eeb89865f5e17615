#!/usr/bin/env bash
# Install the CPU development environment into a venv: torch 2.13.0 (CPU), SGLang 0.5.23 without its
# CUDA dependency tree, the pinned light dependencies it needs, dev extras, and our two packages
# in editable mode. Safe to re-run: pip skips what is already satisfied.
set -euo pipefail
VENV=${1:-.venv}
PY=${2:-python3}
cd "$(dirname "$0")/.."
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
$PIP install "torch==2.13.0"
# --no-deps: sglang's declared deps pull ~11 GB of CUDA wheels (and a CUDA torch).
$PIP install --no-deps "sglang==0.5.23"
$PIP install -r requirements/cpu-constraints.txt -r requirements/dev.txt
# Editable installs build in this venv (no isolation), so its setuptools must be there.
$PIP install "setuptools>=68"
$PIP install --no-deps --no-build-isolation -e ./sgl-kernel-rocm -e .
# CPU stand-ins for torchvision/sgl_kernel, venv-wide and only where the real package is missing,
# so SGLang's own entry points (benchmark.serving, bench_one_batch_server, ...) import here.
"$VENV/bin/python" -m sglang_mx.seam.venv_shims
# PD disaggregation over Mooncake (docs/scale-out.md), opt-in: SGLANG_MX_PD=1 make setup. The
# transfer engine's wheel links libibverbs/librdmacm even for TCP (Debian: libibverbs1 librdmacm1).
if [ "${SGLANG_MX_PD:-0}" = 1 ]; then
  if ! ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1' \
      || ! ldconfig -p 2>/dev/null | grep -q 'librdmacm\.so\.1'; then
    if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
      libs="libibverbs1 librdmacm1"
      apt-get install -y -q $libs > /dev/null \
        || { apt-get update -q > /dev/null && apt-get install -y -q $libs > /dev/null; }
    else
      echo "setup: SGLANG_MX_PD=1 needs the system libraries libibverbs1 and librdmacm1" \
        "(Debian/Ubuntu: sudo apt-get install -y libibverbs1 librdmacm1), then re-run" >&2
      exit 1
    fi
  fi
  $PIP install "mooncake-transfer-engine-non-cuda==0.3.13.post1"
  "$VENV/bin/python" -c "import mooncake.engine; print('setup ok: mooncake transfer engine')"
fi
"$VENV/bin/python" - <<'PY'
import torch, sglang, triton
assert not torch.version.cuda, f"expected CPU torch, got CUDA {torch.version.cuda}"
print(f"setup ok: torch {torch.__version__}, sglang {sglang.__version__}, triton {triton.__version__}")
PY
