"""Prefill/decode disaggregation over Mooncake's TCP transport on the CPU platform.

SGLang 0.5.23's mooncake backend moves CPU-resident KV over TCP as it is (`MOONCAKE_PROTOCOL=tcp
MC_FORCE_TCP=1`: the transfer engine registers the host pages of the MLA latent and indexer pools
with `register_memory` and writes them with `TcpTransport`). Two spots on the prefill side assume
a CUDA device and are switched off here, each to SGLang's own host path:

- `disaggregation/prefill.py` `_send_kv_chunk` (line 1746): for a sender with
  `supports_host_tensor_indices` (MooncakeKVSender, `mooncake/conn.py` line 3312) it copies the
  page indices into `torch.empty(..., pin_memory=True)` and records a `torch.cuda.Event`; on a
  CPU build that raises "pin_memory=True requires a CUDA or other accelerator backend" and kills
  the prefill scheduler at the first request. With the attribute False it takes the numpy path
  (`kv_to_page_indices`), which the other backends use.
- `prefill.py` `maybe_send_cached_prefix_chunk` (line 1495): under the overlap scheduler, a
  request whose prefix is already cached records a `torch.cuda.Event` before sending that prefix
  early ("Tried to instantiate dummy base class Event" on CPU). Early send is an optimisation:
  the send after the forward covers the whole prompt, so on CPU with overlap it is skipped.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

from sglang_mx.sglang_version import hook

logger = logging.getLogger(__name__)

SENDER_INIT = "sglang.srt.disaggregation.mooncake.conn.MooncakeKVSender.__init__"
EARLY_SEND = (
    "sglang.srt.disaggregation.prefill.SchedulerDisaggregationPrefillMixin"
    ".maybe_send_cached_prefix_chunk"
)


def _host_indices(result: Any, sender: Any, *args: Any, **kwargs: Any) -> None:
    # Instance attribute: the class keeps SGLang's value for any other platform in the process.
    sender.supports_host_tensor_indices = False


def _early_send(original, scheduler, *args: Any, **kwargs: Any) -> None:
    if getattr(scheduler, "enable_overlap", False):
        return None  # the post-forward send covers the prefix (no CUDA event to wait on)
    return original(scheduler, *args, **kwargs)


def disaggregation_launch(argv: Sequence[str]) -> bool:
    """Whether this process serves one side of PD (`--disaggregation-mode prefill|decode` on its
    command line; SGLang's spawned schedulers get the launcher's argv back)."""
    for i, arg in enumerate(argv):
        if arg.startswith("--disaggregation-mode"):
            value = arg.partition("=")[2] or (argv[i + 1] if i + 1 < len(argv) else "")
            return value not in ("", "null")
    return False


def register(argv: Sequence[str] | None = None) -> None:
    """Only in a PD launch: SGLang applies hooks by importing their targets at plugin load, and
    importing the disaggregation modules there pulls in prometheus_client before SGLang sets
    PROMETHEUS_MULTIPROC_DIR, so the main process's metrics (sglang:prompt_tokens_total, ...)
    would vanish from /metrics on every server."""
    if not disaggregation_launch(sys.argv if argv is None else argv):
        return
    hook(SENDER_INIT, _host_indices, "AFTER")
    hook(EARLY_SEND, _early_send, "AROUND")
