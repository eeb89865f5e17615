"""The `mx_triton` SGLang attention backend: registration, decode parity with torch_native on
SGLang's token-level KV pool layout, and (server marker) greedy parity on a live server."""

from __future__ import annotations

import os
import types
from pathlib import Path

import pytest
import torch


@pytest.fixture(scope="module")
def sglang_ready():
    """SGLang 0.5.23 imports on this CPU box only after the plugin's CPU preparation."""
    from sglang_mx import cpu_setup

    cpu_setup.prepare_process()
    from sglang_mx.attention import backend

    backend.register()
    return backend


def test_register_adds_backend_and_cli_choice_once(sglang_ready):
    from sglang.srt.arg_groups.choices import ATTENTION_BACKEND_CHOICES
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS

    sglang_ready.register()  # idempotent
    assert "mx_triton" in ATTENTION_BACKENDS
    assert ATTENTION_BACKEND_CHOICES.count("mx_triton") == 1


class _TokenPool:
    """Minimal MHA token pool: [size, Hkv, D] per layer, the layout SGLang's pool hands out."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor) -> None:
        self.k, self.v = k, v

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.k

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.v

    def set_kv_buffer(self, layer, loc, cache_k, cache_v, k_scale=None, v_scale=None):
        loc = getattr(loc, "loc", loc)
        self.k[loc] = cache_k.view(-1, *self.k.shape[1:]).to(self.k.dtype)
        self.v[loc] = cache_v.view(-1, *self.v.shape[1:]).to(self.v.dtype)


@pytest.mark.parametrize("window", [-1, 7])
def test_decode_matches_torch_native(sglang_ready, window):
    from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    g = torch.Generator().manual_seed(0)
    hq, hkv, d, size = 8, 2, 64, 600
    seq_lens = torch.tensor([1, 33, 150])
    req_to_token = torch.zeros(4, 256, dtype=torch.int32)
    slots = torch.randperm(size - 1, generator=g)[: int(seq_lens.sum())] + 1  # slot 0 = padding
    req_pool_indices = torch.tensor([2, 0, 3])
    start = 0
    for r, n in zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True):
        req_to_token[r, :n] = slots[start : start + n].to(torch.int32)
        start += n
    out_cache_loc = req_to_token[req_pool_indices, seq_lens - 1].long()
    k_pool = torch.randn(size, hkv, d, generator=g).to(torch.bfloat16)
    v_pool = torch.randn(size, hkv, d, generator=g).to(torch.bfloat16)
    q = torch.randn(3, hq * d, generator=g).to(torch.bfloat16)
    k_new = torch.randn(3, hkv * d, generator=g).to(torch.bfloat16)
    v_new = torch.randn(3, hkv * d, generator=g).to(torch.bfloat16)

    def runner(pool):
        return types.SimpleNamespace(
            device="cpu",
            req_to_token_pool=types.SimpleNamespace(req_to_token=req_to_token),
            token_to_kv_pool=pool,
            use_mla_backend=False,
        )

    layer = types.SimpleNamespace(
        layer_id=0,
        tp_q_head_num=hq,
        tp_k_head_num=hkv,
        qk_head_dim=d,
        v_head_dim=d,
        scaling=d**-0.5,
        sliding_window_size=window,
        logit_cap=0.0,
        is_cross_attention=False,
        k_scale=None,
        v_scale=None,
    )
    batch = types.SimpleNamespace(
        forward_mode=ForwardMode.DECODE,
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        out_cache_loc=out_cache_loc,
        encoder_lens=None,
        encoder_out_cache_loc=None,
    )
    ref_pool = _TokenPool(k_pool.clone(), v_pool.clone())
    ref_backend = TorchNativeAttnBackend(runner(ref_pool))
    ref_backend.init_forward_metadata(batch)
    ref = ref_backend.forward_decode(q, k_new, v_new, layer, batch)

    ours_pool = _TokenPool(k_pool.clone(), v_pool.clone())
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS

    ours = ATTENTION_BACKENDS["mx_triton"](runner(ours_pool))
    ours.init_forward_metadata(batch)
    out = ours.forward_decode(q, k_new, v_new, layer, batch)

    assert torch.equal(ours_pool.k, ref_pool.k) and torch.equal(ours_pool.v, ref_pool.v)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    # torch_native runs SDPA in bf16 on CPU (internal fp32 math, bf16 result), ours computes in
    # fp32 and stores bf16 by truncation in the interpreter: each side is within one bf16 ulp
    # (2^-7 relative to the largest value) of the exact result.
    tol = 2 * 2.0**-7 * ref.float().abs().max().item()
    assert (out.float() - ref.float()).abs().max().item() <= tol


PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "def fibonacci(n):"]


def _greedy_tokens(base_url: str) -> list[list[int]]:
    import httpx

    outs = []
    for prompt in PROMPTS:
        r = httpx.post(
            f"{base_url}/generate",
            json={
                "text": prompt,
                "sampling_params": {"temperature": 0, "max_new_tokens": 16},
                "return_logprob": True,
            },
            timeout=120,
        )
        r.raise_for_status()
        meta = r.json()["meta_info"]
        outs.append([tok[1] for tok in meta["output_token_logprobs"]])
    return outs


def _foundation_ready() -> bool:
    """The live test needs the server launcher and the built bf16 bundled model."""
    root = Path(__file__).resolve().parents[2] / "python" / "sglang_mx"
    if not (root / "testing" / "server.py").exists():
        return False
    try:
        from sglang_mx.assets import bundled_model_path

        bundled_model_path("bf16")
    except (ImportError, FileNotFoundError):
        return False
    return True


@pytest.mark.server
@pytest.mark.timeout(300)
@pytest.mark.skipif(
    not _foundation_ready(),
    reason="needs sglang_mx.testing.server and the built bf16 bundled model (make model)",
)
def test_live_server_greedy_tokens_match_torch_native():
    from sglang_mx.assets import bundled_model_path
    from sglang_mx.testing.server import launch_server

    model = str(bundled_model_path("bf16"))
    # Triton kernels run through the interpreter in the server's scheduler process on CPU.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    results = {}
    for backend in ("torch_native", "mx_triton"):
        with launch_server(model, ["--attention-backend", backend], env=env) as base_url:
            results[backend] = _greedy_tokens(base_url)
    assert all(len(t) == 16 for t in results["torch_native"])
    assert results["mx_triton"] == results["torch_native"]
