"""Kill one side of a PD topology under streaming load through the provider and count what
became of the requests (sglang_mx_lab.testing.streams), then wait until the supervisor has the side
back and the router routes again. Used by test_pd_topology.py and scripts/record_pd_faults.py (which
records the counts in docs/results/pd-faults-cpu.json)."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sglang_mx_lab.testing.pd_servers import PdSides, wait_pd_serving
from sglang_mx_lab.testing.streams import count, ledger_problems, stream_chat


def unique_prompt(pairs: int) -> str:
    """A prompt no earlier request shares a prefix with: about 25 + 7 x pairs tokens of the
    bundled tiny models' tokenizer."""
    words = " ".join(f"mill{i % 37} river{i % 11}" for i in range(pairs))
    return f"[{uuid.uuid4().hex}] {words}"


def fault_run(
    sides: PdSides,
    side: str,
    provider_url: str,
    key: str,
    model: str,
    db: Path,
    *,
    streams: int = 4,
    max_tokens: int = 200,
    decoding_chunks: int = 3,
    kill_after_s: float = 30.0,
    bound_s: float = 300.0,
    stall_s: float = 30.0,
    back_within_s: float = 300.0,
    log: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    """SIGKILL `side`'s whole process group (an OOM kill) once each of `streams` streamed
    requests has had `decoding_chunks` chunks (all are decoding; at most `kill_after_s` in);
    meanwhile send a request every 2 s until one completes end to end. A request is hung when
    it outlives bound_s or gets no content for stall_s (slow but moving is not hung). Returns
    the counts (during and after the kill), seconds until the side serves again and until a
    request completes, and the ledger's problems (none expected)."""
    sup = getattr(sides, side)
    prompts = [unique_prompt(5 + 3 * i) for i in range(streams)]
    decoding, all_decoding = [0], threading.Event()
    lock = threading.Lock()

    def on_chunk(n: int) -> None:
        if n == decoding_chunks:
            with lock:
                decoding[0] += 1
                if decoding[0] == streams:
                    all_decoding.set()

    with ThreadPoolExecutor(streams) as pool:
        futures = [
            pool.submit(
                stream_chat, provider_url, key, model, p, max_tokens, bound_s, on_chunk, stall_s
            )
            for p in prompts
        ]
        all_decoding.wait(kill_after_s)
        restarts = sup.sup.restarts
        os.killpg(sup.sup.child.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        during = [f.result(timeout=2 * bound_s + 30) for f in futures]
    log(f"kill {side}: {count(during, bound_s)}")
    # While the side is down and coming back: a request every 2 s, each must end fast (a clean
    # error while nothing can serve it), until one completes end to end.
    back: list[float] = []

    def wait_back() -> None:
        sup.wait_healthy(back_within_s, probe=wait_pd_serving)
        back.append(time.monotonic() - t_kill)

    waiter = threading.Thread(target=wait_back, daemon=True)
    waiter.start()
    after: list[dict[str, Any]] = []
    routed_s = None
    while time.monotonic() - t_kill < back_within_s + stall_s:
        r = stream_chat(provider_url, key, model, unique_prompt(3), 4, bound_s, None, stall_s)
        after.append(r)
        if r["status"] == 200 and r["usage"] and not r["error"]:
            routed_s = time.monotonic() - t_kill
            break
        time.sleep(2)
    waiter.join(timeout=back_within_s)
    side_back_s = back[0] if back else None
    log(f"{side} serving after {side_back_s} s, routed again after {routed_s} s")
    return {
        "side": side,
        "streams": streams,
        "max_tokens": max_tokens,
        "decoding_at_kill": decoding[0],
        "bound_s": bound_s,
        "stall_s": stall_s,
        "during": count(during, bound_s),
        "during_detail": [_brief(r) for r in during],
        "after": count(after, bound_s),
        "after_detail": [_brief(r) for r in after],
        "side_restarted": sup.sup.restarts > restarts,
        "side_serving_after_s": None if side_back_s is None else round(side_back_s, 1),
        "routed_again_after_s": None if routed_s is None else round(routed_s, 1),
        "ledger_problems": ledger_problems(db, during + after, max_tokens),
    }


def _brief(r: dict[str, Any]) -> dict[str, Any]:
    err = r["error"]
    if isinstance(err, dict):
        err = err.get("message")
    usage = r["usage"] or {}
    return {
        "status": r["status"],
        "chunks": r["chunks"],
        "completion_tokens": usage.get("completion_tokens"),
        "elapsed_s": round(r["elapsed"], 1),
        "error": str(err)[:200] if err else None,
    }
