"""Unit tests of the provider's parts that need no server: pricing, keys, limits, ledger."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from sglang_mx.provider.errors import ProviderError
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx.provider.listing import document_legacy
from sglang_mx.provider.pricing import floor_price_per_m, load_pricing
from sglang_mx.provider.ratelimit import RateLimiter
from sglang_mx.provider.validation import parse_json, validate_chat

PRICES = {"prompt": 0.25, "completion": 1.5, "input_cache_read": 0.025}


def _pricing(tmp_path: Path) -> Path:
    path = tmp_path / "pricing.json"
    entry = {"id": "mx/m", "usd_per_m": PRICES, "context_length": 100, "max_completion_tokens": 10}
    path.write_text(json.dumps({"models": [entry]}))
    return path


def test_cost_prices_cached_tokens_at_cache_read(tmp_path: Path) -> None:
    m = load_pricing(_pricing(tmp_path))["mx/m"]
    expected = (100 - 40) * 0.25e-6 + 40 * 0.025e-6 + 7 * 1.5e-6
    assert m.cost(100, 7, 40) == pytest.approx(expected, rel=1e-12)
    # Cached tokens cannot exceed the prompt (a bad upstream report must not credit the user).
    assert m.cost(10, 0, 50) == pytest.approx(10 * 0.025e-6)
    pricing = document_legacy(m)["pricing"]
    assert pricing["prompt"] == "0.00000025" and pricing["input_cache_read"] == "0.000000025"
    assert "e" not in pricing["completion"].lower()


def test_pricing_directory_and_bad_entries(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(
        json.dumps(
            {"id": "a", "usd_per_m": {"prompt": 1}, "context_length": 8, "max_completion_tokens": 4}
        )
    )
    (tmp_path / "b.json").write_text(
        json.dumps(
            {
                "id": "b",
                "usd_per_m": {"completion": 2},
                "context_length": 8,
                "max_completion_tokens": 4,
                "quantization": "fp8",
            }
        )
    )
    assert sorted(load_pricing(tmp_path)) == ["a", "b"]
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            {
                "id": "c",
                "usd_per_m": {"prompt": -1},
                "context_length": 8,
                "max_completion_tokens": 4,
            }
        )
    )
    with pytest.raises(ValueError, match="negative"):
        load_pricing(bad)
    bad.write_text(
        json.dumps(
            {
                "id": "c",
                "usd_per_m": {},
                "context_length": 8,
                "max_completion_tokens": 4,
                "quantization": "fp3",
            }
        )
    )
    with pytest.raises(ValueError, match="quantization"):
        load_pricing(bad)


def test_floor_price_matches_the_cost_formula() -> None:
    # $/M = $/GPU-h x GPUs / (tok/s x 3600) x 1e6; halving utilization doubles the floor.
    full = floor_price_per_m(1.48, 8, 2626.0)
    assert full == pytest.approx(1.48 * 8 / (2626 * 3600) * 1e6)
    assert floor_price_per_m(1.48, 8, 2626.0, utilization=0.5) == pytest.approx(2 * full)
    with pytest.raises(ValueError):
        floor_price_per_m(1.0, 8, 0.0)


def test_keys_are_hashed_at_rest_and_revocable(tmp_path: Path) -> None:
    db = tmp_path / "k.sqlite"
    store = KeyStore(db)
    key, plain = store.create("alice", rpm=5)
    other_key, other_plain = KeyStore(db).create("bob")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("k.sqlite*"))
    secret = plain.split("-", 3)[3]
    assert plain.encode() not in raw and secret.encode() not in raw
    rows = sqlite3.connect(db).execute("SELECT id, digest FROM api_keys").fetchall()
    assert all(len(d) == 64 and d not in (plain, other_plain) for _, d in rows)
    assert store.lookup(plain) == key and store.lookup(other_plain).name == "bob"
    assert store.lookup(plain[:-1] + ("A" if plain[-1] != "A" else "B")) is None
    assert store.revoke(key.id) and not store.revoke(key.id)
    assert not store.lookup(plain).active and store.active_count() == 1
    # Same key under a different database (different salt) digests differently.
    assert KeyStore(tmp_path / "other.sqlite")._digest(plain) != store._digest(plain)
    assert store.cache_salt(key.id) != store.cache_salt(other_key.id)


def test_rate_limiter_counts_a_batch_as_its_outputs() -> None:
    now = [1000.0]
    lim = RateLimiter(clock=lambda: now[0])
    assert lim.acquire("k", rpm=5, tpm=10**6) == 0
    now[0] += 20
    assert lim.acquire("k", rpm=5, tpm=10**6, count=3) == 0  # 4 of 5 used
    wait = lim.acquire("k", rpm=5, tpm=10**6, count=2)  # needs the first one to age out
    assert 39 <= wait <= 40
    now[0] += 40.5
    assert lim.acquire("k", rpm=5, tpm=10**6, count=2) == 0
    assert 1 <= lim.acquire("k", rpm=5, tpm=10**6, count=1) <= 20  # the batch of 3 holds 3


def test_rate_limiter_requests_and_tokens() -> None:
    now = [1000.0]
    lim = RateLimiter(clock=lambda: now[0])
    assert all(lim.acquire("k", rpm=3, tpm=10**6) == 0 for _ in range(3))
    wait = lim.acquire("k", rpm=3, tpm=10**6)
    assert 59 <= wait <= 60
    now[0] += 60.5
    assert lim.acquire("k", rpm=3, tpm=10**6) == 0
    assert lim.acquire("other", rpm=3, tpm=10**6) == 0  # keys are independent
    lim.add_tokens("t", 80)
    now[0] += 30
    lim.add_tokens("t", 50)
    wait = lim.acquire("t", rpm=100, tpm=100)
    assert 29 <= wait <= 31  # the 80-token entry must age out first
    now[0] += 31
    assert lim.acquire("t", rpm=100, tpm=100) == 0


def test_ledger_finalizes_once_and_recovers_pending(tmp_path: Path) -> None:
    db = tmp_path / "l.sqlite"
    ledger = Ledger(db)
    ledger.start("r1", "k", "mx/m")
    ledger.start("r2", "k", "mx/m")
    ledger.progress("r2", 20, 5, 10)
    assert ledger.finish("r1", "ok", 10, 2, 0, 0.5)
    assert not ledger.finish("r1", "error", 99, 99, 0, 9.0)  # recorded once
    with pytest.raises(sqlite3.IntegrityError):
        ledger.start("r1", "k", "mx/m")
    # A new process finds r2 pending (crash mid-request) and bills what was recorded.
    again = Ledger(db)
    assert again.recover(lambda model, p, c, cached: p + c + cached) == 1
    r2 = again.get("r2")
    assert (r2.status, r2.prompt_tokens, r2.completion_tokens, r2.cost) == ("recovered", 20, 5, 35)
    assert again.recover(lambda *a: 1.0) == 0
    assert again.spend("k") == pytest.approx(35.5)


def test_ledger_checkpoints_off_the_request_path(tmp_path: Path, monkeypatch) -> None:
    """With background_checkpoint the writer never checkpoints (in WAL mode only a checkpoint
    writes the main file); the thread does, every CHECKPOINT_EVERY commits and on the way out."""
    import time

    from sglang_mx.provider import db as dbmod

    def main_file_pages(path: Path) -> int:
        return path.stat().st_size // 4096

    monkeypatch.setattr(dbmod, "CHECKPOINT_EVERY", 10**9)  # the thread is never asked
    quiet = tmp_path / "quiet.sqlite"
    ledger = Ledger(quiet, background_checkpoint=True)
    before = main_file_pages(quiet)
    for i in range(1500):  # ~4,000 WAL pages: SQLite's autocheckpoint would have run
        ledger.start(f"r{i}", "k", "mx/m")
        ledger.finish(f"r{i}", "ok", 1, 1, 0, 0.1)
    assert main_file_pages(quiet) == before and ledger.db.checkpointer.runs == 0
    ledger.db.stop_checkpointer()  # one last checkpoint on the way out
    assert main_file_pages(quiet) > before + 20
    assert Ledger(quiet).spend("k") == pytest.approx(150.0)

    monkeypatch.setattr(dbmod, "CHECKPOINT_EVERY", 100)
    busy = tmp_path / "busy.sqlite"
    ledger = Ledger(busy, background_checkpoint=True)
    before = main_file_pages(busy)
    for i in range(300):  # 300 commits: asked three times
        ledger.start(f"r{i}", "k", "mx/m")
    # A PASSIVE checkpoint that meets the writer mid-commit may copy nothing; the product retries
    # at the next interval (CI 2026-12-05: one run, main file unchanged), so the commits go on,
    # one each 10 ms, asking again every 100, until the main file has grown.
    deadline, i = time.monotonic() + 10, 300
    while (ledger.db.checkpointer.runs < 1 or main_file_pages(busy) <= before) and (
        time.monotonic() < deadline
    ):
        ledger.start(f"r{i}", "k", "mx/m")
        i += 1
        time.sleep(0.01)
    assert ledger.db.checkpointer.runs >= 1 and main_file_pages(busy) > before
    ledger.db.close()


BAD_BODIES = [
    (b"", "invalid_json"),
    (b"[1, 2]", "invalid_json"),
    (b'{"model": 3, "messages": []}', "invalid_model"),
    (b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', "unknown_model"),
    (b'{"model": "mx/m", "messages": "hi"}', "invalid_messages"),
    (
        b'{"model": "mx/m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 11}',
        "max_tokens_exceeded",
    ),
    (
        b'{"model": "mx/m", "messages": [{"role": "user", "content": "x"}], "top_p": true}',
        "invalid_parameter",
    ),
]


@pytest.mark.parametrize("raw,reason", BAD_BODIES)
def test_validation_reasons(tmp_path: Path, raw: bytes, reason: str) -> None:
    models = load_pricing(_pricing(tmp_path))
    with pytest.raises(ProviderError) as info:
        validate_chat(parse_json(raw), models)
    assert info.value.status == 400 and info.value.reason == reason


def test_validation_strips_internal_fields(tmp_path: Path) -> None:
    models = load_pricing(_pricing(tmp_path))
    body = {
        "model": "mx/m",
        "messages": [{"role": "user", "content": "x"}],
        "rid": "steal",
        "cache_salt": "other-tenant",
        "lora_path": "/etc",
        "temperature": 0.5,
    }
    out = validate_chat(body, models).upstream_body
    assert not {"rid", "cache_salt", "lora_path"} & set(out)
    assert out["temperature"] == 0.5 and out["max_tokens"] == 10


THINKING = [
    ({"reasoning": {"enabled": False}}, False),
    ({"reasoning": {"effort": "none"}}, False),
    ({"reasoning": {"effort": "high"}}, True),
    ({"reasoning": {"effort": "max", "summary": "auto"}}, True),  # OpenRouter's SDK's values
    ({"reasoning": {"enabled": True, "exclude": False}}, True),
    ({"chat_template_kwargs": {"enable_thinking": False}}, False),
    ({"reasoning": {"enabled": True}, "chat_template_kwargs": {"enable_thinking": True}}, True),
    ({}, None),
]


@pytest.mark.parametrize("fields,thinking", THINKING)
def test_reasoning_request_maps_to_enable_thinking(tmp_path: Path, fields, thinking) -> None:
    models = load_pricing(_pricing(tmp_path))
    body = {"model": "mx/m", "messages": [{"role": "user", "content": "x"}], **fields}
    out = validate_chat(body, models).upstream_body
    if thinking is None:
        assert "chat_template_kwargs" not in out and "reasoning" not in out
    else:
        assert out["chat_template_kwargs"] == {"enable_thinking": thinking}


BAD_REASONING = [
    ({"reasoning": "high"}, "invalid_parameter", "reasoning"),
    ({"reasoning": {"effort": "extreme"}}, "invalid_parameter", "reasoning.effort"),
    ({"reasoning": {"summary": "long"}}, "invalid_parameter", "reasoning.summary"),
    ({"reasoning": {"enabled": "yes"}}, "invalid_parameter", "reasoning.enabled"),
    ({"reasoning": {"budget": 5}}, "invalid_parameter", "reasoning"),
    ({"reasoning": {"max_tokens": 512}}, "unsupported_parameter", "reasoning.max_tokens"),
    ({"reasoning": {"exclude": True}}, "unsupported_parameter", "reasoning.exclude"),
    ({"chat_template_kwargs": {"tools": []}}, "invalid_parameter", "chat_template_kwargs"),
    ({"chat_template_kwargs": {"enable_thinking": 1}}, "invalid_parameter", "enable_thinking"),
    (
        {"reasoning": {"enabled": False}, "chat_template_kwargs": {"enable_thinking": True}},
        "invalid_parameter",
        "turns it off",
    ),
]


@pytest.mark.parametrize("fields,reason,named", BAD_REASONING)
def test_reasoning_request_refusals_name_the_field(tmp_path: Path, fields, reason, named) -> None:
    models = load_pricing(_pricing(tmp_path))
    body = {"model": "mx/m", "messages": [{"role": "user", "content": "x"}], **fields}
    with pytest.raises(ProviderError) as info:
        validate_chat(body, models)
    assert info.value.status == 400 and info.value.reason == reason
    assert named in info.value.message


def test_reasoning_mirrored_under_openrouters_name() -> None:
    from sglang_mx.provider.openai_service import mirror_reasoning

    choices = [
        {"delta": {"reasoning_content": "think", "content": None}},
        {"delta": {"content": "x"}},
        {"delta": {"reasoning_content": "a", "reasoning": "kept"}},
    ]
    mirror_reasoning(choices, "delta")
    assert choices[0]["delta"]["reasoning"] == "think"
    assert "reasoning" not in choices[1]["delta"]
    assert choices[2]["delta"]["reasoning"] == "kept"
    mirror_reasoning(None, "message")  # an upstream reply without choices is left alone
