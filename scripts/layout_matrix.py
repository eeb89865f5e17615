"""Serve every production layout of the suite (sglang_mx_lab.testing.layout_serving) on this
box, plus a TP1 bf16-KV server for the FP8 KV quality column, and write what was measured:
docs/results/layout-matrix-cpu.json and the table in docs/layouts.md (between its markers).

    .venv/bin/python scripts/layout_matrix.py   # ~10 min on 2 cores

The table is generated from this run, never typed: configuration, what SGLang resolved, whether
it served, greedy equality with its TP1 reference, accept length, drafts in output / proposed,
and (for the FP8 reference) KL / top-1 against the bf16 KV cache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from sglang_mx.measure.stamp import stamp  # noqa: E402
from sglang_mx.seam.cpu_binding import BIND_ENV  # noqa: E402
from sglang_mx_lab.testing import layout_serving as L  # noqa: E402
from sglang_mx_lab.testing.server import default_serve_args, start_servers  # noqa: E402

BEGIN, END = "<!-- layout-matrix:begin -->", "<!-- layout-matrix:end -->"


def measure() -> dict:
    model, base = default_serve_args()
    env = {k: v for k, v in os.environ.items() if k != BIND_ENV}
    lays = L.layouts()
    bf16 = L.Layout("tp1-bf16kv", tuple(L.F32), None, "TP1, bf16 KV (the FP8 KL reference)")
    specs = [(model, [*base, *lay.args], env, None) for lay in [*lays, bf16]]
    handles = start_servers(specs, timeout=1200)
    try:
        pairs = list(zip(lays, handles[: len(lays)], strict=True))
        served = {lay.name: L.serve_prompts(h.base_url) for lay, h in pairs}
        infos = {lay.name: L.effective(L.server_info(h.base_url)) for lay, h in pairs}
        quality = _fp8_quality(handles[-1].base_url, handles[0].base_url)
    finally:
        for h in handles:
            h.stop(wait=False)
    rows = []
    for lay in lays:
        s = served[lay.name]
        ref = served[lay.reference] if lay.reference else None
        rows.append({
            "layout": lay.name,
            "about": lay.about,
            "args": list(lay.args),
            "resolved": infos[lay.name],
            "substitutions": [vars(x) for x in lay.substitutions],
            "served": True,
            "reference": lay.reference,
            "greedy_equal": None if ref is None else s.outputs == ref.outputs,
            "accept_length": s.accept_length,
            "kept_drafts": s.kept_drafts if s.verify_steps else None,
            "correct_drafts": s.correct_drafts,
            "proposed_drafts": s.proposed_drafts,
            "fp8_vs_bf16": quality if lay.name == "tp1-fp8kv" else None,
        })  # fmt: skip
    config = {"prompts": len(L.PROMPTS), "new_tokens": L.NEW_TOKENS, "model": "tiny-glm5-quark"}
    return {"stamp": stamp(config=config), "rows": rows}


def _fp8_quality(bf16_url: str, fp8_url: str) -> dict:
    """KL(bf16 KV || FP8 KV) and top-1 agreement of the TP1 servers (testing/kv_quality.py)."""
    from sglang_mx_lab.testing import kv_quality

    model, _ = default_serve_args()
    rows = kv_quality.kv_quality(bf16_url, fp8_url, kv_quality.prompt_token_ids(model), 2048)
    return kv_quality.summary(rows)


def table(result: dict) -> str:
    s = result["stamp"]
    head = (
        f"Measured {s.get('date', '')} on {s.get('hardware', s.get('host', ''))}, commit "
        f"{s.get('commit', 'unknown')}, {result['stamp'].get('versions', {})}; "
        f"{L.NEW_TOKENS} greedy tokens x {len(L.PROMPTS)} prompts per layout "
        "(`scripts/layout_matrix.py`).\n\n"
    )
    lines = [
        "| layout | resolved | served | greedy = reference | accept length | drafts in output |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        res = ", ".join(f"{k} {v}" for k, v in r["resolved"].items() if v not in (None, 1))
        eq = "-" if r["greedy_equal"] is None else ("yes" if r["greedy_equal"] else "**no**")
        acc = "-" if r["accept_length"] is None else f"{r['accept_length']:.2f}"
        kept = f"{r['kept_drafts']} / {r['proposed_drafts']}" if r["proposed_drafts"] else "-"
        lines.append(f"| `{r['layout']}` | {res} | yes | {eq} | {acc} | {kept} |")
    q = next((r["fp8_vs_bf16"] for r in result["rows"] if r["fp8_vs_bf16"]), None)
    tail = "\n"
    if q:
        tail = (
            f"\n\nFP8 KV against bf16 KV at TP1 (float32, testing/kv_quality.py): prefill KL "
            f"{q['prefill_kl_mean']:.2e} nats, top-1 {q['prefill_top1']:.3f}; decode KL "
            f"{q['decode_kl_mean']:.2e}, top-1 {q['decode_top1']:.3f}; greedy equal on "
            f"{q['greedy_equal']:.0%} of prompts.\n"
        )
    return head + "\n".join(lines) + tail


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default=str(ROOT / "docs/results/layout-matrix-cpu.json"))
    p.add_argument("--doc", default=str(ROOT / "docs/layouts.md"))
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    result = measure()
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    doc = Path(args.doc)
    text = doc.read_text()
    body = f"{BEGIN}\n{table(result)}{END}"
    doc.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), body, text, flags=re.S))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
