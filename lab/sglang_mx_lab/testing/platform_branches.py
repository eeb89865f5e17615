"""Select one of SGLang 0.5.23's platform branches (CPU, CUDA, ROCm, ROCm + aiter) in this CPU
process, to drive a real GLM/DeepSeek MoE block down that branch in tests.

SGLang decides its platform once per module at import (`_is_cuda = is_cuda()` etc.); these
helpers rewrite those module flags through pytest's monkeypatch so the model code, its TopK
router and our MoE method all take the chosen branch. The tensors stay on the CPU, so the only
GPU kernels that cannot run here are replaced, each named as a stand-in:

- the MoE experts: our `MxFp4MoEMethod` runs `fused_moe_mxfp4`, whose CPU backend is the torch
  reference of the Triton kernel that a GPU would run;
- aiter's `biased_grouped_topk` router (ROCm + aiter only): `aiter_router_standin`, written from
  aiter's contract (sigmoid scores, bias only for selection, renormalize, times `scaling`).
"""

from __future__ import annotations

import torch

BRANCHES = ("cpu", "cuda", "rocm", "rocm_aiter")

# Modules whose import-time flags decide the routed-scaling and routing branches.
_FLAG_MODULES = (
    "sglang.srt.models.glm4_moe",
    "sglang.srt.models.deepseek_v2",
    "sglang.srt.models.deepseek_common.utils",
    "sglang.srt.layers.moe.topk",
)


def _flags(branch: str) -> dict[str, bool]:
    if branch not in BRANCHES:
        raise ValueError(f"branch must be one of {BRANCHES}, got {branch!r}")
    return {
        "_is_cuda": branch == "cuda",
        "_is_hip": branch in ("rocm", "rocm_aiter"),
        "_use_aiter": branch == "rocm_aiter",
        "_is_cpu": branch == "cpu",
        "_is_musa": False,
        "_is_xpu": False,
        "_is_npu": False,
    }


@torch.no_grad()
def aiter_router_standin(
    gating_output,
    correction_bias,
    topk_weights,
    topk_ids,
    num_expert_group,
    topk_group,
    renormalize,
    scaling,
):
    """GPU stand-in for aiter's `biased_grouped_topk` (writes its outputs in place)."""
    from sgl_kernel_rocm.moe.routing import grouped_sigmoid_topk

    w, ids = grouped_sigmoid_topk(
        gating_output.float(),
        correction_bias.float(),
        topk_weights.shape[1],
        n_group=num_expert_group,
        topk_group=topk_group,
        renormalize=renormalize,
        routed_scaling_factor=scaling,
    )
    topk_weights.copy_(w)
    topk_ids.copy_(ids.to(topk_ids.dtype))


def select_branch(monkeypatch, branch: str) -> None:
    """Make SGLang's model, router and our MoE method take `branch` for this test."""
    import importlib

    flags = _flags(branch)
    for name in _FLAG_MODULES:
        module = importlib.import_module(name)
        for flag, value in flags.items():
            if hasattr(module, flag):
                monkeypatch.setattr(module, flag, value)
    if branch == "cuda":
        from sglang.srt.layers.moe import topk

        # SGLang imports flashinfer's router only on CUDA builds; None is its "not installed".
        monkeypatch.setattr(topk, "fused_topk_deepseek", None, raising=False)
    if branch in ("rocm", "rocm_aiter"):
        from sglang.srt.models import deepseek_v2
        from sglang.srt.models.deepseek_common.amd import (
            deepseek_v2_hip_act,
            deepseek_v2_hip_moe,
        )

        # DeepseekV2 imports its ROCm helpers only on HIP builds. Their own _use_aiter flags
        # stay False here, so they take their plain torch paths (`moe.gate(x)`, SiluAndMul)
        # rather than aiter's router GEMM and fused activation.
        monkeypatch.setattr(deepseek_v2, "_hip_moe", deepseek_v2_hip_moe)
        monkeypatch.setattr(deepseek_v2, "_hip_act", deepseek_v2_hip_act)
    if branch == "rocm_aiter":
        from sglang.srt.layers.moe import topk

        monkeypatch.setattr(topk, "aiter_biased_grouped_topk", aiter_router_standin, raising=False)
