"""Servers the bench tests start as processes of their own: the null upstream (with its flags),
the fake OpenAI server (bench_fake_openai), and the wait until a server answers GET
/v1/models."""

from __future__ import annotations

import contextlib
import multiprocessing
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
from sglang_mx_lab.testing.server import free_port

NULL = Path(__file__).parents[3] / "benchmark" / "null_upstream.py"


def wait_for_models(url: str, tries: int = 300) -> None:
    for _ in range(tries):
        try:
            httpx.get(url + "/v1/models", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.05)


@contextlib.contextmanager
def serving(url: str, stop: Callable[[], object]) -> Iterator[str]:
    """Yield `url` once it answers; `stop()` the server on the way out, whatever happened."""
    try:
        wait_for_models(url)
        yield url
    finally:
        stop()


@contextlib.contextmanager
def null_upstream(*flags: str) -> Iterator[str]:
    """benchmark/null_upstream.py on a free port with `flags`; yields its URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(NULL), str(port), *flags])
    with serving(f"http://127.0.0.1:{port}", lambda: (proc.terminate(), proc.wait(timeout=10))):
        yield f"http://127.0.0.1:{port}"


def _serve_fake(port: int, app_kwargs: dict) -> None:
    import uvicorn
    from bench_fake_openai import FakeCache, make_app

    uvicorn.run(make_app(FakeCache(), metrics=True, **app_kwargs), host="127.0.0.1", port=port,
                log_level="critical")  # fmt: skip


@contextlib.contextmanager
def fake_server_process(**app_kwargs) -> Iterator[str]:
    """The fake in a process of its own: in the test's process it would hold the client's GIL
    for tens of ms on a loaded box, and the self-check would rightly call the client bound,
    which is not what the verify tests are about."""
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_serve_fake, args=(port, app_kwargs))
    proc.start()
    with serving(f"http://127.0.0.1:{port}", lambda: (proc.terminate(), proc.join(10))) as url:
        yield url
