"""The provider's own traffic as a trace: an export of its ledger (per request: a hashed key,
arrival time, prompt / cached / completion tokens; never content) and its reader.

The ledger knows how many prompt tokens each request found cached, not which ones. The reader
rebuilds the sharing from those counts: within one key (the provider salts the cache per key, so
prefixes are shared only within a key) every request starts with the first `cached` tokens of
that key's one shared stream, then its own tokens; the stream is primed once at the key's largest
cached count, so each request finds exactly its recorded count in the cache again.

Export: `sglang-mx bench ledger-export --db PROVIDER_DB -o ledger.jsonl` (read-only: the file is
opened with SQLite's mode=ro, so a running provider is not disturbed)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from sglang_mx.bench.load.traces_public import (
    Row,
    Rows,
    TraceFormatError,
    checked_int,
    jsonl_rows,
    require_fields,
    scaled_count,
)

EXPORT_VERSION = 1
# the fields the reader needs in every row (a row without one is refused)
LEDGER_FIELDS = ("key", "created", "prompt_tokens", "cached_tokens", "completion_tokens")


def _hashed(key_id: str) -> str:
    return hashlib.sha256(f"sglang-mx-ledger:{key_id}".encode()).hexdigest()[:12]


def export_ledger(db_path: str | Path, out: str | Path, since: float = 0.0) -> int:
    """Write the finished (status ok) requests of a provider ledger as JSONL; returns rows."""
    db_path = Path(db_path)
    if not db_path.is_file():
        raise TraceFormatError(f"no provider database at {db_path}")
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT key_id, model, created, prompt_tokens, cached_tokens, completion_tokens "
            "FROM ledger WHERE status='ok' AND created >= ? ORDER BY created",
            (since,),
        ).fetchall()
    except sqlite3.Error as exc:
        raise TraceFormatError(f"{db_path}: not a provider ledger ({exc})") from None
    finally:
        con.close()
    with Path(out).open("w") as f:
        f.write(json.dumps({"ledger_export": EXPORT_VERSION, "rows": len(rows)}) + "\n")
        for key_id, model, created, prompt, cached, completion in rows:
            row = {
                "key": _hashed(key_id),
                "model": model,
                "created": created,
                "prompt_tokens": prompt,
                "cached_tokens": cached,
                "completion_tokens": completion,
            }
            f.write(json.dumps(row) + "\n")
    return len(rows)


def read_ledger(path: Path, length_scale: float = 1.0) -> Rows:
    out = Rows(note="shared prefixes rebuilt per key from the recorded cached counts")
    t0 = None
    for i, where, d in jsonl_rows(path):
        if "ledger_export" in d:
            continue
        require_fields(d, where, "ledger", LEDGER_FIELDS)
        try:
            t = float(d["created"])
        except (TypeError, ValueError):
            raise TraceFormatError(f"{where}: created {d['created']!r} is not seconds") from None
        t0 = t if t0 is None else t0
        prompt = checked_int(d["prompt_tokens"], where, "prompt_tokens", 1)
        cached = checked_int(d["cached_tokens"], where, "cached_tokens")
        if cached >= prompt:
            raise TraceFormatError(
                f"{where}: cached_tokens {cached} must be below prompt_tokens {prompt}"
            )
        n_out = checked_int(d["completion_tokens"], where, "completion_tokens")
        if n_out == 0:
            out.skipped += 1
            continue
        prompt, cached = scaled_count(prompt, length_scale), int(cached * length_scale)
        cached = min(cached, prompt - 1)
        key = str(d["key"])
        segs = [(f"lk{key}", cached)] if cached else []
        segs.append((f"lu{i}", prompt - cached))
        out.rows.append(Row(t - t0, segs, scaled_count(n_out, length_scale), key=key))
    return out
