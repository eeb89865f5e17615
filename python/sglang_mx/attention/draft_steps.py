"""EAGLE's multi-step draft decode over our backends (`mx_dsa`, `mx_triton`), chain drafts (topk 1).

SGLang 0.5.23's EAGLE v2 worker (`speculative/eagle_worker_v2.py: draft_forward`) runs
`--speculative-num-steps` - 1 draft decode forwards per iteration, step i under
`draft_attn_backend.attn_backends[i]`, after one `init_forward_metadata(forward_batch)` on the
container. Every step's ForwardBatch carries the committed `seq_lens`; the draft tokens' KV slots
were assigned before the loop (`prepare_for_draft` -> `assign_draft_cache_locs_contiguous`): with
topk 1, request r's draft token j sits at req_to_token[r, seq_len + j] and step i writes it
(`out_cache_loc[i]`). So step i attends the committed tokens plus draft tokens 0..i: a plain decode
over seq_len + i + 1 tokens of the same req_to_token row, which each child backend plans from a
view of the batch with those lengths.

topk > 1 (a draft tree) would need per-branch KV rows: each branch's tokens live in their own
slots (page-aligned per branch when page > 1, `duplicate_prefix_tail_to_draft_branches`), so a
child must attend prefix + that branch's chain, i.e. a block table per (request, branch) built as
SGLang's `generate_draft_decode_kv_indices` does, and top-k indexer scores per branch for DSA.
That is refused with this explanation rather than served wrong.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any


def step_view(forward_batch: Any, step: int) -> Any:
    """The batch as draft step `step` sees it: each request `step + 1` tokens longer."""
    view = copy.copy(forward_batch)
    extra = step + 1
    view.seq_lens = forward_batch.seq_lens + extra
    if getattr(forward_batch, "seq_lens_cpu", None) is not None:
        view.seq_lens_cpu = forward_batch.seq_lens_cpu + extra
    if getattr(forward_batch, "seq_lens_sum", None) is not None:
        view.seq_lens_sum = forward_batch.seq_lens_sum + extra * forward_batch.batch_size
    return view


class MultiStepDraftBackend:
    """SGLang's per-step draft-decode container, one child backend of ours per draft step."""

    def __init__(
        self, runner: Any, create: Callable[[Any], Any], topk: int, num_steps: int, name: str
    ) -> None:
        if topk != 1:
            raise ValueError(
                f"--attention-backend {name} serves EAGLE chain drafts (--speculative-eagle-topk "
                f"1), got topk {topk}: a draft tree needs a KV row per branch "
                "(sglang_mx/attention/draft_steps.py says what that takes)"
            )
        self.topk, self.speculative_num_steps = topk, num_steps
        self.attn_backends = [create(runner) for _ in range(num_steps - 1)]
        for child in self.attn_backends:
            child.prefill_attention_backend_str = child.decode_attention_backend_str = name
        self.prefill_attention_backend_str = self.decode_attention_backend_str = name

    def init_forward_metadata(self, forward_batch: Any) -> None:
        if forward_batch.forward_mode.is_idle():
            for child in self.attn_backends:
                child.init_forward_metadata(forward_batch)
            return
        if not forward_batch.forward_mode.is_decode():
            raise RuntimeError(
                f"EAGLE draft decode expected a DECODE batch, got {forward_batch.forward_mode.name}"
            )
        for step, child in enumerate(self.attn_backends):
            child.init_forward_metadata(step_view(forward_batch, step))

    def init_cuda_graph_state(self, max_bs: int, max_num_tokens: int) -> None:
        raise RuntimeError(
            "sglang_mx's multi-step EAGLE draft does not capture CUDA graphs yet; launch with "
            "--disable-cuda-graph (one draft step, --speculative-num-steps 1, needs none)"
        )
