"""Settings of one provider process: a single frozen dataclass built from the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sglang_mx.provider.db import is_url

KEEPALIVE_FRAMES = ("blank", "comment")  # what relay.KEEPALIVE_BYTES writes for each


@dataclass(frozen=True)
class ProviderSettings:
    upstream: str  # SGLang server or sglang-router base URL
    pricing_path: Path
    db_path: Path | str  # SQLite file, or a PostgreSQL URL (the shared store of replicas)
    host: str = "127.0.0.1"
    port: int = 8080
    # "auto": namespace the prefix cache per key when more than one active key exists.
    isolation: str = "auto"
    keepalive_s: float = 2.0  # keep-alive period while the upstream is silent
    keepalive_frame: str = "blank"  # one of KEEPALIVE_FRAMES
    health_ttl_s: float = 5.0  # /health caches its one-token upstream probe this long
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 300.0  # longest silence tolerated from upstream mid-request
    key_cache_ttl_s: float = 2.0  # how stale a cached key record (e.g. a revocation) may be
    ledger_flush_tokens: int = 16  # streamed tokens between ledger progress writes
    default_rpm: int = 60
    default_tpm: int = 100_000
    # Shared store only: a replica silent this long is dead and its pending rows are settled.
    replica_lease_s: float = 10.0
    db_sync_commit: bool = False  # shared store: wait for each commit's fsync (pg.PgDatabase)
    log_level: str = "warning"

    def __post_init__(self) -> None:
        if self.isolation not in ("auto", "on", "off"):
            raise ValueError(f"isolation must be auto, on or off, not {self.isolation!r}")
        if self.keepalive_frame not in KEEPALIVE_FRAMES:
            frame, names = self.keepalive_frame, " or ".join(KEEPALIVE_FRAMES)
            raise ValueError(f"keepalive_frame must be {names}, not {frame!r}")
        object.__setattr__(self, "upstream", self.upstream.rstrip("/"))
        object.__setattr__(self, "pricing_path", Path(self.pricing_path))
        if self.replica_lease_s <= 0:
            raise ValueError(f"replica_lease_s must be positive, not {self.replica_lease_s}")
        if not is_url(self.db_path):
            object.__setattr__(self, "db_path", Path(self.db_path))

    @property
    def shared_store(self) -> bool:
        """--db names a PostgreSQL database (several replicas may share it)."""
        return is_url(self.db_path)
