"""The mission's workload at its real shape on this CPU box: 20k tokens in, 1k out, 60% of prompt
tokens cached, through `sglang-mx serve` and `sglang-mx bench`, no `--fit-context`.

    python benchmark/unscaled_20k.py --out docs/results/unscaled-20k-1k-60-cpu.json

What runs, as a platform engineer would type it (the commands are in the record):

1. `sglang-mx serve` of the default bundled model (tiny-glm5-quark: GLM-5 architecture, MLA + DSA,
   Quark MXFP4 experts, one NextN layer) with FP8 KV, EAGLE 5/1/6 (the public MI355X recipe's
   setting), metrics on, and two config fields overridden on the command line
   (`--json-model-override-args`): GLM-5.2's `index_topk` 2048 and a 32,768-token context.
2. `sglang-mx bench run --workload production-20k-1k-60` with a handful of requests, one at a
   time (`--concurrency 1`: the lowest load there is), one shared 12k-token prefix, primed.
3. `--pd`: the same workload through prefill/decode disaggregation instead: a prefill and a
   decode `sglang-mx serve` (KV moved by Mooncake's transfer engine over TCP on loopback, as
   scripts/launch/pd_topology.sh starts them) behind smg in PD mode; FP8 KV on both
   sides, no draft (EAGLE on a PD decode side is not what this run checks).
4. Optionally (`--verify N`, single server) `sglang-mx bench verify` of the 2,626 tok/s claim
   at the claim's own shape and rate over its first N requests, `--hardware CPU`: not scaled,
   so what keeps it from a judgement is the hardware.

What it is not: a quality figure. The bundled model was trained at 512 positions with top-k 128
(docs/tiny-model.md), so its text past 512 tokens means nothing; the run measures the serving
path at the real shape (a 20k-token page table, 2,048 of 20k keys selected per query, a 12k-token
radix match, FP8 KV pages, the draft's verify steps) and what it costs on this box.

Peak RSS is the servers' whole process trees (launcher, tokenizer, scheduler, detokenizer; both
sides under PD) summed, sampled every 0.5 s, and each process's own high-water mark (VmHWM) at
the end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import psutil
from sglang_mx.assets import bundled_model_path
from sglang_mx.measure.stamp import stamp

REPO = Path(__file__).resolve().parents[1]
CLAIM = REPO / "benchmark/claims/glm52-mxfp4-mi355x-8x-2626.yaml"
OVERRIDE = {"index_topk": 2048, "max_position_embeddings": 32768}
EAGLE_516 = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "5",
             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "6"]  # fmt: skip
SHAPE_ARGS = ["--kv-cache-dtype", "fp8_e4m3", "--enable-metrics", "--chunked-prefill-size", "4096",
              "--json-model-override-args", json.dumps(OVERRIDE)]  # fmt: skip
TRANSFER = ["--disaggregation-transfer-backend", "mooncake"]
PD_ENV = {"MOONCAKE_PROTOCOL": "tcp", "MC_FORCE_TCP": "1"}
MX = [sys.executable, "-m", "sglang_mx.cli.main"]
STARTUP_TIMEOUT_S = 900


class RssSampler:
    """The peak summed RSS of some process trees, sampled every `period_s` in a thread."""

    def __init__(self, pids: list[int], period_s: float = 0.5):
        self.roots, self.period_s = [psutil.Process(p) for p in pids], period_s
        self.peak_bytes, self.peaks_by_phase, self.phase = 0, {}, "startup"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def tree(self) -> list[psutil.Process]:
        out = []
        for root in self.roots:
            try:
                out += [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        return out

    def _sample(self) -> None:
        total = 0
        for p in self.tree():
            try:
                total += p.memory_info().rss
            except psutil.NoSuchProcess:
                pass
        self.peak_bytes = max(self.peak_bytes, total)
        self.peaks_by_phase[self.phase] = max(self.peaks_by_phase.get(self.phase, 0), total)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def start(self) -> None:
        self._thread.start()

    def high_water_marks(self) -> list[dict]:
        """Each live process's own peak RSS (VmHWM), read before the servers stop."""
        out = []
        for p in self.tree():
            try:
                status = Path(f"/proc/{p.pid}/status").read_text()
                hwm = next(ln for ln in status.splitlines() if ln.startswith("VmHWM"))
                out.append({"pid": p.pid, "name": p.name(), "cmdline": " ".join(p.cmdline())[:120],
                            "vm_hwm_mib": int(hwm.split()[1]) / 1024})  # fmt: skip
            except (psutil.NoSuchProcess, OSError, StopIteration):
                pass
        return out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Servers:
    """`sglang-mx serve` processes started here, each in its own session, stopped on exit."""

    def __init__(self, work: Path):
        self.work, self.procs = work, []

    def start(self, name: str, port: int, args: list[str], env: dict | None = None) -> str:
        cmd = [*MX, "serve", "--port", str(port), *args]
        print("$", " ".join(cmd), flush=True)
        log = self.work / f"{name}.log"
        with log.open("w") as f:
            env = {**os.environ, **(env or {})}
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=env,
                                    start_new_session=True)  # fmt: skip
        self.procs.append((name, proc, log, cmd))
        return f"http://127.0.0.1:{port}"

    def wait(self, url: str, probe: str = "generate") -> float:
        """Seconds until the server at `url` serves: a 1-token /generate (a PD side: its own
        /health_generate, which needs no peer)."""
        name, proc, log, _ = next(p for p in self.procs if p[3][p[3].index("--port") + 1]
                                  == url.rsplit(":", 1)[1])  # fmt: skip
        t0 = time.monotonic()
        while time.monotonic() - t0 < STARTUP_TIMEOUT_S:
            if proc.poll() is not None:
                sys.exit(f"{name} exited ({proc.returncode}) before serving; see {log}")
            try:
                if probe == "health_generate":
                    ok = httpx.get(f"{url}/health_generate", timeout=60).status_code == 200
                else:
                    one = {"text": "a", "sampling_params": {"max_new_tokens": 1}}
                    ok = httpx.post(f"{url}/generate", json=one, timeout=120).status_code == 200
                if ok:
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        sys.exit(f"{name} did not serve within {STARTUP_TIMEOUT_S} s; see {log}")

    def stop(self) -> None:
        for _, proc, _, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc, _, _ in self.procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def run_cli(args: list[str], log: Path) -> int:
    print("$", " ".join(args), flush=True)
    with log.open("w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, cwd=REPO).returncode


def request_rows(point: dict) -> list[dict]:
    """Per request of a result point: its cached tokens (measured, reachable by the reach
    accounting, designed), TTFT, prefill tok/s of its uncached part (uncached prompt tokens /
    TTFT), E2E and output tokens."""
    rows = []
    for r in point["meta"]["requests"]:
        prompt, cached, ttft = r["prompt_tokens"], r["cached_tokens"], r["ttft"]
        rows.append({
            "id": r["request_id"],
            "prompt_tokens": prompt,
            "cached_tokens": cached,
            "reachable_cached": r["reachable_cached"],
            "designed_cached": r["expected_cached"],
            "cached_fraction": cached / prompt if prompt else None,
            "ttft_s": ttft,
            "prefill_tok_s": (prompt - cached) / ttft if prompt and ttft == ttft else None,
            "itl_s": r["itl_s"],
            "output_tokens": r["completion_tokens"],
            "e2e_s": r["e2e"],
            "error": r["error"] or None,
        })  # fmt: skip
    return rows


def point_record(command: list[str], rc: int, wall_s: float, result: dict) -> dict:
    point = result["sweep"]["points"][0]
    return {"command": command, "exit_code": rc, "wall_s": wall_s, "summary": point["summary"],
            "warnings": result.get("warnings", []), "requests": request_rows(point)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None,
                    help="default docs/results/unscaled-20k-1k-60-cpu[-pd].json")  # fmt: skip
    ap.add_argument("--work", type=Path, default=REPO / "build/unscaled-20k")
    ap.add_argument("--num-requests", type=int, default=4)
    ap.add_argument("--pd", action="store_true", help="through prefill/decode disaggregation")
    ap.add_argument("--reuse-run", action="store_true",
                    help="keep the bench run in --work (its result.json); only verify")  # fmt: skip
    ap.add_argument("--verify", type=int, default=0, metavar="N",
                    help="also verify the 2,626 claim on its first N requests (0: no)")  # fmt: skip
    args = ap.parse_args()
    # a TERM (timeout, kill) runs the `finally` below, which stops the servers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))
    out = args.out or REPO / f"docs/results/unscaled-20k-1k-60-cpu{'-pd' if args.pd else ''}.json"
    work = args.work / ("pd" if args.pd else "single")
    work.mkdir(parents=True, exist_ok=True)
    model = bundled_model_path("glm5-quark")
    servers = Servers(work)
    record: dict = {"benchmark": "unscaled_20k", "topology": "pd" if args.pd else "single"}
    stack = ExitStack()
    try:
        t0 = time.monotonic()
        if args.pd:
            from sglang_mx.provider.launch import pd_router_process

            bootstrap = 30418
            side = [*SHAPE_ARGS, *TRANSFER, "--disaggregation-mode"]
            boot = ["--disaggregation-bootstrap-port", str(bootstrap)]
            prefill = servers.start("prefill", 30416, [*side, "prefill", *boot], PD_ENV)
            decode = servers.start("decode", 30417, [*side, "decode"], PD_ENV)
            rss = RssSampler([p.pid for _, p, _, _ in servers.procs])
            rss.start()
            for url in (prefill, decode):
                servers.wait(url, "health_generate")
            # a 20k-token prefill on this box takes minutes: the router's own 300 s per request
            # (router_flags) would cut it
            router = pd_router_process([(prefill, bootstrap)], [decode],
                                       ("--request-timeout-secs", "7200"))  # fmt: skip
            url = stack.enter_context(router)
        else:
            url = servers.start("server", 30411, [*SHAPE_ARGS, *EAGLE_516])
            rss = RssSampler([p.pid for _, p, _, _ in servers.procs])
            rss.start()
            servers.wait(url)
        record["servers"] = {name: cmd for name, _, _, cmd in servers.procs}
        record["startup_s"] = time.monotonic() - t0
        print(f"serving after {record['startup_s']:.0f} s", flush=True)
        # the server caches whole 64-token pages: the design says so (12,000 -> 11,968)
        common = ["--url", url, "--tokenizer", str(model), "--page-size", "64", "--warmup", "0",
                  "--no-progress"]  # fmt: skip
        if args.pd:
            # smg's OpenAI routes (as sglang-router 0.3.2's) take a prompt as a string or strings,
            # not token ids (400 "prompt: data did not match any variant of untagged enum
            # StringOrArray", smg 1.13, 2026-12-06): through the gateway, bench sends the text
            common.append("--send-text")
        bench = [*MX, "bench", "run", "--workload", "production-20k-1k-60",
                 "--num-requests", str(args.num_requests), "--prefix-groups", "1",
                 "--arrival", "concurrency", "--concurrency", "1", *common,
                 "-o", str(work / "run")]  # fmt: skip
        if args.reuse_run:  # an earlier invocation's run; its RSS was not kept
            result = json.loads((work / "run/result.json").read_text())
            record["run"] = point_record(bench, 0, float("nan"), result)
            record["run"]["reused_from"] = result["stamp"]["date"]
        else:
            rss.phase = "bench run"
            t0 = time.monotonic()
            rc = run_cli(bench, work / "run.log")
            result = json.loads((work / "run/result.json").read_text())
            record["run"] = point_record(bench, rc, time.monotonic() - t0, result)
        if args.verify:
            verify = [*MX, "bench", "verify", str(CLAIM), "--num-requests", str(args.verify),
                      "--repeats", "1", "--hardware", "CPU", "--gpus", "1", *common,
                      "-o", str(work / "verify")]  # fmt: skip
            rss.phase = "bench verify"
            t0 = time.monotonic()
            rc = run_cli(verify, work / "verify.log")
            result = json.loads((work / "verify/result.json").read_text())
            record["verify"] = point_record(verify, rc, time.monotonic() - t0, result)
            record["verify"]["verdict"] = result["verdict"]
        record["process_high_water_mib"] = rss.high_water_marks()
        rss.stop()
    finally:
        stack.close()
        servers.stop()
    record["model"] = {"name": "tiny-glm5-quark (bundled, the default)", "override": OVERRIDE}
    record["peak_rss_gib"] = {"all": rss.peak_bytes / 2**30,
                              **{k: v / 2**30 for k, v in rss.peaks_by_phase.items()}}  # fmt: skip
    record["stamp"] = stamp(config={"num_requests": args.num_requests, "verify": args.verify,
                                    "pd": args.pd})  # fmt: skip
    record["not_a_quality_figure"] = (
        "the bundled model was trained at 512 positions and index_topk 128; its text past 512 "
        "tokens is not claimed. The run measures the serving path at the real shape."
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
