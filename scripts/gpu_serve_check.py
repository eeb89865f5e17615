"""The serving check's driver (run by scripts/gpu_serve_check.sh): start `sglang-mx serve`'s
default model with CUDA graphs on, send the serving probe (sglang_mx_lab.testing.serve_probe),
measure decode speed, send the hostile set, then restart with graphs off and measure again;
write one JSON record. Exit 1 on any failure (the record says which).

  python scripts/gpu_serve_check.py --out docs/results/gpu-serve-sm90.json [--site /tmp/site]
  python scripts/gpu_serve_check.py --out /tmp/gpu-serve-cpu.json --dry-run   # CPU platform
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata as md
import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parents[1]
GRAPH_LINE = re.compile(r"Decode batch.*?(cuda|cpu) graph: (True|False)")
CAPTURE_LINE = re.compile(r"Capture .*? end\. bs=(\[[^\]]*\])")
GRAPHS_OFF_MIN_S = 75.0  # a second server start and its speed runs on the H200 (estimate)
PLATFORM_LINE = re.compile(r"sglang_mx platform (mx_cuda) active")


def write_entry_points(site: Path) -> Path:
    """A dist-info for sglang-mx in `site` with pyproject's entry points, so SGLang discovers
    our plugin and platforms while the package itself is imported from the checkout."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = site / f"sglang_mx-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: sglang-mx\nVersion: {project['version']}\n"
    )
    lines = []
    for group, eps in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in eps.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return info


def versions() -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"python": platform.python_version()}
    for name in ("torch", "triton", "transformers", "sglang", "xgrammar"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    out["cuda"] = torch.version.cuda
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    from sgl_kernel_rocm.arch import current_arch

    out["arch"] = current_arch() if torch.cuda.is_available() else "cpu"
    from sglang_mx.platform_choice import current_choice
    from sglang_mx.platform_choice import current_facts as facts

    f = facts()
    out["platform_choice"] = current_choice()
    out["sgl_kernel_installed"] = f.sgl_kernel
    return out


def log_facts(log_text: str) -> dict[str, Any]:
    graphs = [m.group(2) == "True" for m in GRAPH_LINE.finditer(log_text)]
    captures = CAPTURE_LINE.findall(log_text)
    plat = PLATFORM_LINE.findall(log_text)
    return {
        "platform": plat[-1] if plat else None,
        "graph_captured_bs": json.loads(captures[-1]) if captures else [],
        "decode_log_lines": len(graphs),
        "decode_log_lines_in_graph": sum(graphs),
    }


def run_server(model: str, args: list[str], what: str, rec: dict[str, Any], fn) -> None:
    """Start a server, run fn(url, handle), stop it; a failure is recorded with the log tail."""
    from sglang_mx_lab.testing.server import start_server

    t0 = time.monotonic()
    handle = None
    try:
        handle = start_server(model, args, timeout=float(os.environ.get("GPU_SERVE_START_S", 300)))
        rec[f"{what}_startup_s"] = round(handle.startup_s, 1)
        fn(handle.base_url, handle)
    except Exception as e:
        rec["failures"].append(f"{what}: {type(e).__name__}: {e}"[:2000])
    finally:
        if handle is not None:
            handle.stop()
            text = handle.log_path.read_text(errors="replace")
            rec[f"{what}_log"] = log_facts(text)
            rec[f"{what}_log_tail"] = text.splitlines()[-40:]
        rec[f"{what}_s"] = round(time.monotonic() - t0, 1)


def dumps_record(rec: dict[str, Any]) -> str:
    """The record as text: one line per top-level field and per field of a top-level object,
    values compact (half the indented size; the record travels with the tree, issue 23)."""

    def line(key: str, value: Any, pad: str) -> str:
        return f"{pad}{json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}"

    out = []
    for key, value in rec.items():
        if isinstance(value, dict) and value:
            inner = ",\n".join(line(k, v, "  ") for k, v in value.items())
            out.append(f" {json.dumps(key)}: {{\n{inner}\n }}")
        else:
            out.append(line(key, value, " "))
    return "{\n" + ",\n".join(out) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--site", type=Path, help="carried site dir: our entry points go there")
    p.add_argument("--dry-run", action="store_true", help="CPU platform, small budget")
    args = p.parse_args(argv)
    if args.site:
        write_entry_points(args.site)

    from sglang_mx_lab.testing import serve_probe as probe
    from sglang_mx_lab.testing.server import default_serve_args
    from transformers import AutoTokenizer

    dry = args.dry_run
    model, serve_args = default_serve_args()
    base_args = serve_args + probe.SERVE_ARGS
    # On the GPU: graph batch sizes up to the probe's concurrency, and the CPU platform's KV pool
    # size (SGLang would otherwise fill most of 141 GB with this tiny model's pool).
    graph_args = [] if dry else ["--cuda-graph-max-bs", str(probe.CONCURRENT)]
    graph_args += [] if dry else ["--max-total-tokens", "131072"]
    config = json.loads((Path(model) / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(model)
    prompts = probe.prompt_set(tokenizer, config["index_topk"])
    speed = {"tokens": 32 if dry else 256, "streams": [1, 4] if dry else [1, probe.CONCURRENT]}
    timeout = 600.0 if dry else 120.0
    rec: dict[str, Any] = {
        "kind": "gpu-serve",
        "dry_run": dry,
        "commit": os.environ.get("GPU_SERVE_COMMIT", "unknown"),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "model": Path(model).name,
        "quantization": config.get("quantization_config", {}),
        "server_args": base_args,
        "graph_args": graph_args,
        "prompts": prompts,
        "failures": [],
        "decode_tok_s": {},
    }

    def graphs_on(url: str, handle) -> None:
        rec["greedy"] = probe.greedy_record(url, prompts, timeout)
        rec["failures"] += rec["greedy"].pop("failures")
        for n in speed["streams"]:
            rec["decode_tok_s"][f"graphs_on_{n}"] = round(
                probe.decode_tok_s(url, prompts["short"][0], speed["tokens"], n, timeout), 1
            )
        budget = 20.0 if dry else 40.0
        rec["hostile"] = probe.hostile_record(url, budget, 10)

    def graphs_off(url: str, handle) -> None:
        with __import__("httpx").Client(timeout=timeout) as client:
            rec["graphs_off_short"] = [
                probe.answer(probe.generate(client, url, ids, probe.SHORT_NEW))["output_ids"]
                for ids in prompts["short"]
            ]
        for n in speed["streams"]:
            rec["decode_tok_s"][f"graphs_off_{n}"] = round(
                probe.decode_tok_s(url, prompts["short"][0], speed["tokens"], n, timeout), 1
            )

    def dump() -> None:  # after each phase: a run killed at its time limit still leaves a record
        rec["checks"] = checks(rec)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(dumps_record(rec))

    deadline = time.monotonic() + float(os.environ.get("GPU_SERVE_LEFT_S", "1e9"))
    run_server(model, base_args + graph_args, "graphs_on", rec, graphs_on)
    dump()
    if deadline - time.monotonic() < GRAPHS_OFF_MIN_S:
        rec["failures"].append("graphs_off: not run, too little of the time budget left")
    else:
        run_server(model, base_args + ["--disable-cuda-graph"], "graphs_off", rec, graphs_off)
    dump()
    bad = [k for k, ok in rec["checks"].items() if not ok]
    print(f"wrote {args.out}; failures: {rec['failures'] or 'none'}; checks failed: {bad}")
    return 1 if rec["failures"] or bad else 0


def checks(rec: dict[str, Any]) -> dict[str, bool]:
    """What the issue's H200 run must show, read off the record (a dry run has no graphs)."""
    greedy = rec.get("greedy") or {}
    kinds = ("short", "long", "repeat", "concurrent")
    answered = [a for kind in kinds for a in greedy.get(kind, [])]
    repeat = greedy.get("repeat") or [None, None]
    hostile = rec.get("hostile") or {}
    on_log = rec.get("graphs_on_log") or {}
    out = {
        "every_request_answered": bool(answered) and all(a is not None for a in answered),
        "cached_tokens_on_repeat": bool(repeat[1]) and repeat[1]["cached_tokens"] >= 3 * 64,
        "no_worker_death": bool(hostile) and hostile.get("worker_deaths") == 0,
        "no_hostile_failure": bool(hostile) and not hostile.get("failures"),
        "graphs_on_equals_off": bool(greedy.get("short"))
        and [a and a["output_ids"] for a in greedy["short"]] == rec.get("graphs_off_short"),
    }
    if not rec["dry_run"]:
        out["decode_in_cuda_graphs"] = on_log.get("decode_log_lines_in_graph", 0) > 0
        out["platform_mx_cuda"] = on_log.get("platform") == "mx_cuda"
    return out


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT / "python"), str(ROOT / "sgl-kernel-rocm")]
    raise SystemExit(main())
