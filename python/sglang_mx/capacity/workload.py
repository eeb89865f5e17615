"""Workload specifications (lengths, prefix-hit target, sessions, arrivals) and named presets."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace

from sglang_mx.capacity.tables import Overridable


@dataclass(frozen=True)
class LengthDist:
    """`fixed` (value), `uniform` (lo..hi inclusive) or `normal` (mean, std; clipped to >= lo)."""

    kind: str = "fixed"
    value: int = 1
    lo: int = 1
    hi: int = 1
    std: float = 0.0

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.value
        if self.kind == "uniform":
            return rng.randint(self.lo, self.hi)
        if self.kind == "normal":
            return max(self.lo, round(rng.gauss(self.value, self.std)))
        raise ValueError(f"unknown length distribution {self.kind!r}")

    @property
    def mean(self) -> float:
        return (self.lo + self.hi) / 2 if self.kind == "uniform" else float(self.value)

    def scaled(self, factor: float) -> LengthDist:
        """The same distribution with every length times `factor` (rounded down, at least 1)."""

        def f(n: int) -> int:
            return max(1, int(n * factor))

        return replace(
            self, value=f(self.value), lo=f(self.lo), hi=f(self.hi), std=self.std * factor
        )

    @classmethod
    def parse(cls, text: str | int) -> LengthDist:
        """`20000`, `uniform:1000:3000` or `normal:20000:2000`."""
        if isinstance(text, int) or str(text).isdigit():
            return cls("fixed", value=int(text))
        kind, *nums = str(text).split(":")
        if kind == "uniform" and len(nums) == 2:
            lo, hi = int(nums[0]), int(nums[1])
            return cls("uniform", value=(lo + hi) // 2, lo=lo, hi=hi)
        if kind == "normal" and len(nums) == 2:
            return cls("normal", value=int(nums[0]), std=float(nums[1]), lo=1)
        raise ValueError(f"bad length {text!r}; use N, uniform:LO:HI or normal:MEAN:STD")


@dataclass(frozen=True)
class WorkloadSpec(Overridable):
    """One workload. `turns` > 1 makes growing multi-turn sessions whose earlier turns are the
    cached part; `prefix_groups` shared prefixes (system prompt + documents) are shared across
    sessions. In session mode `input_len` is each session's mean prompt length."""

    name: str = "custom"
    input_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 2048))
    output_len: LengthDist = field(default_factory=lambda: LengthDist("fixed", 32))
    hit_rate: float = 0.6
    turns: int = 1
    prefix_groups: int = 4
    num_requests: int = 24
    arrival: str = "poisson"  # poisson | fixed-rate | concurrency | trace (a replayed file's)
    rate: float = 1.0  # requests/s for poisson and fixed-rate
    concurrency: int = 4  # in-flight requests for arrival=concurrency
    prime: bool = True  # send each shared prefix once before the measured run
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.hit_rate < 1.0:
            raise ValueError(f"hit_rate {self.hit_rate} must be in [0, 1)")
        if self.arrival not in ("poisson", "fixed-rate", "concurrency", "trace"):
            raise ValueError(f"arrival {self.arrival!r}: use poisson, fixed-rate or concurrency")
        if self.turns < 1 or self.prefix_groups < 1 or self.num_requests < 1:
            raise ValueError("turns, prefix_groups and num_requests must be >= 1")

    @classmethod
    def fixed(cls, name: str, input_len: int, output_len: int, **fields) -> WorkloadSpec:
        """A workload whose every request has the same prompt and output lengths."""
        return cls(
            name=name,
            input_len=LengthDist("fixed", input_len),
            output_len=LengthDist("fixed", output_len),
            **fields,
        )

    @classmethod
    def from_dict(cls, d: dict) -> WorkloadSpec:
        d = dict(d)
        for key in ("input_len", "output_len"):
            if isinstance(d.get(key), dict):
                d[key] = LengthDist(**d[key])
        return cls(**d)


# name, input tokens, output tokens, session turns, shared prefixes, requests, requests/s; every
# preset has fixed lengths and 60% of its prompt tokens cached.
_PRESET_ROWS = [
    # The public GLM-5.2 / 8x MI355X workload: 20k in, 1k out, 60% of prompt tokens cached.
    ("production-20k-1k-60", 20000, 1000, 1, 8, 240, 2.4),
    # Same token mix reached through 3-turn agent sessions instead of shared documents.
    ("agentic-20k-1k-60", 20000, 1000, 3, 8, 240, 2.4),
    # production-20k-1k-60's shape (20:1 input:output tokens, 60% of prompt tokens cached, 8
    # shared prefixes, 2.4 req/s) at the bundled GLM-5 model's 512-token context
    # (docs/tiny-model.md): the production-shaped workload on a CPU box in about a minute.
    ("production-480-24-60", 480, 24, 1, 8, 48, 2.4),
    # CPU scale for the bundled toy model.
    ("cpu-2k-32-60", 2048, 32, 1, 4, 24, 2.0),
]
PRESETS: dict[str, WorkloadSpec] = {
    name: WorkloadSpec.fixed(
        name,
        tokens_in,
        tokens_out,
        hit_rate=0.6,
        turns=turns,
        prefix_groups=groups,
        num_requests=requests,
        rate=rate,
    )
    for name, tokens_in, tokens_out, turns, groups, requests, rate in _PRESET_ROWS
}


def get_preset(name: str) -> WorkloadSpec:
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    return PRESETS[name]


_SHORTHAND = re.compile(r"^(\d+(?:\.\d+)?)k-(\d+(?:\.\d+)?)k-(\d+)$")
WORKLOAD_HELP = (
    "a preset (" + ", ".join(PRESETS) + ") or IN-OUT-HIT like 20k-1k-60 (20,000 tokens in, "
    "1,000 out, 60%% of prompt tokens cached: production-20k-1k-60's shape)"
)


def named_workload(text: str) -> WorkloadSpec:
    """What `--workload NAME` means in every command (bench run/sweep, plan, roofline): a preset,
    or IN-OUT-HIT shorthand on the production preset's shape. ValueError names the choices."""
    m = _SHORTHAND.match(text.strip().lower())
    if m:
        base = get_preset("production-20k-1k-60")
        spec = base.with_overrides(
            name=text,
            input_len=LengthDist("fixed", round(float(m[1]) * 1000)),
            output_len=LengthDist("fixed", round(float(m[2]) * 1000)),
            hit_rate=int(m[3]) / 100,
        )
        # one workload, one name: 20k-1k-60 is the preset itself, and reports say so
        return base if spec.with_overrides(name=base.name) == base else spec
    if text in PRESETS:
        return PRESETS[text]
    raise ValueError(
        f"workload {text!r}: use a preset ({', '.join(PRESETS)}) or IN-OUT-HIT like 20k-1k-60"
    )
