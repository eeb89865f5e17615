"""When a bench test may rerun `bench verify`: only when its verdict is inconclusive because every
failing repeat was client-bound. The load generator shares the 2-core box with the server and the
suite's other worker; a starved client is what the verdict itself asks to rerun (CI 2026-12-05:
event-loop lag p99 51 and 60 ms against 50; the suite 2026-12-07: 491 ms in one repeat of three)."""

from __future__ import annotations


def client_bound_only(verdict: dict) -> bool:
    return verdict["verdict"] == "inconclusive" and all(
        "client-bound" in r for r in verdict["reasons"]
    )
