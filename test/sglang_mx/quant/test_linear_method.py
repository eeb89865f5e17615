"""MXFP4 linears (Quark dense MLPs / shared experts) through SGLang's real fused linear layers:
the checkpoint's per-projection tensors load through SGLang's own shard loaders, and the MLP
computes what dequantized weights (and, for W4A4, MXFP4-rounded activations) give."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from sgl_kernel_rocm.moe.reference import fake_quant_mxfp4
from sgl_kernel_rocm.mx import dequantize_mxfp4, quantize_mxfp4

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
HIDDEN, INTER = 256, 128


def mlp_layers(act: str):
    from sglang.srt.layers.linear import MergedColumnParallelLinear, RowParallelLinear
    from sglang_mx.quant.config import MxFp4ExpertsConfig
    from sglang_mx.quant.scheme import MxScheme

    config = MxFp4ExpertsConfig(MxScheme("quark", act, quantizes_linear=True), "quark")
    base = "model.layers.0.mlp"
    gate_up = MergedColumnParallelLinear(
        HIDDEN, [INTER, INTER], bias=False, quant_config=config, prefix=f"{base}.gate_up_proj"
    )
    down = RowParallelLinear(
        INTER, HIDDEN, bias=False, quant_config=config, prefix=f"{base}.down_proj"
    )
    return gate_up, down


@pytest.mark.parametrize("act", ["none", "mxfp4"])
def test_mxfp4_mlp_loads_per_projection_and_computes(sglang_context, act):
    from sglang_mx.quant.linear_method import MxFp4LinearMethod

    gate_up, down = mlp_layers(act)
    assert isinstance(gate_up.quant_method, MxFp4LinearMethod)
    assert isinstance(down.quant_method, MxFp4LinearMethod)
    g = torch.Generator().manual_seed(0)
    shapes = {"gate": (INTER, HIDDEN), "up": (INTER, HIDDEN), "down": (HIDDEN, INTER)}
    q = {n: quantize_mxfp4(torch.randn(s, generator=g) * 0.05) for n, s in shapes.items()}
    # As SGLang's loader does for checkpoint names gate_proj / up_proj -> gate_up_proj shards.
    for shard, name in enumerate(("gate", "up")):
        packed, scale = q[name]
        gate_up.weight.weight_loader(gate_up.weight, packed, shard)
        gate_up.weight_scale.weight_loader(gate_up.weight_scale, scale, shard)
    down.weight.weight_loader(down.weight, q["down"][0])
    down.weight_scale.weight_loader(down.weight_scale, q["down"][1])
    for layer in (gate_up, down):
        layer.quant_method.process_weights_after_loading(layer)

    x = torch.randn(5, HIDDEN, generator=g)
    with torch.no_grad():
        h, _ = gate_up(x)
        y, _ = down(F.silu(h[:, :INTER]) * h[:, INTER:])

    w = {name: dequantize_mxfp4(*pq, dtype=torch.float32) for name, pq in q.items()}
    rnd = fake_quant_mxfp4 if act == "mxfp4" else (lambda t: t)
    xr = rnd(x)
    a = F.silu(xr @ w["gate"].T) * (xr @ w["up"].T)
    ref = rnd(a) @ w["down"].T
    # fp32 throughout; a swapped gate/up shard or nibble order moves the output by O(|y|).
    rel = ((y - ref).norm() / ref.norm()).item()
    assert rel < 1e-5, rel


def test_unservable_quantized_linear_is_refused(sglang_context):
    from sglang.srt.layers.linear import QKVParallelLinear
    from sglang_mx.quant.config import MxFp4ExpertsConfig
    from sglang_mx.quant.scheme import MxScheme

    config = MxFp4ExpertsConfig(MxScheme("quark", "mxfp4", quantizes_linear=True), "quark")
    with pytest.raises(NotImplementedError, match="model.layers.0.self_attn.qkv_proj.*MLP"):
        QKVParallelLinear(
            HIDDEN,
            64,
            4,
            2,
            bias=False,
            quant_config=config,
            prefix="model.layers.0.self_attn.qkv_proj",
        )
