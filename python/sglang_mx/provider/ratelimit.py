"""Per-key sliding one-minute windows on requests and tokens; a refusal says how long to wait.

`RateLimiter` keeps the windows in this process's memory: the embedded store's limiter, right
for one provider process and wrong for several (each would admit the full rate).
`SharedRateLimiter` keeps them in the shared store, so a key's limits hold whichever replicas
its requests reach."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable

WINDOW_S = 60.0


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._requests: dict[str, deque[float]] = {}
        self._tokens: dict[str, deque[tuple[float, int]]] = {}
        self._token_sum: dict[str, int] = {}  # running sum of _tokens[key], O(1) per check

    def _trim(self, key_id: str, now: float) -> None:
        reqs = self._requests.setdefault(key_id, deque())
        while reqs and reqs[0] <= now - WINDOW_S:
            reqs.popleft()
        toks = self._tokens.setdefault(key_id, deque())
        while toks and toks[0][0] <= now - WINDOW_S:
            self._token_sum[key_id] -= toks.popleft()[1]

    def acquire(self, key_id: str, rpm: int, tpm: int, count: int = 1) -> float:
        """Admit `count` requests at once (returns 0.0) or return the seconds until they would
        be admitted (a native batch counts each output). `count` must not exceed rpm.

        Tokens are charged after the fact (add_tokens), so a key over its token budget waits
        until enough of its last minute's tokens age out."""
        now = self._clock()
        self._trim(key_id, now)
        reqs, toks = self._requests[key_id], self._tokens[key_id]
        waits = []
        if len(reqs) + count > rpm:
            waits.append(reqs[len(reqs) + count - 1 - rpm] + WINDOW_S - now)
        used = self._token_sum.get(key_id, 0)
        if used >= tpm:
            for t, n in toks:  # oldest first: wait until the window sum drops below tpm
                used -= n
                if used < tpm:
                    waits.append(t + WINDOW_S - now)
                    break
        if waits:
            return max(1.0, math.ceil(max(waits)))
        reqs.extend([now] * count)
        return 0.0

    def add_tokens(self, key_id: str, n: int) -> None:
        if n > 0:
            self._tokens.setdefault(key_id, deque()).append((self._clock(), n))
            self._token_sum[key_id] = self._token_sum.get(key_id, 0) + n


class SharedRateLimiter:
    """The windows in PostgreSQL (`rate_events`, one-second buckets per key): one `mx_admit`
    call per admission (on the request path folded into `mx_admit_open`), on the database's
    clock, serialized per key (migrations/postgresql/0003_request_path.sql). Tokens enter the
    window when a row settles (`mx_finish`), whichever replica settles it."""

    def __init__(self, db) -> None:
        self.db = db  # pg.PgDatabase

    def acquire(self, key_id: str, rpm: int, tpm: int, count: int = 1) -> float:
        wait = self.db.execute("SELECT mx_admit(?, ?, ?, ?)", (key_id, rpm, tpm, count))
        return float(wait[0][0])

    def add_tokens(self, key_id: str, n: int) -> None:
        """Nothing: settlement already charged them, in the same transaction."""
