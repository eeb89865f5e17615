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
    from sglang_mx.seam import cpu_setup

    cpu_setup.prepare_process()
    from sglang_mx.attention import registry as backend

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


class _Setup:
    """SGLang's token-level pool with 4 request rows, a 3-request decode batch and a layer."""

    def __init__(self, window: int, seed: int = 0) -> None:
        from sglang.srt.model_executor.forward_batch_info import ForwardMode

        g = torch.Generator().manual_seed(seed)
        hq, hkv, d, size = 8, 2, 64, 600
        self.hq, self.d = hq, d
        self.seq_lens = torch.tensor([1, 33, 150])
        self.req_to_token = torch.zeros(4, 256, dtype=torch.int32)
        n_tok = int(self.seq_lens.sum())
        slots = torch.randperm(size - 1, generator=g)[:n_tok] + 1  # slot 0 = padding
        self.req_pool_indices = torch.tensor([2, 0, 3])
        start = 0
        for r, n in zip(self.req_pool_indices.tolist(), self.seq_lens.tolist(), strict=True):
            self.req_to_token[r, :n] = slots[start : start + n].to(torch.int32)
            start += n
        self.k_pool = torch.randn(size, hkv, d, generator=g).to(torch.bfloat16)
        self.v_pool = torch.randn(size, hkv, d, generator=g).to(torch.bfloat16)
        self.q = torch.randn(3, hq * d, generator=g).to(torch.bfloat16)
        self.k_new = torch.randn(3, hkv * d, generator=g).to(torch.bfloat16)
        self.v_new = torch.randn(3, hkv * d, generator=g).to(torch.bfloat16)
        self.layer = types.SimpleNamespace(
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
        self.mode = ForwardMode.DECODE

    def batch(self, req_pool_indices, seq_lens):
        return types.SimpleNamespace(
            forward_mode=self.mode,
            batch_size=len(req_pool_indices),
            req_pool_indices=req_pool_indices,
            seq_lens=seq_lens,
            seq_lens_cpu=seq_lens.clone(),  # SGLang's host copy (a CPU tensor on a GPU box too)
            out_cache_loc=self.req_to_token[req_pool_indices, seq_lens - 1].long(),
            encoder_lens=None,
            encoder_out_cache_loc=None,
        )

    def runner(self, pool):
        return types.SimpleNamespace(
            device="cpu",
            req_to_token_pool=types.SimpleNamespace(req_to_token=self.req_to_token),
            token_to_kv_pool=pool,
            use_mla_backend=False,
        )

    def reference(self):
        from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

        pool = _TokenPool(self.k_pool.clone(), self.v_pool.clone())
        batch = self.batch(self.req_pool_indices, self.seq_lens)
        ref_backend = TorchNativeAttnBackend(self.runner(pool))
        ref_backend.init_forward_metadata(batch)
        return ref_backend.forward_decode(self.q, self.k_new, self.v_new, self.layer, batch), pool

    def ours(self):
        from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS

        pool = _TokenPool(self.k_pool.clone(), self.v_pool.clone())
        return ATTENTION_BACKENDS["mx_triton"](self.runner(pool)), pool


def _close(out: torch.Tensor, ref: torch.Tensor) -> None:
    assert out.shape == ref.shape and out.dtype == ref.dtype
    # torch_native runs SDPA in bf16 on CPU (internal fp32 math, bf16 result), ours computes in
    # fp32 and stores bf16 by truncation in the interpreter: each side is within one bf16 ulp
    # (2^-7 relative to the largest value) of the exact result.
    tol = 2 * 2.0**-7 * ref.float().abs().max().item()
    assert (out.float() - ref.float()).abs().max().item() <= tol


@pytest.mark.parametrize("window", [-1, 7])
def test_decode_matches_torch_native_without_host_sync(sglang_ready, window):
    from sglang_mx_lab.testing.host_sync import forbid_host_sync

    st = _Setup(window)
    ref, ref_pool = st.reference()
    ours, pool = st.ours()
    batch = st.batch(st.req_pool_indices, st.seq_lens)
    # The whole decode step (metadata + layer) reads no device value on the host; only SGLang's
    # host-side seq_lens_cpu may be read.
    with forbid_host_sync(host=[batch.seq_lens_cpu]):
        ours.init_forward_metadata(batch)
        out = ours.forward_decode(st.q, st.k_new, st.v_new, st.layer, batch)
    assert ours.max_seq_len == 150  # planned from the host copy, not the device tensor
    assert torch.equal(pool.k, ref_pool.k) and torch.equal(pool.v, ref_pool.v)
    _close(out, ref)


class _GridSpy:
    """Stands in for the GQA kernel object: records each launch's grid and the addresses of the
    block table / seq_lens it is given, then launches the real kernel."""

    def __init__(self, kernel) -> None:
        self.kernel, self.launches = kernel, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((tuple(grid), args[3].data_ptr(), args[4].data_ptr()))
            return self.kernel[grid](*args, **kwargs)

        return launch


def test_cuda_graph_buffers_and_launch_shape_are_fixed_across_replays(sglang_ready, monkeypatch):
    """What CUDA graphs need, checked on CPU: capture at bs=4, then 'replays' of a 3- and a
    2-request batch padded to 4 reuse the same block-table / seq_lens addresses and the same
    launch grid, read no device value on the host, and match torch_native on the real rows."""
    import importlib

    from sglang_mx_lab.testing.host_sync import forbid_host_sync

    gqa_file = importlib.import_module("sgl_kernel_rocm.attention.gqa_decode")
    spy = _GridSpy(gqa_file._gqa_decode_split_kernel)
    monkeypatch.setattr(gqa_file, "_gqa_decode_split_kernel", spy)

    st = _Setup(-1, seed=1)
    ours, pool = st.ours()
    ours.init_cuda_graph_state(max_bs=8, max_num_tokens=8)
    bt_buf, seq_buf = ours.cuda_graph_block_table, ours.cuda_graph_seq_lens
    assert bt_buf.shape == (8, st.req_to_token.shape[1]) and seq_buf.shape == (8,)
    fill = ours.get_cuda_graph_seq_len_fill_value()

    # The runner's static inputs for graph bs=4 (refilled in place before every replay).
    static_idx = torch.zeros(4, dtype=torch.int64)
    static_seq = torch.full((4,), fill, dtype=torch.int64)
    q4 = torch.zeros(4, st.hq * st.d, dtype=torch.bfloat16)
    k4 = torch.zeros(4, st.k_new.shape[1], dtype=torch.bfloat16)
    v4 = torch.zeros_like(k4)

    def step(n_real: int, in_capture: bool):
        static_idx.zero_()
        static_seq.fill_(fill)
        static_idx[:n_real] = st.req_pool_indices[:n_real]
        static_seq[:n_real] = st.seq_lens[:n_real]
        q4.zero_()
        q4[:n_real] = st.q[:n_real]
        k4[:n_real], v4[:n_real] = st.k_new[:n_real], st.v_new[:n_real]
        batch = st.batch(static_idx, static_seq)
        batch.out_cache_loc[n_real:] = 0  # padded rows write SGLang's padding slot 0
        with forbid_host_sync():
            ours.init_forward_metadata_out_graph(batch, in_capture=in_capture)
            ours.init_forward_metadata_in_graph(batch)
            return ours.forward_decode(q4, k4, v4, st.layer, batch)[:n_real]

    step(3, in_capture=True)  # capture
    captured = spy.launches[-1]
    assert captured[1] == bt_buf.data_ptr() and captured[2] == seq_buf.data_ptr()
    ref, _ = st.reference()
    for n_real in (3, 2):  # replays of different real batch sizes
        out = step(n_real, in_capture=False)
        assert spy.launches[-1] == captured, "launch grid or buffer address changed on replay"
        _close(out, ref[:n_real])
    assert ours.cuda_graph_block_table.data_ptr() == bt_buf.data_ptr()


PROMPTS = ["The capital of France is", "1, 2, 3, 4,", "def fibonacci(n):"]


def _greedy_tokens(base_url: str) -> list[list[int]]:
    from sglang_mx_lab.testing.served_distribution import greedy_generate

    outs = []
    for prompt in PROMPTS:
        meta = greedy_generate(base_url, 16, 120, text=prompt, return_logprob=True)["meta_info"]
        outs.append([tok[1] for tok in meta["output_token_logprobs"]])
    return outs


def _foundation_ready() -> bool:
    """The live test needs the server launcher and the built bf16 bundled model."""
    root = Path(__file__).resolve().parents[3] / "python" / "sglang_mx"
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
    reason="needs sglang_mx_lab.testing.server and the built bf16 bundled model (make model)",
)
def test_live_server_greedy_tokens_match_torch_native():
    from concurrent.futures import ThreadPoolExecutor

    from sglang_mx.assets import bundled_model_path
    from sglang_mx_lab.testing.server import start_servers

    model = str(bundled_model_path("bf16"))
    # Triton kernels run through the interpreter in the server's scheduler process on CPU.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    backends = ("torch_native", "mx_triton")
    # Side by side: two cold starts overlap, and the interpreter-bound mx_triton server decodes
    # while the torch_native one does (each server's greedy tokens depend on its own requests).
    handles = start_servers([(model, ["--attention-backend", b], env, None) for b in backends])
    try:
        with ThreadPoolExecutor(len(handles)) as pool:
            tokens = list(pool.map(_greedy_tokens, [h.base_url for h in handles]))
    finally:
        for h in handles:
            h.stop(wait=False)
    results = dict(zip(backends, tokens, strict=True))
    assert all(len(t) == 16 for t in results["torch_native"])
    assert results["mx_triton"] == results["torch_native"]
