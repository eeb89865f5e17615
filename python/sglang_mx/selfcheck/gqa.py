"""The mx_triton decode case: gqa_decode as mx_triton calls it (SGLang's token-level pool viewed
as page-1 pages, req_to_token rows as the block table, the host max length) against its
float64 reference, on the target device."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sglang_mx.selfcheck.tolerance import ToleranceVerdict, bf16_close

FP8_SCALE = 0.5  # FP8 entries are stored x2 and scaled back, as the kernel tests do


@dataclass(frozen=True)
class GqaShape:
    q_heads: int  # of this rank
    kv_heads: int
    head_dim: int
    v_head_dim: int
    kv_dtype: torch.dtype
    q_dtype: torch.dtype
    sm_scale: float
    context: int

    def describe(self) -> str:
        kv, q = (str(d).removeprefix("torch.") for d in (self.kv_dtype, self.q_dtype))
        return (
            f"Hq{self.q_heads} Hkv{self.kv_heads} D{self.head_dim}/{self.v_head_dim} page 1 "
            f"kv {kv} q {q} ctx {self.context}"
        )


def check_gqa(shape: GqaShape, device) -> ToleranceVerdict:
    from sgl_kernel_rocm import attention as kernels

    g = torch.Generator().manual_seed(4)
    lens = [shape.context, min(shape.context, 7)]
    slots = sum(lens) + 1  # slot 0: SGLang's padding slot
    fp8 = shape.kv_dtype == torch.float8_e4m3fn
    scale = FP8_SCALE if fp8 else None

    def cache(dim: int) -> torch.Tensor:
        x = torch.randn(slots, shape.kv_heads, dim, generator=g)
        return (x / FP8_SCALE if fp8 else x).to(device=device, dtype=shape.kv_dtype)

    k_buf, v_buf = cache(shape.head_dim), cache(shape.v_head_dim)
    perm = torch.randperm(slots - 1, generator=g) + 1
    table = torch.zeros(len(lens), max(lens), dtype=torch.int32)
    table[0, : lens[0]] = perm[: lens[0]].to(torch.int32)
    table[1, : lens[1]] = perm[lens[0] : sum(lens)].to(torch.int32)
    table = table.to(device)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    q = torch.randn(len(lens), shape.q_heads, shape.head_dim, generator=g)
    q = q.to(device=device, dtype=shape.q_dtype)
    out = torch.full((len(lens), shape.q_heads, shape.v_head_dim), float("nan"),
                     dtype=shape.q_dtype, device=device)  # fmt: skip
    k4 = k_buf.view(-1, 1, shape.kv_heads, shape.head_dim)
    v4 = v_buf.view(-1, 1, shape.kv_heads, shape.v_head_dim)
    opts = {"k_scale": scale, "v_scale": scale, "sm_scale": shape.sm_scale}
    kernels.gqa_decode(q, k4, v4, table, seq_lens, out=out, max_seq_len=max(lens), **opts)
    return bf16_close(out, kernels.gqa_decode_ref(q, k4, v4, table, seq_lens, **opts))
