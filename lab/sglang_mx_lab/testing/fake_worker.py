"""A fake SGLang worker with planted faults: the negative control for the hostile campaign
(test/lab/testing/test_campaign_faults.py). It stands in for a server that is broken in known ways,
so the tests can see that the campaign reports, shrinks and saves each kind of failure.

A real HTTP server on a loopback port, in this process (stdlib `http.server`, one thread per
connection). It answers SGLang's /generate and the two OpenAI routes with small well-formed
bodies, a bad JSON body with a 400, and a request that carries a chosen field (top level, or in
/generate's sampling_params) with that field's fault:

- `http_500`: a 500;
- `traceback`: a 400 whose body is a Python traceback;
- `drop`: the connection closed with no answer;
- `hang`: no answer until the server closes;
- `stop_generating`: a normal answer, after which the worker stops producing tokens for
  `restart_s` seconds (the liveness /generate still answers 200, with no token), as a scheduler
  that died under a live HTTP server; the log gains the exception line such a death leaves.

It offers what a Campaign asks of a SupervisedServer (base_url, log_size, last_exception,
wait_healthy), so the campaign's own code runs unchanged against it.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sglang_mx_lab.testing.liveness import wait_generating
from sglang_mx_lab.testing.server import last_exception

FAULTS = ("http_500", "traceback", "drop", "hang", "stop_generating")
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/srv/sglang/srt/entrypoints/http_server.py", line 1, in generate_request\n'
    "ValueError: planted fault\n"
)
DEATH = "RuntimeError: planted fault: the scheduler stopped"
HANG_MAX_S = 120.0  # a hung handler gives up by itself if nobody closes the server


def _fields(doc: Any, route: str) -> set[str]:
    if not isinstance(doc, dict):
        return set()
    names = set(doc)
    sp = doc.get("sampling_params")
    if route == "/generate" and isinstance(sp, dict):
        names |= set(sp)
    return names


class FakeWorker:
    """faults: field name -> one of FAULTS. probe_tokens: how many tokens every /generate
    answer carries while the worker is alive (1 is what SGLang gives a 1-token request)."""

    def __init__(
        self, faults: dict[str, str], restart_s: float = 1.0, probe_tokens: int = 1
    ) -> None:
        unknown = set(faults.values()) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; choose from {FAULTS}")
        self.faults = dict(faults)
        self.restart_s = restart_s
        self.probe_tokens = probe_tokens
        self.requests: list[tuple[str, str]] = []  # (route, body) of every POST, in order
        self._dead_until = 0.0
        self._release = threading.Event()
        self.log_path = Path(tempfile.mkstemp(prefix="fake-worker-", suffix=".log")[1])
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    # --- what a Campaign asks of its server -----------------------------------------------

    def log_size(self) -> int:
        return self.log_path.stat().st_size

    def last_exception(self, since: int) -> str:
        return last_exception(self.log_path, since)

    def wait_healthy(self, timeout: float = 300.0) -> float:
        return wait_generating(self.base_url, timeout, poll_s=0.05)

    def close(self) -> None:
        self._release.set()  # hung handlers let go
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the worker -----------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return time.monotonic() >= self._dead_until

    def fault_for(self, route: str, body: str) -> str | None:
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return None
        names = _fields(doc, route)
        return next((f for name, f in self.faults.items() if name in names), None)

    def die(self) -> None:
        with self.log_path.open("a") as log:
            log.write(f"[scheduler] Traceback (most recent call last):\n{DEATH}\n")
            log.write("[supervisor] server exited with code 1; restarting\n")
        self._dead_until = time.monotonic() + self.restart_s

    def answer(self, route: str, body: str) -> dict[str, Any]:
        n = self.probe_tokens if self.alive else 0
        if route == "/generate":
            finish = {"type": "length", "length": n} if n else {"type": "abort"}
            return {
                "text": "x" * n,
                "output_ids": [5] * n,
                "meta_info": {"completion_tokens": n, "finish_reason": finish},
            }
        kind = "chat.completion" if route.endswith("chat/completions") else "text_completion"
        text = "x" * n
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length"}
        if kind == "chat.completion":
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": 1 + n}
        return {"id": "fake", "object": kind, "choices": [choice], "usage": usage}


def _handler(worker: FakeWorker) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, payload: Any, ctype: str = "application/json") -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200 if self.path == "/health" else 404, {})

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode(
                errors="replace"
            )
            route = self.path
            worker.requests.append((route, body))
            fault = worker.fault_for(route, body)
            if fault == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault == "hang":
                worker._release.wait(HANG_MAX_S)
                self.close_connection = True
                return
            if fault == "http_500":
                return self._send(500, {"error": {"message": "planted fault", "code": 500}})
            if fault == "traceback":
                return self._send(400, TRACEBACK, "text/plain")
            if route not in ("/generate", "/v1/completions", "/v1/chat/completions"):
                return self._send(404, {"error": {"message": f"no route {route}"}})
            try:
                json.loads(body)
            except (ValueError, RecursionError):
                return self._send(400, {"error": {"message": "body is not valid JSON"}})
            answer = worker.answer(route, body)
            if fault == "stop_generating":
                worker.die()  # before answering: the client's next probe must find it dead
            self._send(200, answer)

    return Handler
