"""The serving self-check (sglang_mx.selfcheck) in the Triton interpreter: each case passes on
the real kernels at the tiny models' widths, a planted wrong kernel (perturbed output, or one
that raises as a failed build would) is declined at the MoE takeover, by mx_dsa and by
mx_triton, with its log line, its record and `sglang-mx info`'s row; SGLANG_MX_SELF_CHECK=0
turns it off."""

from __future__ import annotations

import argparse
import json
import logging
import os
from types import SimpleNamespace

import pytest
import torch
from sglang_mx.selfcheck import gate, record
from sglang_mx.selfcheck.gqa import GqaShape, check_gqa
from sglang_mx.selfcheck.mla import IndexerShape, MlaShape, check_indexer, check_mla
from sglang_mx.selfcheck.moe import MoeShape, check_moe

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
BF16 = torch.bfloat16
# tiny-glm5: 16 experts, hidden 256, moe intermediate 96, top-4; 4 heads, latent 512 + 64,
# page 64, indexer 4 x 128 heads, top-128. The GQA case: GLM-4.5-like 8 q / 2 kv heads of 64.
MOE = MoeShape(16, 256, 96, 4, "none", BF16)
MLA = MlaShape(4, 512, 64, 64, BF16, False, BF16, 128**-0.5, 193)
INDEXER = IndexerShape(4, 128, 64, 128, BF16, 193)
GQA = GqaShape(8, 2, 64, 64, BF16, BF16, 64**-0.5, 130)


class PlantedCompileError(RuntimeError):
    """What a kernel that fails to build raises, for the gate's purpose: any exception."""


@pytest.fixture(autouse=True)
def fresh_record(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLANG_MX_SELF_CHECK_DIR", str(tmp_path / "self-check"))
    monkeypatch.setenv("SGLANG_MX_SELF_CHECK", "1")  # on a CPU too (the interpreter)
    monkeypatch.setattr(gate, "_done", {})
    monkeypatch.setattr(record, "_results", [])
    return tmp_path / "self-check"


def perturb(monkeypatch, module, name: str, factor: float = 1.05) -> None:
    """Replace kernel `name` of `module` by the real one with its output scaled by `factor`
    (5%: beyond one bf16 ulp of the largest value, and beyond the MoE bound)."""
    real = getattr(module, name)

    def wrong(*args, **kwargs):
        out = real(*args, **kwargs)
        if isinstance(kwargs.get("out"), torch.Tensor):
            kwargs["out"].mul_(factor)
        return out * factor

    monkeypatch.setattr(module, name, wrong)


def raises(monkeypatch, module, name: str) -> None:
    def broken(*args, **kwargs):
        raise PlantedCompileError(f"planted: {name} failed to build\n(second line)")

    monkeypatch.setattr(module, name, broken)


CASES = {
    "moe": lambda: check_moe(MOE, "cpu", tokens=1),
    "mla_decode": lambda: check_mla(MLA, "cpu"),
    "dsa_sparse_decode": lambda: check_mla(MLA, "cpu", top_k=INDEXER.top_k),
    "dsa_indexer": lambda: check_indexer(INDEXER, "cpu"),
    "gqa_decode": lambda: check_gqa(GQA, "cpu"),
}


def kernel_of(case: str):
    """(module, name) of the kernel each case runs, where the case looks it up."""
    from sgl_kernel_rocm import attention
    from sgl_kernel_rocm.moe import triton_moe

    return {
        "moe": (triton_moe, "fused_moe_triton"),
        "mla_decode": (attention, "mla_decode"),
        "dsa_sparse_decode": (attention, "dsa_sparse_decode"),
        "dsa_indexer": (attention, "dsa_indexer_scores"),
        "gqa_decode": (attention, "gqa_decode"),
    }[case]


@pytest.mark.parametrize("case", list(CASES))
def test_each_case_passes_on_the_real_kernel_and_fails_on_a_perturbed_one(case, monkeypatch):
    verdict = CASES[case]()
    assert verdict.ok, verdict.detail
    assert 0 <= verdict.max_err <= verdict.tol
    perturb(monkeypatch, *kernel_of(case))
    wrong = CASES[case]()
    assert not wrong.ok and wrong.detail


def test_topk_selection_that_leaves_out_a_better_key_fails(monkeypatch):
    """The indexer's selection is judged on the reference scores: a select_topk that keeps the
    lowest-scoring keys instead is declined even though every score is right."""
    from sgl_kernel_rocm import attention

    real = attention.select_topk

    def lowest(scores, seq_lens, k):
        return real(-scores.nan_to_num(neginf=float("inf")), seq_lens, k)

    monkeypatch.setattr(attention, "select_topk", lowest)
    verdict = check_indexer(INDEXER, "cpu")
    assert not verdict.ok and "left-out key" in verdict.detail


# -- the MoE takeover ------------------------------------------------------------------------


def moe_layer():
    from sglang.srt.layers.moe.fused_moe_triton import FusedMoE

    # The tiny GLM-5's widths; few tokens keep the interpreter quick.
    return FusedMoE(
        num_experts=16, hidden_size=256, intermediate_size=96, layer_id=1, top_k=4,
        prefix="model.layers.1.mlp.experts", params_dtype=BF16,
    )  # fmt: skip


SGLANGS_OWN = object()  # what SGLang's get_quant_method returns here (its Quark MoE method)


def quark_take(layer):
    from sglang.srt.layers.quantization.quark.quark import QuarkConfig
    from sglang_mx.quant import takeover

    mx = {"dtype": "fp4", "qscheme": "per_group", "group_size": 32, "scale_format": "e8m0"}
    config = QuarkConfig.from_config({
        "quant_method": "quark", "export": {"kv_cache_group": [], "pack_method": "reorder"},
        "global_quant_config": {"weight": {**mx, "is_dynamic": False}, "input_tensors": None,
                                "output_tensors": None, "bias": None},
        "layer_quant_config": {}, "layer_type_quant_config": {}, "exclude": [],
        "packed_modules_mapping": {}, "hf_config": None,
    })  # fmt: skip
    prefix = "model.layers.1.mlp.experts"

    # SGLang's own get_quant_method, stubbed: its Quark W4A16 MoE method needs a GPU to build.
    def sglang_own(self, layer, prefix):
        return SGLANGS_OWN

    return takeover.take_moe_layer(sglang_own, config, layer, prefix)


@pytest.fixture
def moe_on_triton(sglang_context, monkeypatch):
    from sglang_mx.selfcheck import moe

    monkeypatch.setenv("SGLANG_MX_MOE_BACKEND", "triton")  # the GPU path, in the interpreter
    monkeypatch.setattr(moe, "TOKENS", 1)
    return moe_layer()


def test_moe_takeover_runs_the_check_and_takes_the_layer(moe_on_triton, fresh_record):
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    assert isinstance(quark_take(moe_on_triton), MxFp4MoEMethod)
    (result,) = record.load()[0]["results"]
    assert result["op"] == "moe" and result["passed"]
    assert result["shape"] == "E16 H256 I96 top4 a16 bfloat16"
    # The next layer of the same shape reuses the verdict: no second run, no second entry.
    assert isinstance(quark_take(moe_layer()), MxFp4MoEMethod)
    assert len(record.load()[0]["results"]) == 1


def test_moe_takeover_declines_a_wrong_kernel(moe_on_triton, monkeypatch, caplog):
    from sgl_kernel_rocm.moe import triton_moe
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    perturb(monkeypatch, triton_moe, "fused_moe_triton")
    with caplog.at_level(logging.INFO):
        method = quark_take(moe_on_triton)
    assert method is SGLANGS_OWN and not isinstance(method, MxFp4MoEMethod)
    lines = [r.getMessage() for r in caplog.records if "self-check DECLINED" in r.message]
    assert len(lines) == 1
    assert "moe [E16 H256 I96 top4 a16 bfloat16] on cpu: " in lines[0]
    assert "elements beyond the bound" in lines[0]
    assert "SGLang's QuarkConfig MoE method serves instead" in lines[0]
    assert any("stays with SGLang's QuarkConfig: self-check declined moe" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_self_check_off_serves_even_a_wrong_kernel(moe_on_triton, monkeypatch, fresh_record):
    from sgl_kernel_rocm.moe import triton_moe
    from sglang_mx.quant.moe_method import MxFp4MoEMethod

    monkeypatch.setenv("SGLANG_MX_SELF_CHECK", "0")
    raises(monkeypatch, triton_moe, "fused_moe_triton")
    assert isinstance(quark_take(moe_on_triton), MxFp4MoEMethod)
    assert not fresh_record.exists() and record.load() == []


def test_auto_checks_gpu_devices_only(monkeypatch):
    monkeypatch.setenv("SGLANG_MX_SELF_CHECK", "auto")
    assert gate.wanted("cuda:0") and not gate.wanted("cpu")
    monkeypatch.setenv("SGLANG_MX_SELF_CHECK", "1")
    assert gate.wanted("cpu")
    monkeypatch.setenv("SGLANG_MX_SELF_CHECK", "0")
    assert not gate.wanted("cuda:0")
    monkeypatch.setenv("SGLANG_MX_SELF_CHECK", "maybe")
    with pytest.raises(ValueError, match="SGLANG_MX_SELF_CHECK must be auto, 1 or 0"):
        gate.wanted("cpu")


# -- mx_dsa and mx_triton --------------------------------------------------------------------


def dsa_runner():
    from dsa_pool_support import PAGE, dsa_pool

    hf = SimpleNamespace(index_topk=128, index_n_heads=4, qk_nope_head_dim=64,
                         qk_rope_head_dim=64)  # fmt: skip
    return SimpleNamespace(
        device="cpu",
        dtype=BF16,
        req_to_token_pool=SimpleNamespace(req_to_token=torch.zeros(2, 256, dtype=torch.int32)),
        token_to_kv_pool=dsa_pool(4 * PAGE, 1),
        page_size=PAGE,
        tp_size=1,
        model_config=SimpleNamespace(num_attention_heads=4, hf_config=hf),
    )


@pytest.fixture
def mx_dsa(monkeypatch):
    from sglang_mx.attention.dsa import backend as mx_dsa

    monkeypatch.setenv(mx_dsa.FORCE_TRITON_ENV, "1")  # the GPU decode path, in the interpreter
    return mx_dsa


def test_mx_dsa_checks_its_three_kernels_and_keeps_them(mx_dsa):
    backend = mx_dsa.MxDsaAttnBackend(dsa_runner())
    assert backend.use_triton and backend.kernels_declined is None
    results = record.load()[0]["results"]
    assert [r["op"] for r in results] == ["mla_decode", "dsa_sparse_decode", "dsa_indexer"]
    assert all(r["passed"] and r["serves"] == "mx_dsa Triton decode" for r in results)
    assert results[0]["shape"] == "H4 D512+64 page 64 kv float32 q bfloat16 ctx 193"


def test_mx_dsa_declines_an_indexer_that_fails_to_build(mx_dsa, monkeypatch, caplog):
    from sgl_kernel_rocm import attention

    raises(monkeypatch, attention, "dsa_indexer_scores")
    with caplog.at_level(logging.WARNING):
        backend = mx_dsa.MxDsaAttnBackend(dsa_runner())
    assert not backend.use_triton  # decode stays on the torch path (dsa/sparse_math)
    assert "dsa_indexer" in backend.kernels_declined
    (line,) = [r.getMessage() for r in caplog.records if "self-check DECLINED" in r.message]
    assert line.startswith("sglang_mx: self-check DECLINED dsa_indexer [Hi4 D128 page 64 top128")
    assert "PlantedCompileError: planted: dsa_indexer_scores failed to build;" in line
    assert "mx_dsa's torch decode path" in line
    with pytest.raises(RuntimeError, match="launch with --disable-cuda-graph"):
        backend.init_cuda_graph_state(4, 4)


def gqa_runner():
    pool = SimpleNamespace(head_num=2, head_dim=64, v_head_dim=64, dtype=BF16)
    return SimpleNamespace(
        device="cpu",
        dtype=BF16,
        req_to_token_pool=SimpleNamespace(req_to_token=torch.zeros(2, 256, dtype=torch.int32)),
        token_to_kv_pool=pool,
        tp_size=1,
        model_config=SimpleNamespace(num_attention_heads=8),
        use_mla_backend=False,
    )


def test_mx_triton_declines_a_wrong_gqa_kernel_to_its_delegate(sglang_context, monkeypatch,
                                                               caplog):  # fmt: skip
    from sgl_kernel_rocm import attention
    from sglang_mx.attention import mx_triton

    layer = SimpleNamespace(is_cross_attention=False, logit_cap=0.0)
    backend = mx_triton.MxTritonAttnBackend(gqa_runner())
    backend.block_table = torch.zeros(1, 1, dtype=torch.int32)  # a decode batch's
    assert backend.kernel_declined is None and not backend._unsupported(layer)

    monkeypatch.setattr(gate, "_done", {})
    perturb(monkeypatch, attention, "gqa_decode")
    with caplog.at_level(logging.WARNING):
        backend = mx_triton.MxTritonAttnBackend(gqa_runner())
    backend.block_table = torch.zeros(1, 1, dtype=torch.int32)
    assert backend._unsupported(layer)  # decode goes to the delegate (torch_native here)
    (line,) = [r.getMessage() for r in caplog.records if "self-check DECLINED" in r.message]
    assert "gqa_decode [Hq8 Hkv2 D64/64 page 1 kv bfloat16 q bfloat16 ctx 130]" in line
    assert "max abs err" in line and "SGLang's torch_native backend" in line


# -- what `sglang-mx info` shows -------------------------------------------------------------


def test_info_shows_each_ops_result(mx_dsa, monkeypatch, capsys):
    from sgl_kernel_rocm import attention

    perturb(monkeypatch, attention, "dsa_sparse_decode")
    mx_dsa.MxDsaAttnBackend(dsa_runner())
    from sglang_mx.cli import info

    assert info.run(argparse.Namespace(json=True)) == 0  # `sglang-mx info --json`, in-process
    out = capsys.readouterr().out
    rows = json.loads(out)["self-check"]
    assert rows["record"].startswith(f"pid {os.getpid()} running")
    mla = next(v for k, v in rows.items() if k.startswith("mla_decode ["))
    sparse = next(v for k, v in rows.items() if k.startswith("dsa_sparse_decode ["))
    assert mla.startswith("passed on 1 process(es), cpu: max err")
    assert "mx_dsa's torch decode path" in mla  # the backend declined as a whole
    assert sparse.startswith("DECLINED (pid ") and "max abs err" in sparse


def test_info_falls_back_to_the_newest_record_of_an_exited_process(fresh_record):
    fresh_record.mkdir(parents=True)
    dead = {"host": "elsewhere", "pid": 1, "written": "2026-12-01T00:00:00", "results": [
        {"op": "gqa_decode", "shape": "Hq8", "device": "cuda:0", "passed": False,
         "error": "max abs err 1e-1 > 1e-2", "max_err": 0.1, "tol": 0.01, "ms": 3.0,
         "serves": "SGLang's triton backend"}]}  # fmt: skip
    (fresh_record / "elsewhere-1.json").write_text(json.dumps(dead))
    rows = record.summary()
    assert rows["record"] == "pid 1 exited (2026-12-01T00:00:00)"
    assert rows["gqa_decode [Hq8]"] == (
        "DECLINED (pid 1, cuda:0): max abs err 1e-1 > 1e-2; SGLang's triton backend serves"
    )
