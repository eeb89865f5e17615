"""Torch versions of the `sgl_kernel` CPU ops SGLang 0.5.23's EAGLE (NextN / MTP) speculative
decoding calls when its device is "cpu" (`mem_cache/allocation.py`, `kernels/ops/speculative/
cache_locs.py`, `eagle.py`, `spec_tree.py` import them from sgl_kernel's AMX build). They are
index bookkeeping over small tensors, written from the contract of SGLang's own Triton/CUDA
kernels of the same names (argument order and in-place outputs as SGLang passes them); the
stand-in `sgl_kernel` exports them, every other op still raises naming itself."""

from __future__ import annotations

import torch


def _spans(start: torch.Tensor, end: torch.Tensor) -> list[tuple[int, int]]:
    return list(zip(start.tolist(), end.tolist(), strict=True))


def assign_req_to_token_pool_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len
) -> None:
    """req_to_token[row_i, start_i:end_i] = the next (end_i - start_i) entries of out_cache_loc
    (requests packed in order)."""
    at = 0
    for row, (s, e) in zip(
        req_pool_indices.tolist(), _spans(start_offset, end_offset), strict=True
    ):
        req_to_token[row, s:e] = out_cache_loc[at : at + e - s].to(req_to_token.dtype)
        at += e - s


def assign_extend_cache_locs_cpu(
    req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len
) -> None:
    """out_cache_loc (packed in request order) = req_to_token[row_i, start_i:end_i]."""
    at = 0
    for row, (s, e) in zip(
        req_pool_indices.tolist(), _spans(start_offset, end_offset), strict=True
    ):
        out_cache_loc[at : at + e - s] = req_to_token[row, s:e].to(out_cache_loc.dtype)
        at += e - s


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, num_cols
) -> None:
    """Request i's topk * num_cols slots from seq_lens[i] on, at out_cache_loc[i * width]."""
    width = int(topk) * int(num_cols)
    for i, (row, s) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        out_cache_loc[i * width : (i + 1) * width] = req_to_token[row, s : s + width].to(
            out_cache_loc.dtype
        )


def fill_bonus_tokens_cpu(accept_tokens, accept_lens, bonus_tokens, accept_stride) -> None:
    """bonus_tokens[i] = the last accepted token of request i (accept_lens counts it)."""
    flat = accept_tokens.reshape(-1)
    for i, n in enumerate(accept_lens.tolist()):
        bonus_tokens[i] = flat[int(accept_stride) * i + int(n) - 1]


def fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, accept_out_cache_loc) -> None:
    """The KV slots of the accepted positions (accept_index != -1), packed in order."""
    flat = accept_index.reshape(-1)
    kept = flat[flat != -1].long()
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept].to(accept_out_cache_loc.dtype)


def verify_tree_greedy_cpu(
    predicts,
    accept_index,
    accept_token_num,
    candidates,
    retrive_index,
    retrive_next_token,
    retrive_next_sibling,
    target_predict,
) -> None:
    """Greedy verification of each request's draft tree against the target's argmax: walk from
    the root, at each depth accept the first child whose token equals the target's prediction
    at the last accepted node; `predicts` gets the target token at every accepted node and the
    bonus token after the last; indices are flat over [batch * draft_tokens]."""
    bs, drafts = candidates.shape
    spec = accept_index.shape[1]
    target = target_predict.reshape(-1).tolist()
    cand, ridx = candidates.tolist(), retrive_index.tolist()
    nxt, sib = retrive_next_token.tolist(), retrive_next_sibling.tolist()
    for b in range(bs):
        last = ridx[b][0]
        accept_index[b, 0] = last
        accepted, cur = 0, 0
        for _ in range(1, spec):
            cur = nxt[b][cur]
            while cur != -1:
                if cand[b][cur] == target[last]:
                    predicts[last] = target[last]
                    accepted += 1
                    accept_index[b, accepted] = ridx[b][cur]
                    last = ridx[b][cur]
                    break
                cur = sib[b][cur]
            if cur == -1:
                break
        accept_token_num[b] = accepted
        predicts[last] = target[last]


def build_tree_kernel_efficient_cpu(
    parent_list,
    selected_index,
    verified_seq_len,
    tree_mask,
    positions,
    retrive_index,
    retrive_next_token,
    retrive_next_sibling,
    topk,
    depth,
    draft_token_num,
    tree_mask_mode,
) -> None:
    """EAGLE's draft tree from the draft steps' top-k choices: per request, retrieval links
    (first child / next sibling of each node), each node's position (its depth past seq_len)
    and its attention mask over the other draft nodes (every node sees its ancestors and
    itself; FULL_MASK mode (0) also lays out the seq_len prefix columns, left as they are)."""
    n, topk = int(draft_token_num), int(topk)
    bs = verified_seq_len.shape[0]
    seq = verified_seq_len.tolist()
    prefix = [sum(seq[:b]) for b in range(bs)]
    parents = parent_list.reshape(bs, -1).tolist()
    selected = selected_index.reshape(bs, -1).tolist()
    flat_mask = tree_mask.view(-1)

    def parent_node(b: int, node: int) -> int | None:
        """Draft-node slot (0..n-2) of `node`'s parent, or None when the parent is the root."""
        parent_tb = selected[b][node] // topk
        if parent_tb == 0:
            return None
        token = parents[b][parent_tb]
        for pp in range(n - 1):
            if selected[b][pp] == token:
                return pp
        return -1  # not found: the walk stops there

    for b in range(bs):
        base = b * n
        positions[base] = seq[b]
        for i in range(n - 1, 0, -1):
            retrive_index[b, i] = base + i
            parent = parent_node(b, i - 1)
            if parent == -1:
                continue
            slot = 0 if parent is None else parent + 1
            first = int(retrive_next_token[b, slot])
            retrive_next_token[b, slot] = i
            if first != -1:
                retrive_next_sibling[b, i] = first
        retrive_index[b, 0] = base
        for x in range(n):
            if int(tree_mask_mode) == 0:
                row = n * n * b + prefix[b] * n + (seq[b] + n) * x + seq[b] + 1
            else:
                row = n * n * b + n * x + 1
            flat_mask[row - 1] = True
            flat_mask[row : row + n - 1] = False
            if x == 0:
                continue
            cur, depth_x = x - 1, 0
            for _ in range(int(depth)):
                depth_x += 1
                flat_mask[row + cur] = True
                parent = parent_node(b, cur)
                if parent is None or parent == -1:
                    break
                cur = parent
            positions[base + x] = seq[b] + depth_x


OPS = {
    f.__name__: f
    for f in (
        assign_req_to_token_pool_cpu,
        assign_extend_cache_locs_cpu,
        assign_draft_cache_locs_contiguous_cpu,
        fill_bonus_tokens_cpu,
        fill_accept_out_cache_loc_cpu,
        verify_tree_greedy_cpu,
        build_tree_kernel_efficient_cpu,
    )
}
