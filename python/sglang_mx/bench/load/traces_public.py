"""Readers for public trace formats, each into rows of (arrival seconds, segments, output length):

- Mooncake JSONL: `{"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}`; each
  hash id is one block of `block` prompt tokens (512 in the published traces; the last block may
  be partial), equal ids are equal blocks, so a segment per id rebuilds the prefix sharing;
- Azure LLM inference CSV: `TIMESTAMP` (e.g. `2023-11-16 18:15:46.6805900`), `ContextTokens`,
  `GeneratedTokens`; no sharing is recorded, so every prompt is unique;
- BurstGPT CSV: `Timestamp` (seconds), `Model`, `Request tokens`, `Response tokens`, `Total
  tokens`, `Log Type`; rows with 0 response tokens (failed in the log) are skipped and counted.

A malformed row is a TraceFormatError naming the file, the line and the field."""

from __future__ import annotations

import csv
import datetime as _dt
import json
from dataclasses import dataclass, field
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError

MOONCAKE_BLOCK = 512


class TraceFormatError(BenchError):
    pass


@dataclass
class Row:
    arrival_s: float
    segments: list[tuple[str, int]]
    output_len: int
    key: str = ""  # who sent it (ledger: the hashed API key), for sessions and priming


@dataclass
class Rows:
    rows: list[Row] = field(default_factory=list)
    skipped: int = 0
    note: str = ""


def checked_int(value, where: str, name: str, minimum: int = 0) -> int:
    try:
        n = int(float(value))
    except (TypeError, ValueError):
        raise TraceFormatError(f"{where}: {name} {value!r} is not a number") from None
    if n < minimum:
        raise TraceFormatError(f"{where}: {name} {n} is below {minimum}")
    return n


def scaled_count(n: int, factor: float) -> int:
    return max(1, int(n * factor))


def jsonl_rows(path: Path):
    """(line number, "path:line", parsed object) of each non-blank line of a JSONL file."""
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{where}: not JSON ({exc.msg})") from None
        yield i, where, d


def require_fields(d: dict, where: str, kind: str, names: tuple[str, ...]) -> None:
    """A TraceFormatError naming the first of `names` the `kind` row `d` lacks."""
    for name in names:
        if name not in d:
            raise TraceFormatError(f"{where}: {kind} row has no {name!r}")


def mooncake_segments(hash_ids: list, input_len: int, block: int) -> list[tuple[str, int]]:
    """One segment per hash id (`block` tokens; the last one what remains of `input_len`), and a
    unique tail when the prompt is longer than its blocks."""
    segs, left = [], input_len
    for h in hash_ids:
        if left <= 0:
            break
        n = min(block, left)
        segs.append((f"mc{h}", n))
        left -= n
    return segs


def read_mooncake(path: Path, length_scale: float = 1.0) -> Rows:
    out = Rows(note=f"hash_ids as {MOONCAKE_BLOCK}-token blocks")
    block = scaled_count(MOONCAKE_BLOCK, length_scale)
    if length_scale != 1.0:
        out.note = f"hash_ids as {block}-token blocks ({MOONCAKE_BLOCK} x {length_scale:.4g})"
    t0 = None
    for i, where, d in jsonl_rows(path):
        require_fields(
            d, where, "mooncake", ("timestamp", "input_length", "output_length", "hash_ids")
        )
        if not isinstance(d["hash_ids"], list):
            raise TraceFormatError(f"{where}: hash_ids must be a list of ids")
        ts = checked_int(d["timestamp"], where, "timestamp")
        t0 = ts if t0 is None else t0
        n_in = scaled_count(checked_int(d["input_length"], where, "input_length", 1), length_scale)
        n_out = scaled_count(
            checked_int(d["output_length"], where, "output_length", 1), length_scale
        )
        segs = mooncake_segments(d["hash_ids"], n_in, block)
        covered = sum(n for _, n in segs)
        if covered < n_in:  # tokens past the hashed blocks are the request's own
            segs.append((f"mcu{i}", n_in - covered))
        out.rows.append(Row((ts - t0) / 1000.0, segs, n_out))
    return out


def _azure_time(text: str, where: str) -> float:
    """Seconds since the epoch of `2023-11-16 18:15:46.6805900` (7 fractional digits)."""
    base, _, frac = text.strip().partition(".")
    try:
        t = _dt.datetime.strptime(base, "%Y-%m-%d %H:%M:%S").replace(tzinfo=_dt.timezone.utc)
        return t.timestamp() + (float(f"0.{frac}") if frac else 0.0)
    except ValueError:
        raise TraceFormatError(
            f"{where}: TIMESTAMP {text!r} is not YYYY-MM-DD HH:MM:SS.f"
        ) from None


def _csv_rows(path: Path, needed: tuple[str, ...]):
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceFormatError(f"{path}: CSV header lacks {', '.join(missing)}")
        for i, row in enumerate(reader, 2):
            yield f"{path}:{i}", row


def read_azure(path: Path, length_scale: float = 1.0) -> Rows:
    out, t0 = Rows(note="no prefix sharing recorded: every prompt unique"), None
    for where, row in _csv_rows(path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens")):
        t = _azure_time(row["TIMESTAMP"], where)
        t0 = t if t0 is None else t0
        n_in = scaled_count(
            checked_int(row["ContextTokens"], where, "ContextTokens", 1), length_scale
        )
        n_out = checked_int(row["GeneratedTokens"], where, "GeneratedTokens")
        if n_out == 0:
            out.skipped += 1
            continue
        out.rows.append(
            Row(t - t0, [(f"az{where.rsplit(':', 1)[1]}", n_in)], scaled_count(n_out, length_scale))
        )
    return out


def read_burstgpt(path: Path, length_scale: float = 1.0) -> Rows:
    out, t0 = Rows(note="no prefix sharing recorded: every prompt unique"), None
    needed = ("Timestamp", "Request tokens", "Response tokens")
    for where, row in _csv_rows(path, needed):
        try:
            t = float(row["Timestamp"])
        except (TypeError, ValueError):
            raise TraceFormatError(
                f"{where}: Timestamp {row['Timestamp']!r} is not seconds"
            ) from None
        t0 = t if t0 is None else t0
        n_in = checked_int(row["Request tokens"], where, "Request tokens")
        n_out = checked_int(row["Response tokens"], where, "Response tokens")
        if n_in == 0 or n_out == 0:  # a failed request in the log
            out.skipped += 1
            continue
        segs = [(f"bg{where.rsplit(':', 1)[1]}", scaled_count(n_in, length_scale))]
        out.rows.append(Row(t - t0, segs, scaled_count(n_out, length_scale)))
    return out
