"""An ASGI app served on a loopback port inside the test process: the scripted upstreams of the
provider tests and the fake OpenAI server of the benchmark-runner tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sglang_mx_lab.testing.server import free_port


@contextmanager
def serve_in_thread(app, port: int | None = None) -> Iterator[str]:
    """Serve `app` until the block exits; yields its base URL."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="critical", timeout_graceful_shutdown=1
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise TimeoutError("in-process server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
