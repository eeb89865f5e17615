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
$PIP install --no-deps --no-build-isolation -e ./sgl-kernel-rocm -e . -e ./lab
# CPU stand-ins for torchvision/sgl_kernel, venv-wide and only where the real package is missing,
# so SGLang's own entry points (benchmark.serving, bench_one_batch_server, ...) import here.
"$VENV/bin/python" -m sglang_mx.seam.venv_shims
# PD disaggregation over Mooncake (docs/scale-out.md; the suite's test_pd_topology.py): on by
# default on x86_64 Linux, SGLANG_MX_PD=0 skips it. The transfer engine's wheel links
# libibverbs/librdmacm even for TCP (Debian: libibverbs1 librdmacm1), installed here as root;
# without root and without them, an explicit SGLANG_MX_PD=1 fails, the default only warns.
PD=${SGLANG_MX_PD:-auto}
if [ "$PD" = auto ]; then
  [ "$(uname -sm)" = "Linux x86_64" ] && PD=1 || PD=0
  PD_REQUIRED=0
else
  PD_REQUIRED=1
fi
if [ "$PD" = 1 ]; then
  # The cache is read whole before matching: under pipefail, `ldconfig -p | grep -q` fails when
  # grep exits at its first match while ldconfig is still writing (SIGPIPE), and setup then
  # skipped Mooncake on a box that had both libraries.
  have_libs() {
    local cache
    cache=$(ldconfig -p 2>/dev/null) || return 1
    [[ $cache == *libibverbs.so.1* && $cache == *librdmacm.so.1* ]]
  }
  if ! have_libs && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    libs="libibverbs1 librdmacm1"
    apt-get install -y -q $libs > /dev/null \
      || { apt-get update -q > /dev/null && apt-get install -y -q $libs > /dev/null; } || true
  fi
  if have_libs; then
    $PIP install "mooncake-transfer-engine-non-cuda==0.3.13.post1"
    "$VENV/bin/python" -c "import mooncake.engine; print('setup ok: mooncake transfer engine')"
  else
    msg="setup: PD (Mooncake) needs the system libraries libibverbs1 and librdmacm1"
    msg="$msg (Debian/Ubuntu: sudo apt-get install -y libibverbs1 librdmacm1), then re-run"
    if [ "$PD_REQUIRED" = 1 ]; then echo "$msg" >&2; exit 1; fi
    echo "$msg; without them the PD tests fail (SGLANG_MX_PD=0 skips this step)" >&2
  fi
fi
# The report test renders report.html in a real headless browser and reads the verdict off the
# screenshot: Debian's chromium and tesseract-ocr (skipped where neither root nor apt-get is).
if ! { command -v chromium > /dev/null && command -v tesseract > /dev/null; } \
    && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  pkgs="chromium tesseract-ocr"
  apt-get install -y -q --no-install-recommends $pkgs > /dev/null \
    || { apt-get update -q > /dev/null && apt-get install -y -q --no-install-recommends $pkgs > /dev/null; } \
    || echo "setup: could not install $pkgs; the report screenshot test will fail" >&2
fi
# `sglang-mx serve` preloads jemalloc into a CPU server (python/sglang_mx/seam/cpu_malloc.py:
# glibc's malloc let a 20k-token decode grow until it was killed); without it, it fixes glibc's
# mmap threshold instead.
ld_cache=$(ldconfig -p 2>/dev/null || true)
if [[ $ld_cache != *libjemalloc.so.2* ]] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  apt-get install -y -q libjemalloc2 > /dev/null \
    || { apt-get update -q > /dev/null && apt-get install -y -q libjemalloc2 > /dev/null; } \
    || echo "setup: could not install libjemalloc2; CPU servers run on glibc's malloc" >&2
fi
# The provider's shared store and load balancer (docs/provider.md, topology): the suite starts a
# throwaway PostgreSQL cluster as the `postgres` user and provider_topology.sh puts HAProxy in
# front of PROVIDERS=N replicas. Debian's packages; the binaries live in
# /usr/lib/postgresql/<version>/bin, not on PATH.
if ! { ls /usr/lib/postgresql/*/bin/initdb > /dev/null 2>&1 && command -v haproxy > /dev/null; } \
    && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  pkgs="postgresql haproxy"
  apt-get install -y -q --no-install-recommends $pkgs > /dev/null \
    || { apt-get update -q > /dev/null && apt-get install -y -q --no-install-recommends $pkgs > /dev/null; } \
    || echo "setup: could not install $pkgs; the provider's PostgreSQL tests will fail" >&2
fi
# OpenRouter's TypeScript SDK for the provider's node check (test_openrouter_sdk.py; skipped
# without it), into the venv, where npm is present and reachable.
if command -v npm > /dev/null && [ ! -e "$VENV/node/node_modules/@openrouter/sdk/package.json" ]; then
  npm install --prefix "$VENV/node" --no-audit --no-fund --ignore-scripts -q \
    "@openrouter/sdk@1.3.19" > /dev/null \
    || echo "setup: npm could not install @openrouter/sdk; its provider check is skipped" >&2
fi
"$VENV/bin/python" - <<'PY'
import torch, sglang, triton
assert not torch.version.cuda, f"expected CPU torch, got CUDA {torch.version.cuda}"
print(f"setup ok: torch {torch.__version__}, sglang {sglang.__version__}, triton {triton.__version__}")
PY
# The bundled models that are built, not stored (sglang_mx.assets.DERIVED): before any test or
# wheel needs them.
"$VENV/bin/python" -c "from sglang_mx.assets import build_derived; print('setup ok: bundled models', build_derived() or 'present')"
