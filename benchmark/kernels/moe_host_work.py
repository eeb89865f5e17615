"""Host-side work of one decode MoE layer call (`fused_moe_mxfp4`, Triton path): kernel launches,
other device ops, buffer allocations, host syncs and Python time per call, on a CPU box.

No GPU and no interpreter: the wrapper runs its GPU code path (worst-case sized alignment, no
host sync) on CPU tensors whose storage is never touched, with the three Triton kernels replaced
by recorders of their launches; every torch op is classified by a TorchDispatchMode (a compute
op on a GPU is one more launch; a factory op is an allocation; views are free). The torch
alignment it replaces at decode is counted the same way for comparison.

  python benchmark/kernels/moe_host_work.py [--out docs/results/moe-host-work]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # lets the wrapper take CPU tensors; no kernel runs

import torch  # noqa: E402
import triton  # noqa: E402
from sgl_kernel_rocm.moe import (  # noqa: E402
    MoEWeights,
    _align_kernel,
    _kernels,
    fused_moe_mxfp4,
    triton_moe,
)
from sgl_kernel_rocm.moe.align import align_tokens  # noqa: E402
from sgl_kernel_rocm.moe.routing import softmax_topk  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

LAYOUTS = {"TP8": (256, 6144, 256), "EP8": (32, 6144, 2048)}  # experts, hidden, inter (GLM-5.2)
TOP_K = 8
TOKENS = (1, 4, 16, 64)
CONFIG = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 1}
_ALLOC = {"empty", "empty_strided", "new_empty", "new_empty_strided", "empty_like", "zeros",
          "full", "new_full", "new_zeros", "zeros_like", "full_like"}  # fmt: skip
_FREE = {"view", "reshape", "_unsafe_view", "as_strided", "alias", "t", "transpose", "expand",
         "slice", "select", "unsqueeze", "squeeze", "detach", "_reshape_alias", "lift_fresh",
         "permute", "split", "unbind"}  # fmt: skip


class OpCounter(TorchDispatchMode):
    """Counts device ops (would-be GPU launches), allocations and free views."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.allocs = 0
        self.fills = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in _ALLOC:
            self.allocs += 1
            if name not in ("empty", "empty_strided", "new_empty", "new_empty_strided",
                            "empty_like"):  # fmt: skip
                self.fills += 1  # a filled allocation is also a launch on a GPU
                self.ops.append(name)
        elif name not in _FREE:
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


class LaunchRecorder:
    """Stands in for a @triton.jit kernel: `kernel[grid](...)` records the launch."""

    def __init__(self, name: str, log: list[tuple[str, tuple]]):
        self.name, self.log = name, log

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.log.append((self.name, tuple(grid)))

        return launch


class SyncCounter:
    """Counts host syncs (Tensor.item / tolist / __int__ / __bool__) inside the call."""

    def __init__(self):
        self.n = 0
        self.saved = {}

    def __enter__(self):
        for attr in ("item", "tolist", "__int__", "__bool__", "__float__"):
            orig = getattr(torch.Tensor, attr)
            self.saved[attr] = orig

            def wrapped(t, *a, _orig=orig, **k):
                self.n += 1
                return _orig(t, *a, **k)

            setattr(torch.Tensor, attr, wrapped)
        return self

    def __exit__(self, *exc):
        for attr, orig in self.saved.items():
            setattr(torch.Tensor, attr, orig)


def inputs(layout: str, tokens: int, seed: int = 0):
    experts, hidden, inter = LAYOUTS[layout]
    gen = torch.Generator().manual_seed(seed)
    # Weight storage is allocated but never touched (the kernels are recorded, not run).
    w13 = torch.empty(experts, 2 * inter, hidden // 2, dtype=torch.uint8)
    s13 = torch.empty(experts, 2 * inter, hidden // 32, dtype=torch.uint8)
    w2 = torch.empty(experts, hidden, inter // 2, dtype=torch.uint8)
    s2 = torch.empty(experts, hidden, inter // 32, dtype=torch.uint8)
    x = torch.randn(tokens, hidden, generator=gen).to(torch.bfloat16)
    tw, ti = softmax_topk(torch.randn(tokens, experts, generator=gen), TOP_K, renormalize=True)
    return x, MoEWeights(w13, s13, w2, s2), tw, ti


def measure(layout: str, tokens: int, iters: int) -> dict:
    args = inputs(layout, tokens)
    shared = torch.randn(tokens, LAYOUTS[layout][1]).to(torch.bfloat16)
    launches: list[tuple[str, tuple]] = []
    saved = (_kernels.gate_up_swiglu_kernel, _kernels.down_kernel, _align_kernel.moe_align_kernel)
    _kernels.gate_up_swiglu_kernel = LaunchRecorder("gate_up_swiglu", launches)
    _kernels.down_kernel = LaunchRecorder("down+topk_sum", launches)
    _align_kernel.moe_align_kernel = LaunchRecorder("align", launches)
    exact = triton_moe._EXACT_ALIGN_ON_CPU
    triton_moe._EXACT_ALIGN_ON_CPU = False  # the GPU code path
    try:

        def call():
            return fused_moe_mxfp4(*args, backend="triton", path="unpack", config=CONFIG,
                                   shared_output=shared)  # fmt: skip

        with SyncCounter() as syncs, OpCounter() as ops:
            call()
        launch_log = list(launches)
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
    finally:
        _kernels.gate_up_swiglu_kernel, _kernels.down_kernel, _align_kernel.moe_align_kernel = saved
        triton_moe._EXACT_ALIGN_ON_CPU = exact
    # What the torch alignment (the path before, and still the reference) costs at this size.
    with OpCounter() as old_align:
        align_tokens(args[3], LAYOUTS[layout][0], CONFIG["BLOCK_M"], exact=False)
    return {
        "layout": layout,
        "tokens": tokens,
        "triton_launches": [f"{n} grid={g}" for n, g in launch_log],
        "torch_device_ops": ops.ops,
        "launches_total": len(launch_log) + len(ops.ops),
        "allocations": ops.allocs,
        "host_syncs": syncs.n,
        "host_us_per_call_median": round(statistics.median(times) * 1e6, 1),
        "torch_align_device_ops_replaced": len(old_align.ops),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path("docs/results/moe-host-work"))
    p.add_argument("--iters", type=int, default=200)
    args = p.parse_args()
    rows = [measure(lay, t, args.iters) for lay in LAYOUTS for t in TOKENS]
    hdr = f"{'layout':6} {'tok':>4} {'launches':>8} {'allocs':>6} {'syncs':>5} {'host us':>8}"
    print(hdr + "  (torch align it replaces: device ops)")
    for r in rows:
        print(f"{r['layout']:6} {r['tokens']:>4} {r['launches_total']:>8} {r['allocations']:>6} "
              f"{r['host_syncs']:>5} {r['host_us_per_call_median']:>8}  "
              f"({r['torch_align_device_ops_replaced']})")  # fmt: skip
    print("launches:", "; ".join(rows[0]["triton_launches"] + rows[0]["torch_device_ops"]))
    meta = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "hardware": f"{os.cpu_count()}-core {platform.machine()} CPU, no GPU (host work only)",
        "load_avg_1m": round(os.getloadavg()[0], 1),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "triton": triton.__version__,
        },  # fmt: skip
        "config": {
            "top_k": TOP_K,
            "launch_config": CONFIG,
            "layouts": LAYOUTS,
            "activations": "bf16, W4A16, unpack path, shared_output given",
            "iters": args.iters,
        },  # fmt: skip
        "method": __doc__.split("\n\n")[1].replace("\n", " "),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "moe_host_work.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
