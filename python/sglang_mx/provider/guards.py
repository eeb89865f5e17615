"""The provider's own guard on token ids and lengths: it may front an SGLang without our plugin,
where one out-of-vocabulary prompt id kills the worker for everyone.

The limits are the upstream's: `vocab_size` and `context_length` from `/get_model_info` (reported
by the sglang_mx plugin), the context length also from `/v1/models` (`max_model_len`, plain
SGLang), and the vocabulary from the model's own config.json when the upstream names a local
model directory. They are learned at start-up and refreshed in the background (at most every
`REFRESH_S`, and on each GET /v1/models). Until a vocabulary size is known, token ids are checked
only for type and sign, and a warning says so once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_mx.guards.checks import GuardViolation, check_logit_bias, check_token_ids
from sglang_mx.provider.errors import ProviderError, bad_request

log = logging.getLogger(__name__)

REFRESH_S = 60.0
MIN_REFRESH_S = 5.0  # even a forced refresh (GET /v1/models) asks the upstream at most this often
_MODEL_INFO_PATHS = ("/get_model_info", "/model_info")


@dataclass(frozen=True)
class Limits:
    vocab_size: int | None = None
    context_length: int | None = None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _local_vocab(model_path: Any) -> int | None:
    """vocab_size from config.json of a model directory on this host (None when not local)."""
    if not isinstance(model_path, str) or not model_path:
        return None
    config = Path(model_path) / "config.json"
    try:
        data = json.loads(config.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    text_config = data.get("text_config")
    vocab = data.get("vocab_size")
    if vocab is None and isinstance(text_config, dict):
        vocab = text_config.get("vocab_size")
    return _positive_int(vocab)


def limits_from(model_info: dict[str, Any] | None, models: dict[str, Any] | None) -> Limits:
    """Combine what the upstream said; the plugin's figures win over derived ones."""
    info = model_info if isinstance(model_info, dict) else {}
    vocab = _positive_int(info.get("vocab_size")) or _local_vocab(info.get("model_path"))
    context = _positive_int(info.get("context_length"))
    if context is None and isinstance(models, dict):
        lengths = [
            _positive_int(m.get("max_model_len"))
            for m in models.get("data") or []
            if isinstance(m, dict)
        ]
        known = [n for n in lengths if n]
        context = min(known) if known else None
    return Limits(vocab, context)


class UpstreamGuard:
    def __init__(self, upstream: Any) -> None:
        self.upstream = upstream  # provider.upstream.Upstream: its httpx client is reused
        self.limits = Limits()
        self.served: frozenset[str] = frozenset()  # names the upstream serves its model under
        self.learned_at = float("-inf")
        self._refreshing: asyncio.Task | None = None
        self._warned = False

    async def _get(self, path: str) -> Any:
        import httpx

        try:
            resp = await self.upstream.client.get(path, timeout=5.0)
        except httpx.HTTPError:
            return None
        if resp.status_code != 200:
            return None
        try:
            return resp.json()
        except ValueError:
            return None

    async def refresh(self) -> Limits:
        """Ask the upstream now; keeps the old limits for what it could not tell."""
        info = None
        for path in _MODEL_INFO_PATHS:
            info = await self._get(path)
            if isinstance(info, dict):
                break
        models = await self._get("/v1/models")
        new = limits_from(info, models)
        if info is None and models is None:
            # Upstream down: keep what we knew; ask again in MIN_REFRESH_S, not per request.
            self.learned_at = time.monotonic() - REFRESH_S + MIN_REFRESH_S
            return self.limits
        self.served = _served_names(info, models) or self.served
        self.limits = Limits(
            new.vocab_size or self.limits.vocab_size,
            new.context_length or self.limits.context_length,
        )
        self.learned_at = time.monotonic()
        if self.limits.vocab_size is None and not self._warned:
            self._warned = True
            log.warning(
                "upstream reports no vocabulary size (no sglang_mx plugin, model not local): "
                "token ids are checked for type and sign only"
            )
        return self.limits

    def refresh_soon(self, force: bool = False) -> None:
        """Start a background refresh when the limits are stale (never blocks a request)."""
        if self._refreshing is not None and not self._refreshing.done():
            return
        age = time.monotonic() - self.learned_at
        if age >= REFRESH_S or (force and age >= MIN_REFRESH_S):
            self._refreshing = asyncio.ensure_future(self.refresh())

    def check_native(self, body: dict[str, Any]) -> None:
        """A native /generate body the provider rebuilt (native.py checked the types)."""
        self.refresh_soon()
        try:
            _check_native(body, self.limits)
        except GuardViolation as e:
            raise bad_request(str(e), "invalid_parameter") from e

    def check(self, body: dict[str, Any]) -> None:
        """The upstream body the provider built (validated for types already)."""
        self.refresh_soon()
        limits = self.limits
        try:
            _check(body, limits)
        except GuardViolation as e:
            raise bad_request(str(e), "invalid_parameter") from e


def _served_names(info: Any, models: Any) -> frozenset[str]:
    names = set()
    if isinstance(info, dict):
        names.update(
            v for k in ("served_model_name", "model_path") if isinstance(v := info.get(k), str)
        )
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        names.update(
            m["id"] for m in models["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)
        )
    return frozenset(names)


def _context_check(n_prompt: int, max_new: int, context: int | None) -> None:
    if context is None:
        return
    if n_prompt >= context:
        raise ProviderError(
            413,
            f"prompt of {n_prompt} tokens does not fit the {context}-token context",
            "context_length_exceeded",
        )
    if n_prompt + max_new > context:
        raise ProviderError(
            413,
            f"prompt ({n_prompt} tokens) + max_tokens ({max_new}) exceeds the {context}-token "
            "context",
            "context_length_exceeded",
        )


def _check_native(body: dict[str, Any], limits: Limits) -> None:
    vocab = limits.vocab_size or 2**63  # without a known vocabulary only the sign is checkable
    sampling = body["sampling_params"]
    ids = body.get("input_ids")
    if ids is not None:
        rows = ids if isinstance(ids[0], list) else [ids]
        for i, row in enumerate(rows):
            where = f"input_ids[{i}]" if rows is ids else "input_ids"
            check_token_ids(where, row, vocab, allow_empty=False)
            _context_check(len(row), sampling["max_new_tokens"], limits.context_length)
    for name in ("stop_token_ids", "logit_bias"):
        if sampling.get(name) is not None:
            check = check_logit_bias if name == "logit_bias" else check_token_ids
            check(f"sampling_params.{name}", sampling[name], vocab)
    if body.get("token_ids_logprob") is not None:
        check_token_ids("token_ids_logprob", body["token_ids_logprob"], vocab)


def _check(body: dict[str, Any], limits: Limits) -> None:
    vocab = limits.vocab_size
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        # Without a known vocabulary only the sign is checkable.
        check_token_ids("prompt", prompt, vocab or 2**63, allow_empty=False)
        if limits.context_length is not None:
            total = len(prompt) + int(body.get("max_tokens") or 0)
            if len(prompt) >= limits.context_length:
                raise ProviderError(
                    413,
                    f"prompt of {len(prompt)} tokens does not fit the "
                    f"{limits.context_length}-token context",
                    "context_length_exceeded",
                )
            if total > limits.context_length:
                raise ProviderError(
                    413,
                    f"prompt ({len(prompt)} tokens) + max_tokens ({body.get('max_tokens')}) "
                    f"exceeds the {limits.context_length}-token context",
                    "context_length_exceeded",
                )
    if body.get("logit_bias") is not None:
        check_logit_bias("logit_bias", body["logit_bias"], vocab or 2**63)
    for name in ("top_logprobs", "logprobs"):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and vocab is not None:
            if value > vocab:
                raise GuardViolation(name, f"={value} exceeds the vocabulary size ({vocab})")
