"""Token-exact prompts for a trace: each segment key maps to a deterministic token sequence drawn
from the target tokenizer's "stable words" (tokens that decode to one space-led word and encode
back to themselves), so token ids and decoded text give the same counts."""

from __future__ import annotations

import hashlib
import random
import re
import warnings
from pathlib import Path

from sglang_mx.measure.tracegen import Trace, TraceRequest

_WORD = re.compile(r"^ [A-Za-z]{2,}$")
MIN_POOL = 16


def load_tokenizer(path: str | Path):
    """A `tokenizers.Tokenizer` from a model directory or tokenizer.json (offline)."""
    from tokenizers import Tokenizer

    path = Path(path)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer.json at {path}; pass --tokenizer MODEL_DIR")
    return Tokenizer.from_file(str(path))


class SegmentTokens:
    """Deterministic token ids per segment key for one tokenizer."""

    def __init__(self, tokenizer, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.seed = seed
        self.pool = self._stable_pool()
        self.text_exact = self._round_trips()
        self._cache: dict[str, list[int]] = {}

    def _stable_pool(self) -> list[int]:
        tok = self.tokenizer
        pool = []
        for i in range(tok.get_vocab_size()):
            text = tok.decode([i], skip_special_tokens=False)
            if _WORD.match(text) and tok.encode(text, add_special_tokens=False).ids == [i]:
                pool.append(i)
        if len(pool) < MIN_POOL:
            raise ValueError(
                f"tokenizer has only {len(pool)} single-word tokens; need {MIN_POOL} to build "
                "token-exact prompts"
            )
        return pool

    def _round_trips(self) -> bool:
        ids = self._draw("__probe__", 256)
        text = self.tokenizer.decode(ids)
        ok = self.tokenizer.encode(text, add_special_tokens=False).ids == ids
        if not ok:
            warnings.warn(
                "decoded prompts do not re-encode to the same tokens with this tokenizer; send "
                "token ids (the default) for exact counts",
                stacklevel=2,
            )
        return ok

    def _draw(self, key: str, n: int) -> list[int]:
        digest = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "little"))
        return [self.pool[rng.randrange(len(self.pool))] for _ in range(n)]

    def segment(self, key: str, n: int) -> list[int]:
        """First n tokens of segment `key` (a longer request extends the same sequence)."""
        have = self._cache.get(key, [])
        if len(have) < n:
            have = self._draw(key, n)
            self._cache[key] = have
        return have[:n]

    def prompt_ids(self, request: TraceRequest) -> list[int]:
        return [t for key, n in request.segments for t in self.segment(key, n)]

    def text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)


def materialize(trace: Trace, tokens: SegmentTokens) -> dict[str, list[int]]:
    """Prompt ids for every request and priming prefix of a trace, keyed by request id."""
    out = {r.id: tokens.prompt_ids(r) for r in trace.requests}
    for key, n in trace.prime:
        out[f"prime:{key}"] = tokens.segment(key, n)
    return out
