"""The expert weights of one MoE layer as one value (`MoEWeights`), and the checks every MoE entry
point makes on them and on the routing it is handed."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl_kernel_rocm.mx import dequantize_mxfp4

_W16 = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class MoEWeights:
    """w13 [E, 2I, ...] (gate rows, then up rows) and w2 [E, H, ...] of every expert.

    MXFP4 (the serving format): w13 [E, 2I, H/2] and w2 [E, H, I/2] packed uint8 along the
    reduction dim, with E8M0 scales w13_scale [E, 2I, H/32] and w2_scale [E, H, I/32].
    Unscaled (`MoEWeights.dense`): w13 [E, 2I, H] and w2 [E, H, I] as plain floats, scales None:
    the bf16-weight baseline, and weights dequantized once at load for the torch reference.
    """

    w13: torch.Tensor
    w13_scale: torch.Tensor | None
    w2: torch.Tensor
    w2_scale: torch.Tensor | None

    @classmethod
    def dense(cls, w13: torch.Tensor, w2: torch.Tensor) -> MoEWeights:
        """Unscaled float weights w13 [E, 2I, H] and w2 [E, H, I]."""
        return cls(w13, None, w2, None)

    @property
    def is_mxfp4(self) -> bool:
        return self.w13_scale is not None

    @property
    def num_experts(self) -> int:
        return self.w13.shape[0]

    @property
    def hidden(self) -> int:
        return self.w2.shape[1]

    @property
    def inter(self) -> int:
        return self.w2.shape[2] * 2 if self.is_mxfp4 else self.w2.shape[2]

    def expert(self, e: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(w13 [2I, H], w2 [H, I]) of expert e in fp32."""
        if not self.is_mxfp4:
            return self.w13[e].to(torch.float32), self.w2[e].to(torch.float32)
        return (
            dequantize_mxfp4(self.w13[e], self.w13_scale[e], dtype=torch.float32),
            dequantize_mxfp4(self.w2[e], self.w2_scale[e], dtype=torch.float32),
        )

    def contiguous(self) -> MoEWeights:
        def c(t):
            return t if t is None or t.is_contiguous() else t.contiguous()

        return MoEWeights(c(self.w13), c(self.w13_scale), c(self.w2), c(self.w2_scale))

    def validate(self, multiple: int = 32) -> None:
        """Raise ValueError naming the tensor whose dtype or shape is wrong; hidden and
        intermediate sizes must be multiples of `multiple`."""
        w13, w2 = self.w13, self.w2
        if (self.w13_scale is None) != (self.w2_scale is None):
            raise ValueError("w13_scale and w2_scale must both be given (MXFP4) or both None")
        if self.is_mxfp4 and (w13.dtype != torch.uint8 or w2.dtype != torch.uint8):
            raise ValueError(f"w13/w2 must be packed MXFP4 uint8, got {w13.dtype} and {w2.dtype}")
        if not self.is_mxfp4 and (w13.dtype not in _W16 or w2.dtype != w13.dtype):
            raise ValueError(f"w13/w2 must both be bf16 or fp16, got {w13.dtype} and {w2.dtype}")
        if w13.dim() != 3 or w2.dim() != 3 or w13.shape[1] % 2:
            raise ValueError(
                f"w13 must be [E, 2I, K] and w2 [E, H, K'], got {tuple(w13.shape)} and "
                f"{tuple(w2.shape)}"
            )
        experts, hidden, inter = self.num_experts, self.hidden, self.inter
        if hidden % multiple or inter % multiple:
            raise ValueError(
                f"hidden ({hidden}) and intermediate ({inter}) sizes must be multiples of "
                f"{multiple}"
            )
        pack = 2 if self.is_mxfp4 else 1
        expected = {
            "w13": (w13, (experts, 2 * inter, hidden // pack)),
            "w2": (w2, (experts, hidden, inter // pack)),
        }
        if self.is_mxfp4:
            expected["w13_scale"] = (self.w13_scale, (experts, 2 * inter, hidden // 32))
            expected["w2_scale"] = (self.w2_scale, (experts, hidden, inter // 32))
        for name, (t, shape) in expected.items():
            if tuple(t.shape) != shape:
                raise ValueError(
                    f"{name} has shape {tuple(t.shape)}, expected {shape} for hidden={hidden}, "
                    f"intermediate={inter}, experts={experts}"
                )


def validate_routing(
    hidden_states: torch.Tensor,
    hidden: int,
    topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
    shared_output: torch.Tensor | None,
) -> None:
    """Raise ValueError unless hidden_states is [T, hidden], topk ids and weights [T, K] and the
    shared-expert output (when given) [T, hidden]."""
    if hidden_states.dim() != 2 or hidden_states.shape[1] != hidden:
        raise ValueError(
            f"hidden_states must be [T, {hidden}], got shape {tuple(hidden_states.shape)}"
        )
    num_tokens = hidden_states.shape[0]
    if (
        topk_ids.shape != topk_weights.shape
        or topk_ids.dim() != 2
        or topk_ids.shape[0] != num_tokens
    ):
        raise ValueError(
            f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} must "
            f"both be [T={num_tokens}, K]"
        )
    if shared_output is not None and tuple(shared_output.shape) != (num_tokens, hidden):
        raise ValueError(
            f"shared_output must be [{num_tokens}, {hidden}], got {tuple(shared_output.shape)}"
        )
