"""Decode-attention microbenchmark: batch x context sweep for the GQA and MLA paged kernels.

Reports achieved GB/s (KV bytes + q/out) against measured device copy bandwidth, and time
ratios against a vectorized torch baseline (gather + matmul in the cache dtype) and against
SGLang's own Triton decode kernel where it imports. Writes JSON + PNG under --out.

    python benchmark/kernels/bench_decode_attention.py --quick     # CPU, Triton interpreter
    python benchmark/kernels/bench_decode_attention.py             # GPU sweep 1k-32k, incl. 20k
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

if not torch.cuda.is_available():
    # Kernels only run on CPU through the interpreter; must be set before they import.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
from sgl_kernel_rocm.arch import current_arch  # noqa: E402
from sgl_kernel_rocm.attention import gqa_decode, mla_decode  # noqa: E402
from timing import copy_bandwidth, time_fn  # noqa: E402

GQA = {"hq": 64, "hkv": 8, "d": 128}  # GLM-4.5-style GQA group of 8 at head_dim 128
MLA = {"h": 64, "d": 576}  # GLM-5: 64 heads, latent 512 + rope 64
PAGE = 64


def _paged(batch: int, ctx: int, entry: tuple[int, ...], dtype: torch.dtype, device: str):
    pages = -(-ctx // PAGE)
    cache = torch.randn(batch * pages, PAGE, *entry, device=device).to(dtype)
    bt = torch.randperm(batch * pages, device=device).view(batch, pages).to(torch.int32)
    seq = torch.full((batch,), ctx, dtype=torch.int32, device=device)
    return cache, bt, seq


def torch_gqa_baseline(q, k, v, bt, seq):
    """Vectorized torch decode (equal lengths): gather pages, matmul, softmax, matmul."""
    b, hq, d = q.shape
    hkv = k.shape[2]
    ctx = int(seq[0])
    kk = k[bt.long()].flatten(1, 2)[:, :ctx].to(q.dtype)  # [B, ctx, Hkv, D]
    vv = v[bt.long()].flatten(1, 2)[:, :ctx].to(q.dtype)
    qg = q.view(b, hkv, hq // hkv, d)
    s = torch.einsum("bhgd,bnhd->bhgn", qg, kk).float() * d**-0.5
    return torch.einsum("bhgn,bnhd->bhgd", s.softmax(-1).to(q.dtype), vv).reshape(b, hq, d)


def torch_mla_baseline(q, kv, bt, seq):
    ctx = int(seq[0])
    c = kv[bt.long()].flatten(1, 2)[:, :ctx].to(q.dtype)  # [B, ctx, 576]
    s = torch.einsum("bhd,bnd->bhn", q, c).float() * 256**-0.5
    return torch.einsum("bhn,bnd->bhd", s.softmax(-1).to(q.dtype), c[..., :512])


def sglang_gqa_fn(q, k, v, bt, seq) -> Callable[[], Any] | str:
    """SGLang's Triton decode kernel on the same (page-size-1 flattened) cache, or why not."""
    try:
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
    except Exception as exc:  # optional comparison: record why it is missing
        return f"unavailable: {type(exc).__name__}: {exc}"[:200]
    b, hq, d = q.shape
    hkv = k.shape[2]
    ctx = int(seq[0])
    k_tok, v_tok = k.view(-1, hkv, d), v.view(-1, hkv, d)
    tok = (bt.long()[:, :, None] * PAGE + torch.arange(PAGE, device=q.device)).flatten(1)
    kv_indices = tok[:, :ctx].reshape(-1).to(torch.int32)
    kv_indptr = torch.arange(0, (b + 1) * ctx, ctx, device=q.device, dtype=torch.int32)
    splits = 8
    logits = torch.empty(b, hq, splits, d, dtype=torch.float32, device=q.device)
    lse = torch.empty(b, hq, splits, dtype=torch.float32, device=q.device)
    nsplit = torch.full((b,), splits, dtype=torch.int32, device=q.device)
    o = torch.empty_like(q)

    def run():
        decode_attention_fwd(
            q,
            k_tok,
            v_tok,
            o,
            kv_indptr,
            kv_indices,
            logits,
            lse,
            nsplit,
            splits,
            d**-0.5,
            1.0,
            1.0,
        )

    try:
        run()
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {exc}"[:200]
    return run


def bench_case(
    op: str, batch: int, ctx: int, kv_dtype: torch.dtype, device: str, iters: int, with_sglang: bool
) -> dict[str, Any]:
    qdt = torch.bfloat16
    if op == "gqa":
        k, bt, seq = _paged(batch, ctx, (GQA["hkv"], GQA["d"]), kv_dtype, device)
        v = torch.randn_like(k, dtype=torch.float32).to(kv_dtype)
        q = torch.randn(batch, GQA["hq"], GQA["d"], device=device, dtype=qdt)
        ours = lambda: gqa_decode(q, k, v, bt, seq)  # noqa: E731
        base = lambda: torch_gqa_baseline(q, k, v, bt, seq)  # noqa: E731
        kv_bytes = 2 * batch * ctx * GQA["hkv"] * GQA["d"] * k.element_size()
        io_bytes = 2 * q.numel() * q.element_size()
    else:
        kv, bt, seq = _paged(batch, ctx, (MLA["d"],), kv_dtype, device)
        q = torch.randn(batch, MLA["h"], MLA["d"], device=device, dtype=qdt)
        ours = lambda: mla_decode(q, kv, bt, seq)  # noqa: E731
        base = lambda: torch_mla_baseline(q, kv, bt, seq)  # noqa: E731
        kv_bytes = batch * ctx * MLA["d"] * kv.element_size()
        io_bytes = q.numel() * q.element_size() + batch * MLA["h"] * 512 * 2
    sec = time_fn(ours, device, iters)
    row: dict[str, Any] = {
        "op": op,
        "batch": batch,
        "context": ctx,
        "kv_dtype": str(kv_dtype).split(".")[-1],
        "us": sec * 1e6,
        "gbps": (kv_bytes + io_bytes) / sec / 1e9,
        "torch_us": time_fn(base, device, iters) * 1e6,
    }
    row["speedup_vs_torch"] = row["torch_us"] / row["us"]
    if op == "gqa" and with_sglang and kv_dtype != torch.float8_e4m3fn:
        fn = sglang_gqa_fn(q, k, v, bt, seq)
        if isinstance(fn, str):
            row["sglang_triton"] = fn
        else:
            row["sglang_us"] = time_fn(fn, device, iters) * 1e6
            row["speedup_vs_sglang"] = row["sglang_us"] / row["us"]
    return row


def environment(device: str, copy_gbps: float) -> dict[str, Any]:
    if device == "cuda":
        hw = torch.cuda.get_device_name(0)
    else:
        from sglang_mx.measure.stamp import host_cpu

        hw = f"{host_cpu()}, Triton interpreter"
    try:
        import sglang

        sgl_version = sglang.__version__
    except Exception:
        sgl_version = None
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "hardware": hw,
        "arch": current_arch(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "triton": triton.__version__,
        "sglang": sgl_version,
        "copy_gbps": copy_gbps,
        "page_size": PAGE,
        "gqa_shape": GQA,
        "mla_shape": MLA,
    }


def plot(rows: list[dict[str, Any]], copy_gbps: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({r["op"] for r in rows})
    fig, axes = plt.subplots(1, len(ops), figsize=(6 * len(ops), 4), squeeze=False)
    for ax, op in zip(axes[0], ops, strict=True):
        for key in sorted({(r["batch"], r["kv_dtype"]) for r in rows if r["op"] == op}):
            pts = [r for r in rows if r["op"] == op and (r["batch"], r["kv_dtype"]) == key]
            ax.plot(
                [p["context"] for p in pts],
                [p["gbps"] for p in pts],
                marker="o",
                label=f"batch {key[0]} {key[1]}",
            )
        ax.axhline(copy_gbps, color="k", ls="--", label="measured copy")
        ax.axhline(0.7 * copy_gbps, color="gray", ls=":", label="70% of copy")
        ax.set(xscale="log", xlabel="context tokens", ylabel="GB/s", title=f"{op} decode")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sweep (CPU interpreter friendly)")
    ap.add_argument("--out", type=Path, default=Path("benchmark/results"))
    ap.add_argument("--ops", default="gqa,mla")
    ap.add_argument("--no-sglang", action="store_true", help="skip SGLang's Triton kernel")
    args = ap.parse_args(argv)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.quick:
        batches, contexts, iters, copy_mb = [1, 2], [256, 1024], 2, 64
    else:
        batches, contexts = [1, 8, 32, 64], [1024, 4096, 8192, 20000, 32768]
        iters, copy_mb = 20, 1024
    dtypes = [torch.bfloat16, torch.float8_e4m3fn]
    copy_gbps = copy_bandwidth(device, copy_mb << 20, max(3, iters))
    rows = []
    for op in args.ops.split(","):
        for kv_dtype in dtypes:
            for batch in batches:
                for ctx in contexts:
                    row = bench_case(op, batch, ctx, kv_dtype, device, iters, not args.no_sglang)
                    row["pct_of_copy"] = 100 * row["gbps"] / copy_gbps
                    rows.append(row)
                    extra = (
                        f"{row['speedup_vs_sglang']:6.2f}x"
                        if "speedup_vs_sglang" in row
                        else "   n/a"
                    )
                    print(
                        f"{op:4} {row['kv_dtype']:14} b={batch:3} ctx={ctx:6} "
                        f"{row['us']:11.1f} us {row['gbps']:9.2f} GB/s "
                        f"{row['pct_of_copy']:6.1f}% copy  "
                        f"vs torch {row['speedup_vs_torch']:6.2f}x"
                        f"  vs sglang {extra}",
                        flush=True,
                    )
    meta = environment(device, copy_gbps)
    meta["config"] = {"quick": args.quick, "batches": batches, "contexts": contexts, "iters": iters}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"decode_attention_{meta['arch']}{'_quick' if args.quick else ''}"
    (args.out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    plot(rows, copy_gbps, args.out / f"{stem}.png")
    print(f"copy bandwidth {copy_gbps:.2f} GB/s; wrote {args.out / stem}.json/.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
