"""Replica leases on the shared store: each provider process registers itself (`replicas`),
renews its lease every `lease_s / 5` seconds on the database's clock, and on each renewal
sweeps the ledger: rows left pending by a replica that stopped, or whose lease lapsed, are
settled (`Ledger.settle_orphans`). A live replica's rows are never touched, so a restart of one
replica leaves the others' requests alone, and a SIGKILLed replica's rows are settled within
lease_s + lease_s / 5 (plus one sweep) by any replica still running.

The same thread retries settlements that failed while the database was unreachable
(`Provider._finish_row` queues them): each row is settled once whoever gets there first."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections import deque
from collections.abc import Callable

from sglang_mx.provider.errors import StoreUnavailable
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.pg import PgDatabase

log = logging.getLogger(__name__)


class ReplicaLease:
    def __init__(
        self,
        url: str,
        port: int,
        lease_s: float,
        cost_of: Callable[[str, int, int, int], float],
        synchronous_commit: bool = False,
    ) -> None:
        self.name = f"{socket.gethostname()}:{port}"
        self.id = f"{self.name}/{uuid.uuid4().hex[:12]}"
        self.lease_s = lease_s
        self.cost_of = cost_of
        self.db = PgDatabase(url, synchronous_commit)  # its own connection, off the request path
        self.ledger = Ledger(self.db)
        self.retries: deque[Callable[[Ledger], object]] = deque()
        self.swept = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="replica-lease", daemon=True)
        self.db.write(
            "INSERT INTO replicas (id, name, pid, started, heartbeat) "
            "VALUES (?, ?, ?, mx_now(), mx_now())",
            (self.id, self.name, os.getpid()),
        )

    def start(self) -> int:
        """Settle what dead replicas left (start-up recovery), then keep the lease; returns the
        rows settled now."""
        settled = self.sweep()
        self._thread.start()
        return settled

    def sweep(self) -> int:
        n = self.ledger.settle_orphans(self.cost_of, self.lease_s)
        self.swept += n
        if n:
            log.warning("settled %d ledger rows of replicas whose lease lapsed", n)
        return n

    def renew(self) -> None:
        self.db.write("UPDATE replicas SET heartbeat = mx_now() WHERE id=?", (self.id,))

    def _run(self) -> None:
        while not self._stop.wait(self.lease_s / 5):
            try:
                self.renew()
                while self.retries:
                    self.retries[0](self.ledger)
                    self.retries.popleft()
                self.sweep()
            except StoreUnavailable as e:
                log.warning("replica lease: database unreachable (%s); retrying", e)
            except Exception:  # noqa: BLE001 - the lease must outlive any one bad tick
                log.exception("replica lease tick failed")

    def stop(self) -> None:
        """Stop renewing and mark this replica stopped: whatever it still holds pending is
        settled by the next sweep of another replica (or of its successor)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            while self.retries:
                self.retries.popleft()(self.ledger)
            self.db.write("UPDATE replicas SET stopped = mx_now() WHERE id=?", (self.id,))
        except StoreUnavailable as e:
            log.warning("replica lease: could not mark %s stopped (%s)", self.id, e)
        self.db.close()
