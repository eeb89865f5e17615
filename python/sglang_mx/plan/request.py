"""A request as the simulator tracks it: its prompt as segment runs and its progress."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sglang_mx.plan.radix import Node, Run


@dataclass(eq=False)
class SimRequest:
    id: str
    runs: list[Run]
    output_len: int
    arrival: float = 0.0
    after: str | None = None
    expected_cached: int = 0
    # progress
    prefix: int = 0  # tokens of fill_runs already in KV (cached prefix + prefilled so far)
    inserted: int = 0  # of those, tokens handed to the radix tree
    private: int = 0  # KV tokens this request holds outside the tree
    out: int = 0
    out_carry: float = 0.0  # fractional tokens of speculative decoding
    node: Node | None = None
    cached: int = -1  # cached tokens at first admission (what usage.cached_tokens reports)
    start: float = math.nan  # when it reached the server
    first_token: float = math.nan
    token_times: list[float] = field(default_factory=list)
    finish: float = math.nan
    retractions: int = 0
    rank: int = 0
    decode_rank: int = 0  # PD: the decode engine the router paired with it at arrival
    # PD stage times (SGLang's per-stage metrics name the same boundaries)
    bootstrapped: float = math.nan  # decode side pre-allocated: prefill may admit it
    kv_sent: float = math.nan  # prefill result processed: the KV leaves
    kv_landed: float = math.nan  # the KV is at the decode side

    @property
    def input_len(self) -> int:
        return sum(n for _, n in self.runs)

    def fill_runs(self) -> list[Run]:
        """What a (re-)prefill computes: the prompt, plus generated tokens after a retraction."""
        return self.runs + ([(f"out:{self.id}", self.out)] if self.out else [])

    @property
    def fill_len(self) -> int:
        return self.input_len + self.out

    @property
    def done(self) -> bool:
        return self.out >= self.output_len
