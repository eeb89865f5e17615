"""A served unary request's reply and the settlement of its ledger rows: in which order.

Embedded store (SQLite): the rows settle, then the reply goes (~0.1 ms, a local file).

Shared store (PostgreSQL): the reply goes, then the rows settle. Settlement is a round trip to
the database (~0.5 ms on the 2-core development box, half of what the store adds to a request),
and the client needs nothing from it: its usage and cost are in the reply already. What that
changes, and what it does not:
- Within a replica, nothing: settlement runs on the event loop as soon as the last byte is
  written, with no await in between, so this replica serves no other request (its account
  endpoints included) before the row is settled.
- On another replica, a read in the ~0.5 ms after the reply may still see the row pending, its
  reservation counted in flight (OpenRouter documents its generation stats as queryable a few
  seconds after a request ends).
- Caps, limits and exactly-once are unchanged: the reservation holds until settlement, which
  settles a pending row once; a database lost then is retried by the lease thread, as before.
- A replica killed between its reply and the settlement leaves the row pending: the sweep
  settles it as a dead replica's row (docs/provider.md, Replicas)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.responses import Response


class SettleAfterReply(Response):
    """A JSON reply that calls `settle` once its body is written (or its sending failed)."""

    def __init__(self, body: bytes, headers: dict[str, str], settle: Callable[[], None]) -> None:
        super().__init__(body, media_type="application/json", headers=headers)
        self.settle = settle

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.settle()


def unary_reply(shared_store: bool, body: bytes, rid: str, settle: Callable[[], None]) -> Response:
    headers = {"X-Request-Id": rid}
    if shared_store:
        return SettleAfterReply(body, headers, settle)
    settle()
    return Response(body, media_type="application/json", headers=headers)
