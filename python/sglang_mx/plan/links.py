"""Interconnect: link table (data/links.json) and the cost of the collectives a step runs.

Two kinds of link per hardware: scale-up (xGMI, NVLink: the collectives inside an engine) and
scale-out (the RDMA NIC each GPU owns: what PD disaggregation moves a request's KV over).

Alpha-beta model on a full mesh (xGMI, NVSwitch): a collective moving B bytes per GPU costs
steps x latency + wire bytes / per-GPU bandwidth. All-reduce is SGLang's custom all-reduce,
whichever of one-shot (1 step, (n-1) x B read from peers) and two-shot (reduce-scatter +
all-gather: 2 steps, 2(n-1)/n x B) is cheaper; all-gather / reduce-scatter: 1 step,
(n-1)/n x B; all-to-all: 1 step, (n-1)/n x B."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sglang_mx.capacity.tables import load_records, lookup

DATA = Path(__file__).parent / "data" / "links.json"
DEFAULT_LINK = {
    "MI355X": "xgmi-mi355x",
    "MI300X": "xgmi-mi300x",
    "B200": "nvlink5",
    "H200": "nvlink4",
}
DEFAULT_SCALEOUT = {
    "MI355X": "pollara400-mi355x",
    "MI300X": "ndr400-mi300x",
    "B200": "ndr400-b200",
    "H200": "ndr400-h200",
}


@dataclass(frozen=True)
class Link:
    name: str
    gb_s: float
    latency_us: float
    source: str

    @property
    def bytes_per_s(self) -> float:
        return self.gb_s * 1e9

    @property
    def latency_s(self) -> float:
        return self.latency_us * 1e-6


@cache
def link_table() -> dict[str, Link]:
    return load_records(DATA, Link)


def get_link(name: str) -> Link:
    return lookup(link_table(), name, "link")


def link_for(hardware: str) -> Link:
    return get_link(DEFAULT_LINK.get(hardware, "pcie5"))


def scaleout_for(hardware: str) -> Link | None:
    """The per-GPU RDMA NIC of this hardware's nodes; None when the table has none for it."""
    name = DEFAULT_SCALEOUT.get(hardware)
    return get_link(name) if name else None


def all_reduce_s(nbytes: float, n: int, link: Link) -> float:
    """All-reduce of `nbytes` per GPU over n GPUs: min(one-shot, two-shot)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    one_shot = link.latency_s + (n - 1) * nbytes / link.bytes_per_s
    two_shot = 2 * link.latency_s + 2 * (n - 1) / n * nbytes / link.bytes_per_s
    return min(one_shot, two_shot)


def all_gather_s(nbytes_total: float, n: int, link: Link) -> float:
    """All-gather (or reduce-scatter) of `nbytes_total` gathered bytes over n GPUs."""
    if n <= 1 or nbytes_total <= 0:
        return 0.0
    return link.latency_s + (n - 1) / n * nbytes_total / link.bytes_per_s


def all_to_all_s(nbytes: float, n: int, link: Link) -> float:
    """All-to-all where each GPU sends `nbytes` spread evenly over all n GPUs (1/n stays local)."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    return link.latency_s + (n - 1) / n * nbytes / link.bytes_per_s
