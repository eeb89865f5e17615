"""EAGLE's multi-step draft decode container over our backends (attention/draft_steps.py), and
SGLang's bf16 MoE under expert parallelism on a CPU (seam/moe_native_ep.py), checked without a
server; served: test_layouts.py (EAGLE 3/1/4 and 5/1/6, TP1 and TP2, EP2)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from sglang_mx.attention.draft_steps import MultiStepDraftBackend, step_view
from sglang_mx.seam.moe_native_ep import local_experts_forward


class _Mode:
    def __init__(self, name):
        self.name = name

    def is_idle(self):
        return self.name == "IDLE"

    def is_decode(self):
        return self.name == "DECODE"


class _Child:
    def __init__(self, runner):
        self.seen = []

    def init_forward_metadata(self, fb):
        self.seen.append((fb.seq_lens.tolist(), fb.seq_lens_cpu.tolist(), fb.seq_lens_sum))


def test_each_draft_step_plans_its_own_longer_decode():
    """Step i attends the committed tokens plus draft tokens 0..i (req_to_token[r, seq_len + j]
    holds draft j at topk 1): each child gets seq_lens + i + 1; the batch is left as it was."""
    lens = torch.tensor([5, 9])
    fb = SimpleNamespace(
        forward_mode=_Mode("DECODE"), seq_lens=lens, seq_lens_cpu=lens.clone(), seq_lens_sum=14,
        batch_size=2,
    )  # fmt: skip
    box = MultiStepDraftBackend(None, _Child, topk=1, num_steps=4, name="mx_dsa")
    assert len(box.attn_backends) == 3
    box.init_forward_metadata(fb)
    got = [child.seen[-1] for child in box.attn_backends]
    assert got == [([6, 10], [6, 10], 16), ([7, 11], [7, 11], 18), ([8, 12], [8, 12], 20)]
    assert fb.seq_lens.tolist() == [5, 9] and fb.seq_lens_sum == 14
    assert box.attn_backends[0].decode_attention_backend_str == "mx_dsa"
    with pytest.raises(RuntimeError, match="DECODE batch, got EXTEND"):
        box.init_forward_metadata(SimpleNamespace(forward_mode=_Mode("EXTEND")))
    v = step_view(fb, 0)
    assert v is not fb and v.seq_lens.tolist() == [6, 10]


def test_tree_drafts_are_refused_with_what_they_need():
    with pytest.raises(ValueError, match="topk 1.*got topk 2.*KV row per branch"):
        MultiStepDraftBackend(None, _Child, topk=2, num_steps=3, name="mx_triton")


def test_local_experts_skip_remote_slots():
    """EP rank's partial MoE: slots with id -1 (another rank's experts) add nothing; the rest
    equal a per-slot loop in float64 (SGLang's moe_forward_native dies on the -1 ids and
    counts a token's two slots on one expert once)."""
    g = torch.Generator().manual_seed(0)
    t, e, h, i, k = 7, 3, 16, 8, 4
    x = torch.randn(t, h, generator=g)
    w13, w2 = torch.randn(e, 2 * i, h, generator=g), torch.randn(e, h, i, generator=g)
    ids = torch.randint(-1, e, (t, k), generator=g)
    ids[0] = torch.tensor([0, 0, -1, 2])  # one token twice on expert 0
    ids[1] = -1  # a token with no local slot
    weights = torch.rand(t, k, generator=g)
    out = local_experts_forward(x, w13, w2, weights, ids)
    ref = torch.zeros(t, h, dtype=torch.float64)
    for tok in range(t):
        for s in range(k):
            ex = int(ids[tok, s])
            if ex >= 0:
                gu = w13[ex].double() @ x[tok].double()
                act = torch.nn.functional.silu(gu[:i]) * gu[i:]
                ref[tok] += float(weights[tok, s]) * (w2[ex].double() @ act)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    assert torch.equal(out[1], torch.zeros(h))


@pytest.mark.parametrize("kernels", [False, True], ids=["torch", "triton"])
def test_each_step_attends_the_committed_tokens_and_the_drafts_so_far(monkeypatch, kernels):
    """Real mx_dsa children on a real DSATokenToKVPool: draft step i writes its token's latent at
    req_to_token[r, seq_len + i] (out_cache_loc[i]) and attends exactly the seq_len committed
    tokens plus drafts 0..i: equal to dense MLA over those slots."""
    from dsa_pool_support import PAGE, dsa_pool
    from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode
    from sglang_mx.attention.dsa import backend as mx_dsa
    from sglang_mx.attention.dsa import sparse_math

    monkeypatch.setenv(mx_dsa.FORCE_TRITON_ENV, "1" if kernels else "0")
    g = torch.Generator().manual_seed(7)
    pool = dsa_pool(size=1024, layers=1)
    kv = pool.get_key_buffer(0)
    kv.copy_(torch.randn(kv.shape, generator=g))
    r2t = torch.zeros(3, 256, dtype=torch.int32)
    r2t[1, :192] = torch.arange(PAGE, PAGE + 192)  # request rows own distinct pages
    r2t[2, :192] = torch.arange(5 * PAGE, 5 * PAGE + 192)
    runner = SimpleNamespace(device="cpu", req_to_token_pool=SimpleNamespace(req_to_token=r2t),
                             token_to_kv_pool=pool, page_size=PAGE)  # fmt: skip
    steps, heads = 4, 4
    box = MultiStepDraftBackend(runner, mx_dsa.MxDsaAttnBackend, 1, steps, "mx_dsa")
    rows, seq = torch.tensor([1, 2]), torch.tensor([40, 70])
    fb = ForwardBatch(
        forward_mode=ForwardMode.DECODE, batch_size=2, input_ids=torch.zeros(2, dtype=torch.int64),
        req_pool_indices=rows, seq_lens=seq, seq_lens_cpu=seq.clone(), seq_lens_sum=110,
        out_cache_loc=r2t[rows, seq].long(), positions=seq.clone(),
    )  # fmt: skip
    box.init_forward_metadata(fb)
    layer = SimpleNamespace(layer_id=0, tp_q_head_num=heads, v_head_dim=512, scaling=0.1)
    for i, child in enumerate(box.attn_backends):
        fb.out_cache_loc = r2t[rows, seq + i].long()  # what draft_forward sets for step i
        q = torch.randn(2, heads * 576, generator=g)
        k = torch.randn(2, 1, 576, generator=g)
        out = child.forward_decode(q, k, None, layer, fb)
        assert torch.equal(kv[fb.out_cache_loc], k), f"step {i}: latent not written"
        lens = [int(n) + i + 1 for n in seq.tolist()]
        reqs = [
            sparse_math.Request(j, 1, n, r2t[r, :n].long())
            for j, (r, n) in enumerate(zip(rows.tolist(), lens, strict=True))
        ]
        ref = sparse_math.mla_attend(q.view(2, heads, 576), kv, reqs, 0.1, 512).view(2, -1)
        torch.testing.assert_close(out, ref, atol=1e-4, rtol=1e-4, msg=f"step {i}")
