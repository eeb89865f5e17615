"""API keys in the store (SQLite, or the shared PostgreSQL), stored only as HMAC-SHA256
digests under a random per-database salt.

A key looks like `sk-mx-<id>-<secret>`; the id is public (shown by `provider keys list`), the
secret is shown once at creation and never stored."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from sglang_mx.provider.db import open_database

KEY_PREFIX = "sk-mx-"


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    created: float
    revoked: float | None
    rpm: int | None  # None: the provider's default
    tpm: int | None
    limit_usd: float | None  # spend cap; None: unlimited

    @property
    def active(self) -> bool:
        return self.revoked is None


class KeyStore:
    def __init__(self, target: str | Path | object) -> None:
        """target: an SQLite path, a PostgreSQL URL or an open database (db.open_database)."""
        self.db = open_database(target)
        self.db.write(
            "INSERT INTO meta (name, value) VALUES ('salt', ?) ON CONFLICT (name) DO NOTHING",
            (secrets.token_hex(32),),
        )
        self._salt = bytes.fromhex(
            self.db.execute("SELECT value FROM meta WHERE name='salt'")[0][0]
        )

    def _digest(self, secret: str) -> str:
        return hmac.new(self._salt, secret.encode(), hashlib.sha256).hexdigest()

    def create(
        self,
        name: str,
        rpm: int | None = None,
        tpm: int | None = None,
        limit_usd: float | None = None,
    ) -> tuple[ApiKey, str]:
        """Returns the stored record and the plaintext key (shown once)."""
        key_id = secrets.token_hex(4)
        plain = f"{KEY_PREFIX}{key_id}-{secrets.token_urlsafe(24)}"
        now = time.time()
        self.db.write(
            "INSERT INTO api_keys (id, name, digest, created, rpm, tpm, limit_usd) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key_id, name, self._digest(plain), now, rpm, tpm, self.db.money(limit_usd)),
        )
        return ApiKey(key_id, name, now, None, rpm, tpm, limit_usd), plain

    def lookup(self, plain: str) -> ApiKey | None:
        """The key's record (revoked or not), or None if no such key."""
        if not plain.startswith(KEY_PREFIX) or len(plain) > 256:
            return None
        rows = self.db.execute(
            "SELECT id, name, created, revoked, rpm, tpm, limit_usd FROM api_keys WHERE digest=?",
            (self._digest(plain),),
        )
        return ApiKey(*rows[0]) if rows else None

    def list(self) -> list[ApiKey]:
        rows = self.db.execute(
            "SELECT id, name, created, revoked, rpm, tpm, limit_usd FROM api_keys ORDER BY created"
        )
        return [ApiKey(*r) for r in rows]

    def revoke(self, key_id: str) -> bool:
        changed = self.db.write(
            "UPDATE api_keys SET revoked=? WHERE id=? AND revoked IS NULL", (time.time(), key_id)
        )
        return changed == 1

    def active_count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM api_keys WHERE revoked IS NULL")[0][0]

    def cache_salt(self, key_id: str) -> str:
        """Per-key radix-cache namespace: unguessable, stable across restarts."""
        return hmac.new(self._salt, b"cache:" + key_id.encode(), hashlib.sha256).hexdigest()[:32]
