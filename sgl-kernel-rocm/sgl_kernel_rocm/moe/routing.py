"""MoE routers: which experts each token goes to, and with what weight.

Both return (topk_weights float32 [T, k], topk_ids int32 [T, k]), the input `fused_moe_mxfp4`
takes. `grouped_sigmoid_topk` is the DeepSeek-V3 / GLM-4.5+ "noaux_tc" router: sigmoid scores,
a per-expert correction bias used only for choosing, a group stage, then top-k.
"""

from __future__ import annotations

import torch


def _check_logits(logits: torch.Tensor, k: int) -> None:
    if logits.dim() != 2:
        raise ValueError(
            f"router logits must be [tokens, experts], got shape {tuple(logits.shape)}"
        )
    if not 0 < k <= logits.shape[1]:
        raise ValueError(f"top-k must be in 1..{logits.shape[1]} (the expert count), got {k}")


def softmax_topk(
    logits: torch.Tensor, k: int, renormalize: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax over experts in fp32, keep the k largest; renormalize them to sum to 1 if asked."""
    _check_logits(logits, k)
    probs = torch.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probs, k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.float(), ids.to(torch.int32)


def grouped_sigmoid_topk(
    logits: torch.Tensor,
    correction_bias: torch.Tensor | None,
    k: int,
    n_group: int = 1,
    topk_group: int = 1,
    renormalize: bool = True,
    routed_scaling_factor: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sigmoid + correction bias + grouped top-k (GLM / DeepSeek-V3 noaux_tc routing).

    Experts are split into `n_group` equal groups; a group's score is the sum of its two best
    biased scores; only experts in the best `topk_group` groups compete for the k slots. The
    returned weights are the unbiased sigmoid scores of the chosen experts, renormalized to sum
    to 1 if asked, then multiplied by `routed_scaling_factor`.
    """
    _check_logits(logits, k)
    num_tokens, num_experts = logits.shape
    if n_group < 1 or num_experts % n_group:
        raise ValueError(f"n_group={n_group} must divide the expert count {num_experts}")
    if not 1 <= topk_group <= n_group:
        raise ValueError(f"topk_group must be in 1..n_group={n_group}, got {topk_group}")
    per_group = num_experts // n_group
    if k > topk_group * per_group:
        raise ValueError(
            f"k={k} exceeds the {topk_group * per_group} experts in the {topk_group} kept groups"
        )

    scores = torch.sigmoid(logits.float())
    biased = scores if correction_bias is None else scores + correction_bias.float().unsqueeze(0)
    if n_group > 1:
        grouped = biased.view(num_tokens, n_group, per_group)
        # A group's score is its top-2 sum (its single best when a group has one expert).
        group_scores = grouped.topk(min(2, per_group), dim=-1).values.sum(dim=-1)
        keep = torch.zeros_like(group_scores, dtype=torch.bool)
        keep.scatter_(1, group_scores.topk(topk_group, dim=-1).indices, True)
        expert_keep = keep.unsqueeze(-1).expand(-1, -1, per_group).reshape(num_tokens, -1)
        biased = biased.masked_fill(~expert_keep, float("-inf"))
    ids = biased.topk(k, dim=-1).indices
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return (weights * routed_scaling_factor).float(), ids.to(torch.int32)
