"""Is the SGLang worker still generating? One 1-token /generate, judged by its body: exactly one
token must come back. An HTTP 200 alone proves only that the HTTP server answers; a worker whose
scheduler has stopped can still answer 200 with no token (an aborted request), which must count
as a dead worker, not a live one. (SGLang's own /health_generate sleeps a second per call, too
slow to ask after every request of a campaign.)"""

from __future__ import annotations

import time

import httpx

PROBE = {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 1, "temperature": 0}}


def one_token(resp: httpx.Response) -> bool:
    """A /generate answer that carries exactly one generated token."""
    if resp.status_code != 200:
        return False
    try:
        out = resp.json()
    except ValueError:
        return False
    if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
        return False
    ids = out.get("output_ids")
    tokens = out["meta_info"].get("completion_tokens")
    return tokens == 1 and isinstance(ids, list) and len(ids) == 1


def generates(client: httpx.Client, sglang_url: str, timeout: float = 60.0) -> bool:
    """The worker produces a token (one retry: a stalled first step is not a death)."""
    for _ in range(2):
        try:
            if one_token(client.post(sglang_url + "/generate", json=PROBE, timeout=timeout)):
                return True
        except httpx.HTTPError:
            pass
    return False


def wait_generating(sglang_url: str, timeout: float = 300.0, poll_s: float = 0.25) -> float:
    """Seconds until the worker produces a token again (a restart after a death)."""
    t0 = time.monotonic()
    with httpx.Client(timeout=30) as client:
        while time.monotonic() - t0 < timeout:
            try:
                if one_token(client.post(sglang_url + "/generate", json=PROBE)):
                    return time.monotonic() - t0
            except httpx.HTTPError:
                pass
            time.sleep(poll_s)
    raise TimeoutError(f"{sglang_url} generated no token within {timeout:.0f}s")
