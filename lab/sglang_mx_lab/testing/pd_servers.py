"""Prefill/decode disaggregation on one box: a prefill and a decode SGLang server, each with our
plugin and under a supervisor (restarted when killed), KV moved between them by Mooncake's
transfer engine over TCP on loopback (docs/scale-out.md). sglang_mx.provider.launch
.pd_router_process puts smg's (SGLang Model Gateway) PD mode in front."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from sglang_mx.seam.cpu_binding import BIND_ENV, bind_groups

from sglang_mx_lab.testing.pin_cores import ONE_THREAD_ENV
from sglang_mx_lab.testing.server import STARTUP_TIMEOUT_S, SupervisedServer, free_port

# TCP on loopback: SGLang's transfer-engine wrapper reads MOONCAKE_PROTOCOL (default rdma), the
# engine itself MC_FORCE_TCP (drops the RDMA devices it would otherwise probe for).
PD_ENV = {"MOONCAKE_PROTOCOL": "tcp", "MC_FORCE_TCP": "1"}
# How long a prefill server keeps a request whose decode peer never sent its KV indices (a
# decode server that died after the router picked it), and how long a decode server waits for
# KV after bootstrapping (a prefill server that died): SGLang's defaults are 300 s each, during
# which the client sees nothing but keep-alives. FAULT_ENV bounds both.
FAULT_BOUND_S = 15
FAULT_ENV = {
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": str(FAULT_BOUND_S),
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": str(FAULT_BOUND_S),
}
TRANSFER = ("--disaggregation-transfer-backend", "mooncake")
SETUP_HINT = "run `make setup` (it installs the transfer engine and libibverbs1/librdmacm1)"


def prefill_args(bootstrap_port: int) -> list[str]:
    return [*TRANSFER, "--disaggregation-mode", "prefill",
            "--disaggregation-bootstrap-port", str(bootstrap_port)]  # fmt: skip


def decode_args() -> list[str]:
    return [*TRANSFER, "--disaggregation-mode", "decode"]


def require_transfer_engine() -> None:
    """Fail naming the fix when Mooncake's engine (or the system libraries it links) is absent."""
    try:
        import mooncake.engine  # noqa: F401
    except ImportError as e:
        raise RuntimeError(f"no Mooncake transfer engine ({e}); {SETUP_HINT}") from None


def wait_pd_serving(url: str, timeout: float = STARTUP_TIMEOUT_S, poll_s: float = 0.5) -> float:
    """Seconds until one side of PD serves: its /health_generate (SGLang sends a 1-token request
    through its own scheduler with a fake bootstrap peer, so no KV moves) answers 200. A bare
    /generate to one side would wait for a peer that never comes."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if httpx.get(url + "/health_generate", timeout=30).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(poll_s)
    raise TimeoutError(f"{url} (one side of PD) not serving within {timeout:.0f}s")


@dataclass
class PdSides:
    prefill: SupervisedServer
    decode: SupervisedServer
    bootstrap_port: int

    def wait_serving(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        t0 = time.monotonic()
        for side in (self.prefill, self.decode):
            side.wait_healthy(timeout - (time.monotonic() - t0), probe=wait_pd_serving)

    def close(self) -> None:
        for side in (self.prefill, self.decode):
            side.close()


def core_halves() -> tuple[str, str] | None:
    """SGLANG_CPU_OMP_THREADS_BIND values giving each side half of this process's cores (its
    own "node"), or None on one core. SGLang 0.5.23 binds by them only on CPUs with AMX or on
    arm64; elsewhere both sides keep all cores (sglang_mx_lab.testing.pin_cores pins for real)."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return None
    prefill, decode = bind_groups(2, cores).split("|")
    return prefill, decode


def start_pd_sides(
    model_path: str,
    extra_args: Sequence[str] = (),
    prefill_env: dict[str, str] | None = None,
    decode_env: dict[str, str] | None = None,
    prefill_extra: Sequence[str] = (),
    decode_extra: Sequence[str] = (),
) -> PdSides:
    """Spawn both sides at once (their cold starts overlap) and return; `wait_serving` waits.
    `extra_args` go to both sides, `prefill_extra` / `decode_extra` to one. Each side asks for
    its half of the cores (core_halves) unless its env says otherwise."""
    require_transfer_engine()
    bootstrap = free_port()
    halves = core_halves()
    bind = [{BIND_ENV: h} for h in halves] if halves else [{}, {}]
    # One intra-op thread a side: SGLang applies the binding only with AMX or on arm64, so
    # without it two sides spinning OpenMP over every core would crowd out everything else the
    # box runs (the rest of the suite, the plain reference server).
    bind = [{**ONE_THREAD_ENV, **b} for b in bind]
    prefill = SupervisedServer(
        model_path,
        [*extra_args, *prefill_extra, *prefill_args(bootstrap)],
        {**PD_ENV, **FAULT_ENV, **bind[0], **(prefill_env or {})},
    )
    try:
        decode = SupervisedServer(
            model_path,
            [*extra_args, *decode_extra, *decode_args()],
            {**PD_ENV, **FAULT_ENV, **bind[1], **(decode_env or {})},
        )
    except BaseException:
        prefill.close()
        raise
    return PdSides(prefill, decode, bootstrap)
