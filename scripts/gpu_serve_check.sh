#!/usr/bin/env bash
# The GPU serving check (issue 23) on a lent NVIDIA H200 (Python 3.12, torch 2.11 cu130, triton
# 3.6.0, no SGLang, no sgl_kernel, no network): real SGLang with our plugin serves the tiny
# GLM-5 that `sglang-mx serve` serves by default, on the `mx_cuda` platform, CUDA graphs on,
# then off. docs/gpu-serve.md says how to run it with the device tool.
#
#   OUT=/some/dir GPU_SERVE_COMMIT=<sha> bash scripts/gpu_serve_check.sh   # on the GPU, <= 6 min
#   OUT=/tmp/x GPU_SERVE_DRY_RUN=1 bash scripts/gpu_serve_check.sh        # CPU: mx_cpu platform
#
# Needs .whl/gpu-site.tar.xz (python scripts/gpu_serve_assets.py build), carried with the run:
# SGLang 0.5.23 (trimmed) and the packages its server imports that the image lacks. It is
# unpacked into /tmp/site; our packages come from the checkout (python/, sgl-kernel-rocm/),
# stand-ins for sgl_kernel, IPython and soundfile go last on PYTHONPATH.
#
# Results under $OUT:
#   gpu_serve.log                      everything printed
#   docs/results/gpu-serve-<arch>.json the record (sm90 on the H200; cpu for a dry run): commit,
#                                      versions, greedy token ids and log-probs, cached tokens,
#                                      decode tok/s with graphs on and off, hostile outcomes,
#                                      failures, and the checks the issue asks for. Copy it in
#                                      with cp -r FILES_AT/docs/. docs/
#
# Environment knobs:
#   GPU_SERVE_BUDGET_S  hard limit for the whole check (default 330; dry run 1500)
#   GPU_SERVE_COMMIT    the commit the tree is at (the device copy has no .git)
#   GPU_SERVE_DRY_RUN   1: CPU dry run (no archive, the venv's SGLang, the mx_cpu platform)
#   GPU_SERVE_START_S   seconds a server may take to serve its first token (GPU default 180)
#   PYTHON              interpreter holding torch (default python3)
#
# Exit status: 0 when every request was answered and every check held; 1 otherwise.
set -u -o pipefail
: "${OUT:?set OUT to the folder whose files come back}"
ROOT=$(cd "$(dirname "$0")/.." && pwd) && cd "$ROOT" || exit 1
mkdir -p "$OUT/docs/results"
DRY=${GPU_SERVE_DRY_RUN:-0} PY=${PYTHON:-python3} SHIMS=$ROOT/python/sglang_mx/_cpu_shims
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
exec > >(tee -a "$OUT/gpu_serve.log") 2>&1
START=$(date +%s)
extra=()

if [[ $DRY == 1 ]]; then
    BUDGET_S=${GPU_SERVE_BUDGET_S:-1500}
    export PYTHONPATH="$ROOT/python:$ROOT/lab:$ROOT/sgl-kernel-rocm${PYTHONPATH:+:$PYTHONPATH}"
    extra=(--dry-run)
else
    BUDGET_S=${GPU_SERVE_BUDGET_S:-330}
    ARCHIVE=.whl/gpu-site.tar.xz
    if [[ ! -f $ARCHIVE ]]; then
        echo "missing $ARCHIVE: build it with python scripts/gpu_serve_assets.py build and carry it"
        exit 1
    fi
    rm -rf /tmp/site && mkdir -p /tmp/site
    tar -xJf "$ARCHIVE" -C /tmp/site || { echo "could not unpack $ARCHIVE"; exit 1; }
    echo "unpacked $ARCHIVE ($(du -sh /tmp/site | cut -f1)) in $(($(date +%s) - START)) s"
    # Checkout first, carried site next, stand-ins last (only where nothing real is found).
    export PYTHONPATH="$ROOT/python:$ROOT/lab:$ROOT/sgl-kernel-rocm:/tmp/site:$SHIMS/sgl_kernel_shim:$SHIMS/ipython_shim:$SHIMS/soundfile_shim"
    # fp32 dots in Triton as on the CPU (not TF32): the comparison's bounds are float32 noise.
    export TRITON_F32_DEFAULT=ieee
    # A server not serving after 180 s will not within the budget: fail it, keep the record.
    export GPU_SERVE_START_S=${GPU_SERVE_START_S:-180}
    extra=(--site /tmp/site)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
fi

"$PY" - <<'PY'
import importlib.metadata as md, sys
print("python", sys.version.split()[0])
for name in ("torch", "triton", "transformers", "sglang", "xgrammar", "fastapi", "zmq"):
    try:
        print(f"{name:13} {md.version('pyzmq' if name == 'zmq' else name)}")
    except md.PackageNotFoundError:
        print(f"{name:13} MISSING")
PY

ARCH=cpu
[[ $DRY == 1 ]] || ARCH=$("$PY" -c "from sgl_kernel_rocm.arch import current_arch; print(current_arch())")
RESULT=$OUT/docs/results/gpu-serve-$ARCH.json
left=$((BUDGET_S - ($(date +%s) - START)))
echo "== serving check (limit ${left}s, $(date -u +%H:%M:%S) UTC) -> $RESULT"
rc=0
GPU_SERVE_LEFT_S=$((left - 10)) timeout -k 15 "$left" "$PY" scripts/gpu_serve_check.py --out "$RESULT" ${extra[@]+"${extra[@]}"} || rc=$?
((rc == 124 || rc == 137)) && echo "== TIMEOUT after $(($(date +%s) - START)) s (budget ${BUDGET_S} s)"
[[ -f $RESULT ]] || { echo "no result written"; rc=1; }
echo "== done in $(($(date +%s) - START)) s, rc=$rc"
exit "$rc"
