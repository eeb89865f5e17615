"""One core group per rank when a CPU box runs more SGLang ranks than it has NUMA nodes.

SGLang 0.5.23 binds each CPU rank to a NUMA node (`srt/utils/numa_utils.init_threads_binding`)
and asserts when there are more ranks than nodes, unless SGLANG_CPU_OMP_THREADS_BIND names a core
group per rank ("0|1"). A 2-core development box has one node, so `--tp 2` died with that
assertion. The CPU platform now splits the cores it may use into one contiguous group per rank
on this node and sets the variable (the scheduler processes inherit it); an explicit setting
always wins, and fewer cores than ranks is refused in one line naming the variable.

SGLang asserts on the whole launch's rank count (dp x tp x pp, `distributed/bootstrap.py`) but
indexes the variable by each rank's local device id (0..local ranks - 1 on every node), so with
`--nnodes N` each node's value holds its own ranks' groups only. When `--dist-init-addr` is a
loopback address, all the "nodes" run on this box: each takes its node rank's slice of the cores,
so the two processes of a loopback `--nnodes 2 --tp 2` do not share one.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

BIND_ENV = "SGLANG_CPU_OMP_THREADS_BIND"


class CpuBindingError(ValueError):
    """More ranks than cores, and no explicit SGLANG_CPU_OMP_THREADS_BIND."""


def local_ranks(tp: int, pp: int, dp: int, dp_attention: bool, nnodes: int) -> int:
    """Scheduler processes SGLang starts on this node: TP x PP ranks split over the nodes, times
    the DP replicas (DP attention partitions the TP group instead of adding processes)."""
    ranks = max(1, tp * pp // max(1, nnodes))
    return ranks if dp_attention else ranks * max(1, dp)


def bind_groups(ranks: int, cpus: Sequence[int]) -> str:
    """SGLANG_CPU_OMP_THREADS_BIND for `ranks` ranks over `cpus`: contiguous, even groups
    ("0|1", "0,1|2,3"); leftover cores go to the first groups."""
    cpus = sorted(cpus)
    if ranks > len(cpus):
        raise CpuBindingError(
            f"{ranks} SGLang ranks on this host but only {len(cpus)} usable CPU cores: use fewer "
            f'ranks, or set {BIND_ENV} to one core group per rank (e.g. "0|1")'
        )
    size, extra = divmod(len(cpus), ranks)
    groups, start = [], 0
    for r in range(ranks):
        n = size + (1 if r < extra else 0)
        groups.append(",".join(str(c) for c in cpus[start : start + n]))
        start += n
    return "|".join(groups)


def on_loopback(dist_init_addr: str | None) -> bool:
    """Whether `--dist-init-addr` (HOST:PORT) names this box's loopback: every node is here."""
    if not dist_init_addr:
        return False
    host = dist_init_addr.rsplit(":", 1)[0].strip("[]")
    return host == "localhost" or host == "::1" or host.startswith("127.")


def node_groups(
    local: int, nnodes: int, node_rank: int, loopback: bool, cpus: Sequence[int]
) -> str:
    """This node's SGLANG_CPU_OMP_THREADS_BIND: a group per local rank over its usable cores;
    on loopback, node `node_rank`'s slice of a split over all nodes' ranks."""
    if not (loopback and nnodes > 1):
        return bind_groups(local, cpus)
    if not 0 <= node_rank < nnodes:
        raise CpuBindingError(f"--node-rank {node_rank} is outside 0..{nnodes - 1} (--nnodes)")
    groups = bind_groups(local * nnodes, cpus).split("|")
    return "|".join(groups[node_rank * local : (node_rank + 1) * local])


def numa_nodes() -> int:
    """NUMA nodes with CPUs (SGLang's own count), 1 where the box exposes none."""
    from sglang.srt.utils.common import get_cpu_ids_by_node

    try:
        return max(1, len(get_cpu_ids_by_node()))
    except Exception:  # no /sys NUMA view (containers): one node, as SGLang then assumes
        return 1


def apply(server_args: Any) -> str | None:
    """Set SGLANG_CPU_OMP_THREADS_BIND for this launch when it has more ranks than NUMA nodes
    and the user set none; returns what was set (None: nothing to do)."""
    if os.environ.get(BIND_ENV):
        return None
    # 0.5.23 spells DP attention attn_dp_size; `--dp N --enable-dp-attention` resolves to it.
    dp_attention = bool(getattr(server_args, "enable_dp_attention", False)) or (
        int(getattr(server_args, "attn_dp_size", 1) or 1) > 1
    )
    nnodes = max(1, int(getattr(server_args, "nnodes", 1) or 1))
    ranks = local_ranks(
        server_args.tp_size, server_args.pp_size, server_args.dp_size, dp_attention, nnodes
    )
    # SGLang's assertion counts every node's ranks, so a node with one rank asserts too.
    if ranks * nnodes <= numa_nodes():
        return None
    value = node_groups(
        ranks, nnodes, int(getattr(server_args, "node_rank", 0) or 0),
        on_loopback(getattr(server_args, "dist_init_addr", None)),
        sorted(os.sched_getaffinity(0)),
    )  # fmt: skip
    os.environ[BIND_ENV] = value
    logger.info("sglang_mx: %d ranks on this CPU node: %s=%s", ranks, BIND_ENV, value)
    return value


def ranks_from_cli(argv: Sequence[str]) -> int:
    """The local rank count a launch_server command line asks for (the flags and aliases SGLang
    0.5.23 takes), for `sglang-mx serve` to refuse before SGLang starts."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--tp-size", "--tp", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--pp-size", "--pp", "--pipeline-parallel-size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", "--data-parallel-size", type=int, default=1)
    p.add_argument("--attn-dp-size", "--attention-data-parallel-size", type=int, default=1)
    p.add_argument("--enable-dp-attention", action="store_true")
    p.add_argument("--nnodes", type=int, default=1)
    ns, _ = p.parse_known_args(list(argv))
    dp_attention = ns.enable_dp_attention or ns.attn_dp_size > 1
    return local_ranks(ns.tp_size, ns.pp_size, ns.dp_size, dp_attention, ns.nnodes)
