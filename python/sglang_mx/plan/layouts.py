"""Layouts the planner simulates: bench's node layouts (tp8, tp4xdp2, tp8-dpattn8) plus
`-ep` (experts split by EP with all-to-all dispatch/combine) and `pd:<prefill>+<decode>`
(prefill/decode disaggregation: two engines, KV shipped between them over the scale-up link)."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.capacity.parallel import Layout, parse_layout


@dataclass(frozen=True)
class PlanLayout:
    name: str
    node: Layout  # all of its GPUs, as the roofline sees them
    moe_a2a: bool = False
    prefill: PlanLayout | None = None  # set for pd: layouts
    decode: PlanLayout | None = None

    @property
    def gpus(self) -> int:
        return self.node.gpus

    @property
    def replicas(self) -> int:
        """Independent engines behind round-robin dispatch."""
        return self.node.gpus // self.node.moe_shards

    @property
    def ranks(self) -> int:
        """DP-attention ranks per engine (they step in lockstep)."""
        return self.node.dp // self.replicas

    @property
    def engine(self) -> Layout:
        """One engine's layout: its GPUs, attention TP, DP-attention ranks, expert split."""
        g = self.node.moe_shards
        return Layout(g, self.node.attn_tp, self.ranks, g, name=f"{self.name} (one engine)")

    @property
    def is_pd(self) -> bool:
        return self.prefill is not None


def parse_plan_layout(text: str) -> PlanLayout:
    text = text.strip().lower()
    if text.startswith("pd:"):
        parts = text[3:].split("+")
        if len(parts) != 2:
            raise ValueError(f"bad layout {text!r}; use pd:<prefill layout>+<decode layout>")
        p, d = (parse_plan_layout(x) for x in parts)
        if p.is_pd or d.is_pd:
            raise ValueError(f"layout {text}: nested pd: is not a layout")
        gpus = p.gpus + d.gpus
        # the roofline's view of a pd pair: all GPUs with the decode side's split
        node = Layout(gpus, d.node.attn_tp, gpus // d.node.attn_tp, gpus, name=text)
        return PlanLayout(text, node, d.moe_a2a, prefill=p, decode=d)
    a2a = text.endswith("-ep")
    base = text[:-3] if a2a else text
    return PlanLayout(text, parse_layout(base), moe_a2a=a2a)
