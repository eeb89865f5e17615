#!/usr/bin/env bash
# One-shot GPU check of sgl-kernel-rocm on a lent device machine (planned for an NVIDIA H200 with
# triton 3.6 + torch, no sglang): environment, then benchmark/gpu_check/run.py (copy bandwidth,
# correctness at GLM-5.2 shapes with the shipped tables, kernel-only times of the MoE gate_up /
# down kernels and of MLA / DSA / indexer decode, each as a fraction of the copy bandwidth), then
# the gpu-marked pytest suite with what time is left. docs/gpu-check.md says how to run it.
#
#   OUT=/some/dir GPU_CHECK_COMMIT=<sha> bash scripts/gpu_check.sh  # on the GPU, <= 8 min
#   OUT=/tmp/x GPU_CHECK_DRY_RUN=1 bash scripts/gpu_check.sh      # CPU: interpreter, tiny shapes
#   OUT=/some/dir GPU_CHECK_PROFILE=moe bash scripts/gpu_check.sh  # issue 21's MoE run, <= 5 min
#   OUT=/some/dir GPU_CHECK_PROFILE=attention bash scripts/gpu_check.sh  # issue 22's, <= 5 min
#
# Results (7 files under $OUT):
#   gpu_check.log                 everything printed, ending with a step summary
#   gpu_check.json, gpu_check.md  the check's rows (plan, copy GB/s, times, fractions, errors)
#   docs/gpu-check-results.md, docs/results/gpu-check-<arch>.json
#                                 the same, laid out as the repo's docs/: copy them in with
#                                 cp -r FILES_AT/docs/. docs/
#   gpu_tests.log, gpu_tests.xml  pytest output and JUnit XML of the gpu-marked tests
#   moe-variants-<arch>.json      (GPU_CHECK_PROFILE=moe) code paths x word upcasts, decode
#
# Time: every step runs under a hard `timeout`, capped by what is left of GPU_CHECK_BUDGET_S;
# run.py plans its cases with per-case estimates and trims them to its own budget
# (benchmark/gpu_check/plan.py), then skips whatever the clock no longer allows.
#
# Environment knobs:
#   GPU_CHECK_BUDGET_S  total seconds for all steps (default 460: 8 min less machine slack)
#   GPU_CHECK_STEPS     comma list of steps to run (default env,check,tests)
#   GPU_CHECK_CHECK_S   seconds for the check step (default 340)
#   GPU_CHECK_BF16_MOE  name of the bf16-weight MoE in sgl_kernel_rocm.moe (default: looked up)
#   GPU_CHECK_DRY_RUN   1: CPU dry run (TRITON_INTERPRET=1, tiny shapes, no tests step)
#   GPU_CHECK_PROFILE   one measurement instead of the whole check (empty: the whole check):
#                       moe: only the MoE (issue 21's Measure section): correctness incl. EP8
#                       fully masked tokens, W4A16 and bf16 weights at TP8 / EP8 x 1-256 tokens
#                       with measured / predicted per row, then the code-path and word-upcast
#                       variants at the decode points (sweep_moe.py --variants -> OUT/
#                       moe-variants-<arch>.json); steps env,check,variants, budget 290 s
#                       attention: only decode attention (issue 22's Measure section): MLA, DSA,
#                       the indexer and its score kernel and top-k timed apart, then the gpu
#                       tests selected by -k "decode or indexer"; steps env,check,tests,
#                       budget 300 s (check 210 s, tests what is left)
#                       A profile's results are tagged: docs/results/gpu-check-<arch>-<profile>
#                       .json and docs/gpu-check-results-<profile>.md
#   GPU_CHECK_KINDS     comma list of run.py case kinds to keep (each profile sets its own)
#   GPU_CHECK_TESTS_K   pytest -k selection for the tests step (the attention profile sets it)
#   GPU_CHECK_COMMIT    the commit the tree is at (the device copy has no .git); every result
#                       JSON records it, and docs may quote only figures that name their commit
#   PYTHON              interpreter holding torch (default python3)
#
# Exit status: 0 when every step ran and passed; 1 when any failed, timed out or was not run
# (the log ends with the failed steps).
#
# Python packages: the script uses what the machine has (torch, triton, pytest). Our two
# packages go on PYTHONPATH (python/, lab/, sgl-kernel-rocm/); nothing is pip-installed from a registry
# and sglang is never installed or imported. If a package is missing there, prepare wheels here
# as /work/.library/device/README.md says (the device has Python 3.12, x86-64, no network):
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
PROFILE=${GPU_CHECK_PROFILE:-}
TESTS_K=${GPU_CHECK_TESTS_K:-}
if [[ $PROFILE == moe ]]; then
    BUDGET_S=${GPU_CHECK_BUDGET_S:-290}
    CHECK_S=${GPU_CHECK_CHECK_S:-215}
    DEFAULT_STEPS=env,check,variants
    export GPU_CHECK_KINDS=${GPU_CHECK_KINDS:-check_moe,check_moe_ep,moe,moe_nosplit,moe_bf16}
elif [[ $PROFILE == attention ]]; then
    BUDGET_S=${GPU_CHECK_BUDGET_S:-300}
    CHECK_S=${GPU_CHECK_CHECK_S:-210}
    DEFAULT_STEPS=env,check,tests
    kinds=check_mla,check_dsa,check_indexer,mla,dsa,indexer,indexer_scores,indexer_topk
    kinds+=,indexer_topk_radix
    export GPU_CHECK_KINDS=${GPU_CHECK_KINDS:-$kinds}
    TESTS_K=${TESTS_K:-"decode or indexer"}
elif [[ -n $PROFILE ]]; then
    echo "GPU_CHECK_PROFILE must be empty, moe or attention, got '$PROFILE'" >&2
    exit 2
else
    BUDGET_S=${GPU_CHECK_BUDGET_S:-460}
    CHECK_S=${GPU_CHECK_CHECK_S:-340}
    DEFAULT_STEPS=env,check,tests
fi
DRY=${GPU_CHECK_DRY_RUN:-0}
if [[ $DRY == 1 ]]; then
    STEPS=",${GPU_CHECK_STEPS:-${DEFAULT_STEPS/,tests/}},"
    export TRITON_INTERPRET=1
else
    STEPS=",${GPU_CHECK_STEPS:-$DEFAULT_STEPS},"
fi
START=$(date +%s)
SUMMARY=()
FAILED=()  # steps that failed, timed out or never ran: the exit status says so
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
        FAILED+=("$name (not run: budget spent)")
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
    ((rc == 0)) || FAILED+=("$name ($status)")
}

# --- Python environment --------------------------------------------------------------------
if compgen -G ".whl/*.whl" >/dev/null; then
    echo "installing carried wheels from .whl/ into /tmp/site"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || echo "WARNING: wheel install failed"
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$ROOT/python:$ROOT/lab:$ROOT/sgl-kernel-rocm${PYTHONPATH:+:$PYTHONPATH}"

env_report() {
    if [[ $DRY != 1 ]]; then
        nvidia-smi || echo "nvidia-smi failed"
        nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu \
            --format=csv || true
    fi
    uname -a
    "$PY" - <<'PY'
import importlib.metadata as md
import sys

print("python", sys.version.split()[0], sys.executable)
for name in ("torch", "triton", "pytest", "numpy", "sglang"):
    try:
        print(f"{name:15} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name:15} MISSING")
import torch
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

run_check() {  # run_check LIMIT_S: the planned cases get the limit less 15 s for the report
    local extra=()
    [[ $DRY == 1 ]] && extra=(--dry-run)
    "$PY" benchmark/gpu_check/run.py --budget-s "$(($1 - 15))" --out "$OUT" --docs "$OUT/docs" \
        --profile "$PROFILE" ${extra[@]+"${extra[@]}"}
}

run_variants() {  # run_variants LIMIT_S: paths x upcasts at the decode points (4; dry run 1)
    local extra=(--points 4)
    [[ $DRY == 1 ]] && extra=(--dry-run --points 1)
    "$PY" benchmark/gpu_check/sweep_moe.py --variants --budget-s "$(($1 - 20))" --out "$OUT" \
        "${extra[@]}"
}

run_tests() {
    set -o pipefail
    local select=()
    [[ -n $TESTS_K ]] && select=(-k "$TESTS_K")
    SGLANG_MX_TEST_GPU=1 "$PY" -m pytest -m gpu test/sgl_kernel_rocm -q -p no:cacheprovider \
        ${select[@]+"${select[@]}"} -o timeout=60 --durations=10 \
        --junitxml="$OUT/gpu_tests.xml" 2>&1 |
        tee "$OUT/gpu_tests.log"
}

export OUT PY PYTHONPATH DRY PROFILE TESTS_K
export -f env_report run_check run_variants run_tests

step env 30 env_report
left=$((BUDGET_S - ($(date +%s) - START)))
((CHECK_S > left - 5)) && CHECK_S=$((left - 5))
step check "$CHECK_S" run_check "$CHECK_S"
left=$((BUDGET_S - ($(date +%s) - START)))
step variants "$left" run_variants "$left"
step tests 200 run_tests

echo
echo "== summary ($(($(date +%s) - START))s of ${BUDGET_S}s budget)"
printf '%s\n' "${SUMMARY[@]}"
if [[ -f $OUT/gpu_tests.log ]]; then
    echo "tests: $(grep -E '(passed|failed|error|skipped)' "$OUT/gpu_tests.log" | tail -n 1)"
fi
if [[ -f $OUT/gpu_check.json ]]; then
    "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); rows=d['rows']; \
bad=[r['case'] for r in rows if r['kind'].startswith('check') and r.get('status')!='ok']; \
print(f\"{d['gpu']}: copy {d['copy']['best_gbps']:.0f} GB/s; {len(rows)} cases, \
correctness not ok: {bad or 'none'}\")" "$OUT/gpu_check.json"
fi
nfiles=$(find "$OUT" -type f | wc -l)
echo "files under OUT: $nfiles"
find "$OUT" -type f | sort
# Exit non-zero when any step failed (run.py returns 1 on a correctness mismatch, pytest on a
# failed test), so a caller's `rc` means what it says.
if ((${#FAILED[@]})); then
    echo "FAILED steps: ${FAILED[*]}"
    exit 1
fi
echo "all steps passed"
