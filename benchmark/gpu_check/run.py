"""GPU check of sgl_kernel_rocm at GLM-5.2's decode shapes, in one time budget.

    python benchmark/gpu_check/run.py --budget-s 330 --out OUT [--docs DOCS]   # on the GPU
    python benchmark/gpu_check/run.py --dry-run --out /tmp/x                   # CPU, tiny shapes

Plans every case with a time estimate (plan.py), trims the plan to the budget by priority
(correctness first, then the headline shapes), measures copy bandwidth, then runs the cases,
skipping what the clock no longer allows. Writes gpu_check.json and gpu_check.md under --out and,
with --docs, results/gpu-check-<arch>.json and gpu-check-results.md there (docs/gpu-check.md);
with --profile P (scripts/gpu_check.sh's GPU_CHECK_PROFILE), results/gpu-check-<arch>-P.json
and gpu-check-results-P.md; --kinds keeps only the case kinds named.
Needs torch + triton only (no sglang).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import entry  # noqa: E402 - a sibling module, importable once HERE is on the path


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--docs", type=Path, default=None, help="also write the results there")
    p.add_argument("--bf16-moe", default=os.environ.get("GPU_CHECK_BF16_MOE"),
                   help="name of the bf16-weight MoE in sgl_kernel_rocm.moe")  # fmt: skip
    p.add_argument("--plan-only", action="store_true", help="print the trimmed plan and exit")
    p.add_argument("--kinds", default=os.environ.get("GPU_CHECK_KINDS") or None,
                   help="comma list of case kinds to keep (check_moe,check_moe_ep,moe,moe_bf16:"
                        " issue 21's MoE measurement); default every kind")  # fmt: skip
    p.add_argument("--profile", default=os.environ.get("GPU_CHECK_PROFILE") or "",
                   help="gpu_check.sh's profile (moe, attention) this run is: tags the results"
                        " and picks the targets tables; empty for the whole check")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = entry.parse(__doc__, 330.0, argv, _flags)
    import plan as P

    t_start = time.time()
    full = P.build_plan(dry=args.dry_run)
    if args.kinds:
        kinds = set(args.kinds.split(","))
        unknown = kinds - {c.kind for c in full}
        if unknown:
            print(f"--kinds: no case of kind {sorted(unknown)} in the plan")
            return 2
        full = [c for c in full if c.kind in kinds]
    # Setup (imports, copy bandwidth) and the report take ~20 s of the budget.
    kept, dropped = P.trim(full, max(0.0, args.budget_s - 20))
    print(
        f"plan: {len(full)} cases, est {P.estimate(full):.0f}s; kept {len(kept)} "
        f"(est {P.estimate(kept):.0f}s of {args.budget_s:.0f}s), dropped {len(dropped)}"
    )
    for c in dropped:
        print(f"  dropped (budget): {c.name}")
    import predict as PR  # cost-model predictions per row, before the run

    PR.print_plan(kept)
    if args.plan_only:
        return 0

    import attention as A
    import measure as M
    import moe as MO
    import provenance as PV
    import torch
    import triton
    from sgl_kernel_rocm.arch import current_arch

    gpu = M.on_gpu()
    if not gpu and not args.dry_run:
        print("no CUDA device: run with --dry-run on a CPU")
        return 2
    arch = current_arch() if gpu else "cpu"
    copy = M.copy_gbps()
    bw = copy["best_gbps"]
    print(f"arch {arch}; copy bandwidth {bw:.0f} GB/s (best), {copy['median_gbps']:.0f} median")
    mma = M.mma_tflops() if any(c.kind in ("mla", "dsa") for c in kept) else {"best_tflops": 0.0}
    peak = mma["best_tflops"]
    print(f"bf16 MMA roof {peak:.0f} TFLOP/s (best of torch matmuls, 8192^3)")
    bf16_name, bf16_fn = MO.find_bf16_moe(args.bf16_moe)
    if bf16_name is None:
        print(f"bf16-weight MoE: skipped ({bf16_fn})")

    rows: list[dict[str, Any]] = []
    deadline = t_start + args.budget_s - 10
    for case in kept:
        row: dict[str, Any] = {"case": case.name, "kind": case.kind, **case.params}
        if time.time() + case.est_s > deadline:
            row["status"] = "skipped: budget"
            rows.append(row)
            print(f"{case.name}: skipped (budget)")
            continue
        t0 = time.time()
        try:
            row.update(_run_case(case, A, M, MO, (bw, peak), bf16_name, bf16_fn))
            row.setdefault("status", "ok")
        except Exception as exc:  # noqa: BLE001 - one failed case must not end the check
            row["status"] = f"error: {type(exc).__name__}: {str(exc)[:300]}"
            traceback.print_exc()
        finally:
            if gpu:
                torch.cuda.empty_cache()
        row["wall_s"] = round(time.time() - t0, 2)
        rows.append(row)
        print(_line(row), flush=True)

    report = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "dry_run": args.dry_run,
        "arch": arch,
        "gpu": torch.cuda.get_device_name(0) if gpu else platform.processor() or "cpu",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "triton": triton.__version__,
        },  # fmt: skip
        "copy": copy,
        "mma": mma,
        "profile": args.profile,
        "kinds": args.kinds,
        "budget_s": args.budget_s,
        "elapsed_s": round(time.time() - t_start, 1),
        "plan": {
            "cases": len(full),
            "kept": len(kept),
            "est_s": round(P.estimate(kept), 1),
            "dropped": [c.name for c in dropped],
        },  # fmt: skip
        "bf16_moe": bf16_name or f"skipped: {bf16_fn}",
        **PV.stamp(),
        "rows": rows,
    }
    report["vs_predicted"] = PR.compare(rows, arch)  # measured / predicted per row + median
    _write(report, args.out, args.docs)
    bad = [r for r in rows if r["kind"].startswith("check") and r.get("status") != "ok"]
    print(f"done in {report['elapsed_s']}s; {len(bad)} correctness case(s) not ok")
    return 1 if bad else 0


def _run_case(case, A, M, MO, roofs: tuple[float, float], bf16_name, bf16_fn) -> dict[str, Any]:
    p = dict(case.params)
    bw, peak = roofs
    kind = case.kind
    if kind == "check_moe":
        out, ref = MO.moe_case(p)["check"]()
        res = MO.check_moe(out, ref)
        return {"status": "ok" if res["ok"] else "MISMATCH", **res}
    if kind == "check_moe_ep":
        c = MO.moe_ep_case(p)
        res = MO.check_moe_ep(*c["check"](), c["masked"])
        return {"status": "ok" if res["ok"] else "MISMATCH", **res}
    if kind in ("check_mla", "check_dsa"):
        out, ref = A.mla_case({**p, "kind": kind[6:]})["check"]()
        res = A.check_attention(out, ref)
        return {"status": "ok" if res["ok"] else "MISMATCH", **res}
    if kind == "check_indexer":
        out, ref = A.indexer_case(p)["check"]()
        res = A.check_scores(out, ref)
        return {"status": "ok" if res["ok"] else "MISMATCH", **res}
    if kind in ("mla", "dsa", "indexer", "indexer_scores", "indexer_topk", "indexer_topk_radix"):
        make = A.indexer_case if kind.startswith("indexer") else A.mla_case
        c = make({**p, "kind": kind})
        t, how = M.kernel_time_s(c["fn"])
        row = _bw_row(t, c["bytes"], bw, how, copies=c["copies"], **c.get("extra", {}),
                      **_roofline(t, c["bytes"], c["flops"], bw, peak))  # fmt: skip
        if row.get("selection_ok") is False:  # a top-k that picks other scores than torch's
            row["status"] = "MISMATCH"
        return row
    if kind in ("moe", "moe_nosplit"):
        c = MO.moe_case(p, split=kind == "moe")
        t, how = M.kernel_time_s(c["fn"])
        split = M.kernel_split_s(c["fn"])
        return _moe_row(t, how, split, c, bw)
    if kind == "moe_bf16":
        if bf16_name is None:
            return {"status": f"skipped: {bf16_fn}"}
        c = MO.moe_bf16_case(p, bf16_fn)
        t, how = M.kernel_time_s(c["fn"])
        split = M.kernel_split_s(c["fn"])
        return {"impl": bf16_name, **_moe_row(t, how, split, c, bw)}
    raise ValueError(f"unknown case kind {kind}")


def _bw_row(t: float, nbytes: float, bw: float, how: str, **extra) -> dict[str, Any]:
    gbps = nbytes / t / 1e9 if t > 0 else 0.0
    return {"us": round(t * 1e6, 2), "gbytes": nbytes / 1e9, "gbps": round(gbps, 1),
            "frac_copy": round(gbps / bw, 3) if bw else None, "timing": how, **extra}  # fmt: skip


def _roofline(t: float, nbytes: float, flops: float, bw: float, peak: float) -> dict[str, Any]:
    """TFLOP/s, and the fraction of roofline time max(bytes / copy, FLOPs / MMA roof) the row
    reached, with the term that binds (what FlashMLA reports; issue 22's metric)."""
    if t <= 0 or not bw:
        return {"tflops": round(flops / t / 1e12, 2) if t > 0 else 0.0}
    mem_s = nbytes / (bw * 1e9)
    mma_s = flops / (peak * 1e12) if peak else 0.0
    roof = max(mem_s, mma_s)
    return {"tflops": round(flops / t / 1e12, 2), "frac_roofline": round(roof / t, 3),
            "bound": "compute" if mma_s > mem_s else "memory"}  # fmt: skip


def _moe_row(t: float, how: str, split: dict, c: dict, bw: float) -> dict[str, Any]:
    wb = c["bytes"]
    row = _bw_row(t, wb["gate_up"] + wb["down"], bw, how)
    row["experts_per_call"] = round(c["experts_per_call"], 1)
    for part in ("gate_up", "down"):
        ts = split.get(part)
        if ts:
            g = wb[part] / ts / 1e9
            row[f"{part}_us"] = round(ts * 1e6, 2)
            row[f"{part}_frac_copy"] = round(g / bw, 3) if bw else None
    if split:
        row["other_us"] = round(split.get("other", 0.0) * 1e6, 2)
        row["kernels"] = split.get("kernels", {})
    return row


def _line(r: dict[str, Any]) -> str:
    bits = [r["case"], r.get("status", "")]
    for k in ("us", "gbps", "frac_copy", "tflops", "frac_roofline", "gate_up_us",
              "gate_up_frac_copy", "down_us", "down_frac_copy", "rel_l2", "max_abs_err",
              "wall_s"):  # fmt: skip
        if r.get(k) is not None:
            bits.append(f"{k}={r[k]}")
    return "  ".join(str(b) for b in bits)


def markdown(report: dict[str, Any]) -> str:
    """The results page: header naming hardware/versions/date, then one table per kind."""
    h = report

    def mark(kinds) -> str:  # which run a section's figures come from (provenance.py)
        present = [k for k in dict.fromkeys(r["kind"] for r in h["rows"]) if k in kinds]
        return f"<!-- gpu-figures: results/gpu-check-{_tag(h)}.json kinds={','.join(present)} -->"

    lines = [
        f"# GPU check results ({h['arch']}{', DRY RUN on CPU: numbers mean nothing' if h['dry_run'] else ''})",  # noqa: E501
        "",
        mark({r["kind"] for r in h["rows"]}),
        f"Generated by `scripts/gpu_check.sh` (benchmark/gpu_check/run.py) on {h['date']}: "
        f"{h['gpu']}, torch {h['versions']['torch']}, Triton {h['versions']['triton']}, Python "
        f"{h['versions']['python']}, commit `{h.get('commit') or 'unknown'}`. Copy bandwidth "
        f"measured in the same run: {h['copy']['best_gbps']:.0f} GB/s (best of 20, 1 GiB "
        f"device-to-device, read + write counted); bf16 MMA roof "
        f"{h.get('mma', {}).get('best_tflops', 0):.0f} TFLOP/s (torch matmul 8192^3). Times are "
        f"kernel-only medians from CUDA-graph "
        f"replays (`triton.testing.do_bench_cudagraph`); the MoE gate_up / down split is device "
        f"time from the profiler over eager calls. Fractions are of that copy bandwidth; "
        f"frac_roofline is max(bytes / copy, FLOPs / MMA roof) / time. Budget "
        f"{h['budget_s']:.0f} s, used {h['elapsed_s']} s; {len(h['plan']['dropped'])} planned "
        f"case(s) dropped to fit. bf16-weight MoE: {h['bf16_moe']}.",
        "",
    ]
    groups = [
        ("Correctness at GLM-5.2 shapes (shipped tables)", ("check_",),
         ["case", "status", "rel_l2", "max_abs_err", "tol", "masked_tokens"]),
        ("MoE W4A16 (MXFP4 weights), per GPU", ("moe",),
         ["layout", "tokens", "experts_per_call", "us", "frac_copy", "gate_up_us",
          "gate_up_frac_copy", "down_us", "down_frac_copy", "other_us", "status"]),
        ("MoE W4A16 without split-K (shipped tile, SPLIT_K / SPLIT_K_DOWN dropped)",
         ("moe_nosplit",),
         ["layout", "tokens", "us", "frac_copy", "gate_up_us", "down_us", "status"]),
        ("MoE bf16 weights (same kernel family), per GPU", ("moe_bf16",),
         ["layout", "tokens", "impl", "us", "frac_copy", "gate_up_us", "down_us", "status"]),
        ("MLA decode, FP8 latent (512 + 64)", ("mla",),
         ["mode", "heads", "batch", "ctx", "variant", "us", "gbps", "frac_copy", "tflops",
          "frac_roofline", "bound", "status"]),
        ("DSA sparse decode, FP8 latent, 2,048 selected keys", ("dsa",),
         ["mode", "heads", "batch", "ctx", "variant", "us", "gbps", "frac_copy", "tflops",
          "frac_roofline", "bound", "status"]),
        ("DSA indexer (32 heads x 128, FP8 keys) + top-k", ("indexer",),
         ["batch", "ctx", "us", "gbps", "frac_copy", "tflops", "status"]),
        ("DSA indexer score kernel alone (indexer_scores)", ("indexer_scores",),
         ["batch", "ctx", "us", "gbps", "frac_copy", "tflops", "frac_roofline", "status"]),
        ("DSA indexer top-k alone (torch.topk over the scores)", ("indexer_topk",),
         ["batch", "ctx", "us", "gbps", "frac_copy", "status"]),
        ("DSA indexer top-k alone, radix select (topk_radix.py)", ("indexer_topk_radix",),
         ["batch", "ctx", "us", "gbps", "frac_copy", "selection_ok", "status"]),
    ]  # fmt: skip
    profile = h.get("profile", "")
    if not profile:
        targets = _targets(h["rows"])
        lines += targets[:1] + [mark({"moe", "moe_bf16", "mla", "dsa"})] + targets[1:]
    if profile in ("", "attention"):
        targets = _targets_22(h["rows"])
        lines += targets[:1] + [mark({"mla", "dsa", "indexer_scores"})] + targets[1:]
    for title, prefixes, cols in groups:
        rows = [r for r in h["rows"]
                if any(r["kind"] == p or (p.endswith("_") and r["kind"].startswith(p))
                       for p in prefixes)]  # fmt: skip
        if not rows:
            continue
        lines += [f"## {title}", mark({r["kind"] for r in rows}), "",
                  "| " + " | ".join(cols) + " |",
                  "|" + "---|" * len(cols)]  # fmt: skip
        for r in rows:
            lines.append("| " + " | ".join(_cell(r.get(c)) for c in cols) + " |")
        lines.append("")
    return "\n".join(lines)


def _targets(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 13's GPU targets, read off this run's rows (blank where a row is missing)."""

    def ok(r):
        return r.get("status") == "ok" and r.get("frac_copy") is not None

    moe = [r for r in rows if r["kind"] == "moe" and ok(r) and r["tokens"] <= 64]
    attn = [r for r in rows if r["kind"] in ("mla", "dsa") and ok(r)
            and r["ctx"] >= 20000 and r["batch"] >= 32]  # fmt: skip
    ratios = []
    for r in rows:
        if r["kind"] == "moe_bf16" and r.get("status") == "ok" and r["tokens"] <= 16:
            w4 = [x for x in rows if x["kind"] == "moe" and x.get("status") == "ok"
                  and x["layout"] == r["layout"] and x["tokens"] == r["tokens"]]  # fmt: skip
            if w4 and w4[0].get("us"):
                ratios.append(r["us"] / w4[0]["us"])

    def span(vals, fmt):
        return f"{fmt.format(min(vals))} - {fmt.format(max(vals))}" if vals else "not measured"

    return [
        "## Against issue 13's targets",
        "",
        "| target | this run |",
        "|---|---|",
        f"| MoE W4A16 at <= 64 tokens >= 70% of copy bandwidth (goal 85%) | "
        f"{span([r['frac_copy'] for r in moe], '{:.0%}')} |",
        f"| W4A16 >= 3x our bf16-weight kernel at <= 16 tokens | {span(ratios, '{:.2f}x')} |",
        f"| decode attention at 20k context, batch >= 32, >= 70% of copy bandwidth | "
        f"{span([r['frac_copy'] for r in attn], '{:.0%}')} |",
        "",
    ]


def _targets_22(rows: list[dict[str, Any]]) -> list[str]:
    """Issue 22's H200 targets (decode attention), read off this run's rows."""

    def pick(kind, key, **want):  # the shipped tables' rows (a tile variant is not shipped)
        return [r[key] for r in rows if r["kind"] == kind and r.get("status") == "ok"
                and r.get(key) is not None and "variant" not in r
                and all(f(r.get(k)) for k, f in want.items())]  # fmt: skip

    def span(vals, fmt):
        return f"{fmt.format(min(vals))} - {fmt.format(max(vals))}" if vals else "not measured"

    big = {"batch": lambda b: b is not None and b >= 32}
    long = {"ctx": lambda c: c is not None and c >= 20000}
    return [
        "## Against issue 22's targets (H200)",
        "",
        "| target | this run |",
        "|---|---|",
        "| MLA, 8 heads, batch >= 32, 20k context: >= 70% of copy (goal 85%) | "
        f"{span(pick('mla', 'frac_copy', heads=lambda h: h == 8, **big, **long), '{:.0%}')} |",
        "| MLA, 64 heads, batch >= 32: >= 50% of roofline time | "
        f"{span(pick('mla', 'frac_roofline', heads=lambda h: h == 64, **big), '{:.0%}')} |",
        "| DSA decode, batch >= 32: >= 50% of copy | "
        f"{span(pick('dsa', 'frac_copy', **big), '{:.0%}')} |",
        "| DSA decode, batch 1: <= 8 us | "
        f"{span(pick('dsa', 'us', batch=lambda b: b == 1), '{:.1f} us')} |",
        "| indexer_scores, batch >= 32, 20k context: >= 60% of copy | "
        f"{span(pick('indexer_scores', 'frac_copy', **big, **long), '{:.0%}')} |",
        "",
    ]


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v).replace("|", "/")


def _tag(report: dict[str, Any]) -> str:
    """The results' file tag: the arch, plus the profile when it is not the whole check."""
    profile = report.get("profile", "")
    return f"{report['arch']}-{profile}" if profile else report["arch"]


def _write(report: dict[str, Any], out: Path, docs: Path | None) -> None:
    tag = _tag(report)
    profile = report.get("profile", "")
    md_name = f"gpu-check-results-{profile}.md" if profile else "gpu-check-results.md"
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "gpu_check.md").write_text(markdown(report) + "\n")
    if docs is not None:
        (docs / "results").mkdir(parents=True, exist_ok=True)
        (docs / "results" / f"gpu-check-{tag}.json").write_text(
            json.dumps(report, indent=1, default=str) + "\n"
        )
        (docs / md_name).write_text(markdown(report) + "\n")
    print(
        f"wrote {out / 'gpu_check.json'}, {out / 'gpu_check.md'}"
        + (f" and {docs}/{md_name}, {docs}/results/gpu-check-{tag}.json" if docs else "")
    )


if __name__ == "__main__":
    sys.exit(main())
