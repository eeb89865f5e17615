"""Parallel layout of one node: attention TP, data-parallel groups, how experts are split."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """`gpus` = attn_tp x dp. `moe_shards` GPUs split one copy of the experts (EP or MoE-TP move
    the same bytes); gpus / moe_shards copies exist, each serving its share of the tokens."""

    gpus: int
    attn_tp: int
    dp: int
    moe_shards: int
    name: str = ""

    def __post_init__(self) -> None:
        if self.attn_tp * self.dp != self.gpus:
            raise ValueError(f"layout {self.name}: attn_tp {self.attn_tp} x dp {self.dp} != gpus")
        if self.gpus % self.moe_shards:
            raise ValueError(f"layout {self.name}: {self.moe_shards} MoE shards don't divide gpus")

    @property
    def expert_replicas(self) -> int:
        return self.gpus // self.moe_shards


_LAYOUT = re.compile(r"^tp(\d+)(?:xdp(\d+))?(?:-dpattn(\d+))?$")


def parse_layout(text: str) -> Layout:
    """`tp8` (one TP8 engine), `tp4xdp2` (two TP4 engines behind a router), `tp8-dpattn8`
    (one TP8 engine with DP attention: attention data-parallel, experts across all 8)."""
    m = _LAYOUT.match(text.strip().lower())
    if not m:
        raise ValueError(f"bad layout {text!r}; use tp8, tp4xdp2 or tp8-dpattn8")
    tp, replicas, dpattn = int(m[1]), int(m[2] or 1), int(m[3] or 1)
    if dpattn > 1:
        if tp % dpattn:
            raise ValueError(f"layout {text}: dpattn {dpattn} must divide tp {tp}")
        return Layout(tp * replicas, tp // dpattn, dpattn * replicas, tp, name=text)
    return Layout(tp * replicas, tp, replicas, tp, name=text)
