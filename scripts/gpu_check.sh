#!/usr/bin/env bash
# One-shot GPU check of sgl-kernel-rocm on a lent device machine (planned for an NVIDIA H200):
# environment, the gpu-marked kernel tests, measured copy bandwidth and bf16 matmul rate, and the
# two kernel microbenchmarks, inside one time budget. docs/gpu-check.md says how to run it.
#
#   OUT=/some/dir bash scripts/gpu_check.sh
#
# Results (at most 8 files, depth <= 2, under $OUT):
#   gpu_check.log        everything printed, ending with a step summary
#   gpu_tests.log        pytest output;  gpu_tests.xml  the same as JUnit XML (per-test times)
#   device.json          GPU, driver, versions, copy GB/s and bf16 matmul TFLOP/s
#   moe/moe_<arch>_quick.{json,png}        benchmark/kernels/bench_moe.py
#   attn_gqa/, attn_mla/ decode_attention_<arch>.json   benchmark/kernels/bench_decode_attention.py
#                        (its PNGs are dropped to stay within 8 files; plot() redraws them)
#
# Environment knobs:
#   GPU_CHECK_BUDGET_S  total seconds for all steps (default 450); each step is also capped
#   GPU_CHECK_STEPS     comma list of steps to run (default env,tests,device,gqa,mla,moe)
#   PYTHON              interpreter holding torch (default python3)
#
# Python packages: the script uses what the machine has (the H200 image has torch, triton,
# pytest, hypothesis, matplotlib). Our two packages go on PYTHONPATH (python/, sgl-kernel-rocm/);
# nothing is pip-installed from a registry and sglang is never installed. If a package is
# missing there, prepare wheels here as /work/.library/device/README.md says (the device has
# Python 3.12, x86-64, no network):
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 -d .whl NAME==VERSION      (.whl/ is git-ignored)
# and name .whl in the run's carry list; this script installs .whl/*.whl into /tmp/site first.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
mkdir -p "$OUT"
ROOT=$PWD
PY=${PYTHON:-python3}
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
STEPS=",${GPU_CHECK_STEPS:-env,tests,device,gqa,mla,moe},"
START=$(date +%s)
SUMMARY=()
export PYTHONUNBUFFERED=1
export HF_HUB_OFFLINE=1

exec > >(tee -a "$OUT/gpu_check.log") 2>&1

wanted() { [[ $STEPS == *",$1,"* ]]; }

# step NAME LIMIT_S CMD...: run CMD under a hard timeout capped by what is left of the budget;
# a failed or timed-out step is recorded and the script goes on.
step() {
    local name=$1 limit=$2 left t0 rc=0
    shift 2
    if ! wanted "$name"; then
        return 0
    fi
    left=$((BUDGET_S - ($(date +%s) - START)))
    if ((left < 20)); then
        echo "== $name: not run, budget spent"
        SUMMARY+=("$(printf '%-8s %-10s %5s s' "$name" "not-run" 0)")
        return 0
    fi
    ((limit > left)) && limit=$left
    echo
    echo "== $name (limit ${limit}s, $(date -u +%H:%M:%S) UTC)"
    t0=$(date +%s)
    # Functions run in a child bash (timeout execs programs): they are exported below.
    timeout -k 10 "$limit" bash -c '"$@"' _ "$@" || rc=$?
    local status="rc=$rc"
    ((rc == 124 || rc == 137)) && status="TIMEOUT"
    echo "== $name: $status after $(($(date +%s) - t0))s"
    SUMMARY+=("$(printf '%-8s %-10s %5s s' "$name" "$status" "$(($(date +%s) - t0))")")
}

# --- Python environment --------------------------------------------------------------------
if compgen -G ".whl/*.whl" >/dev/null; then
    echo "installing carried wheels from .whl/ into /tmp/site"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || echo "WARNING: wheel install failed"
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT/python:$ROOT/sgl-kernel-rocm${PYTHONPATH:+:$PYTHONPATH}"

BENCH_PYTHONPATH=$PYTHONPATH

env_report() {
    nvidia-smi || echo "nvidia-smi failed"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
        --format=csv || true
    uname -a
    "$PY" - <<'PY'
import importlib.metadata as md
import sys

print("python", sys.version.split()[0], sys.executable)
for name in ("torch", "triton", "pytest", "hypothesis", "pytest-timeout", "numpy", "matplotlib"):
    try:
        print(f"{name:15} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name:15} MISSING")
import torch
import triton  # noqa: F401
import pytest  # noqa: F401
import hypothesis  # noqa: F401
import sgl_kernel_rocm
from sgl_kernel_rocm.arch import current_arch

print("cuda", torch.version.cuda, "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"gpu {p.name}, cc {p.major}.{p.minor}, {p.multi_processor_count} SMs, "
          f"{p.total_memory / 2**30:.1f} GiB, arch id {current_arch()}")
print("sgl_kernel_rocm from", sgl_kernel_rocm.__file__)
PY
}

run_tests() {
    set -o pipefail
    SGLANG_MX_TEST_GPU=1 "$PY" -m pytest -m gpu test/sgl_kernel_rocm -q -p no:cacheprovider \
        -o timeout=150 --durations=15 --junitxml="$OUT/gpu_tests.xml" 2>&1 |
        tee "$OUT/gpu_tests.log"
}

device_json() {
    "$PY" - "$OUT/device.json" <<'PY'
"""Copy bandwidth (4 GiB device-to-device, read + write counted, best of N) and dense bf16
matmul rate (8192^3 on random data), timed with CUDA events after warm-ups."""
import datetime as dt
import json
import platform
import subprocess
import sys

import torch
import triton

assert torch.cuda.is_available(), "no CUDA device"
dev = torch.device("cuda")


def time_ms(fn, warm, reps):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return sorted(out)


nbytes = 4 << 30
src = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).uniform_()
dst = torch.empty_like(src)
copy = time_ms(lambda: dst.copy_(src), 2, 10)
del src, dst
n = 8192
a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
mm = time_ms(lambda: a @ b, 3, 10)
p = torch.cuda.get_device_properties(0)
smi = subprocess.run(
    ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem",
     "--format=csv,noheader"], capture_output=True, text=True, check=False,
).stdout.strip()
try:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
except Exception:
    commit = "unknown (no .git on the device machine)"
info = {
    "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    "gpu": p.name,
    "compute_capability": f"{p.major}.{p.minor}",
    "sms": p.multi_processor_count,
    "memory_gib": round(p.total_memory / 2**30, 1),
    "nvidia_smi": smi,
    "versions": {"python": platform.python_version(), "torch": torch.__version__,
                 "triton": triton.__version__, "cuda": torch.version.cuda},
    "commit": commit,
    "copy": {"bytes_each_way": nbytes, "best_ms": copy[0], "median_ms": copy[len(copy) // 2],
             "best_gbps": 2 * nbytes / copy[0] / 1e6,
             "median_gbps": 2 * nbytes / copy[len(copy) // 2] / 1e6},
    "matmul_bf16": {"n": n, "best_ms": mm[0], "median_ms": mm[len(mm) // 2],
                    "best_tflops": 2 * n**3 / mm[0] / 1e9,
                    "median_tflops": 2 * n**3 / mm[len(mm) // 2] / 1e9},
}
with open(sys.argv[1], "w") as f:
    json.dump(info, f, indent=1)
print(json.dumps(info, indent=1))
PY
}

bench_attn() {  # bench_attn OP
    PYTHONPATH=$BENCH_PYTHONPATH "$PY" benchmark/kernels/bench_decode_attention.py \
        --ops "$1" --no-sglang --out "$OUT/attn_$1"
}

bench_moe() {
    # --quick on a GPU: tokens 1/16/64/1024; TP8 (E256, I256) and EP8 (E32, I2048) slices of
    # GLM-5.2 (TP1's 5 GB of weights per token count would not fit the budget).
    PYTHONPATH=$BENCH_PYTHONPATH "$PY" benchmark/kernels/bench_moe.py --quick \
        --layouts TP8,EP8 --iters 10 --out "$OUT/moe"
}

export OUT PY PYTHONPATH BENCH_PYTHONPATH
export -f env_report run_tests device_json bench_attn bench_moe

step env 45 env_report
step tests 200 run_tests
step device 45 device_json
step gqa 60 bench_attn gqa
step mla 60 bench_attn mla
step moe 100 bench_moe

# Stay within 8 files: the attention PNGs can be redrawn from their JSON.
rm -f "$OUT"/attn_*/*.png

echo
echo "== summary ($(($(date +%s) - START))s of ${BUDGET_S}s budget)"
printf '%s\n' "${SUMMARY[@]}"
if [[ -f $OUT/gpu_tests.log ]]; then
    echo "tests: $(grep -E '(passed|failed|error|skipped)' "$OUT/gpu_tests.log" | tail -n 1)"
fi
if [[ -f $OUT/device.json ]]; then
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(f\"{d['gpu']}: copy {d['copy']['best_gbps']:.0f} GB/s, \
bf16 matmul {d['matmul_bf16']['median_tflops']:.0f} TFLOP/s\")" "$OUT/device.json"
fi
nfiles=$(find "$OUT" -type f | wc -l)
echo "files under OUT: $nfiles (limit 8)"
find "$OUT" -type f | sort
