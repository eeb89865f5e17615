"""What the takeover points call before they choose our kernels: the MoE takeover
(quant/takeover.py, per FusedMoE layer), mx_dsa's and mx_triton's constructors. Each reads the
shapes it is about to serve from the layer or the model runner, runs the cases once per process
and shape (later layers of the same shape reuse the verdict), logs one line per declined op and
adds every result to this process's record (record.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import torch

from sglang_mx.env import ENV
from sglang_mx.selfcheck import record
from sglang_mx.selfcheck.tolerance import ToleranceVerdict

logger = logging.getLogger(__name__)
Case = tuple[str, str, Callable[[], ToleranceVerdict]]  # (op, shape description, the check)
_done: dict[tuple, list[record.CheckResult]] = {}
GPU_CONTEXT = 2048  # cached tokens of the longer request on a GPU (splits, several tiles)
CPU_CONTEXT = 130  # in the interpreter: every program costs Python time


def wanted(device: torch.device | str) -> bool:
    """SGLANG_MX_SELF_CHECK: auto checks where the kernels are compiled for a GPU; 1 also in
    the interpreter on a CPU; 0 never."""
    mode = ENV.self_check
    return mode == "on" or (mode == "auto" and torch.device(device).type != "cpu")


def _measure(
    fn: Callable[[], ToleranceVerdict], device: torch.device
) -> tuple[ToleranceVerdict, float]:
    start = time.perf_counter()
    try:
        verdict = fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception as e:  # any failure to build, launch or run declines the op
        first = (str(e).strip().splitlines() or [""])[0][:300]
        verdict = ToleranceVerdict(False, float("nan"), 0.0, f"{type(e).__name__}: {first}")
    return verdict, (time.perf_counter() - start) * 1e3


def check_group(cases: list[Case], device: torch.device | str, ours: str, fallback: str):
    """Run the cases of one takeover (all must pass for it to take), once per process; return
    their results. `ours` / `fallback`: what serves when they pass / when any fails."""
    device = torch.device(device)
    key = (tuple((op, shape) for op, shape, _ in cases), str(device))
    if key in _done:
        return _done[key]
    measured = [(op, shape, *_measure(fn, device)) for op, shape, fn in cases]
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the cases' tensors must not shrink SGLang's KV pool
    passed = all(v.ok for _, _, v, _ in measured)
    serves = ours if passed else fallback
    results = []
    for op, shape, v, ms in measured:
        result = record.CheckResult(
            op, shape, str(device), v.ok, v.detail, v.max_err, v.tol, round(ms, 2), serves
        )
        results.append(result)
        path = record.add(result)
        if v.ok:
            logger.info("sglang_mx: self-check passed %s [%s] on %s: max err %.2e <= %.2e, %.0f ms",
                        op, shape, device, v.max_err, v.tol, ms)  # fmt: skip
        else:
            logger.warning(
                "sglang_mx: self-check DECLINED %s [%s] on %s: %s; %s serves instead "
                "(record %s; SGLANG_MX_SELF_CHECK=0 skips the check)",
                op, shape, device, v.detail, fallback, path,
            )  # fmt: skip
    _done[key] = results
    return results


def _declined(results: list[record.CheckResult]) -> str | None:
    bad = [r for r in results if not r.passed]
    return None if not bad else "self-check declined " + "; ".join(
        f"{r.op} [{r.shape}]: {r.error}" for r in bad
    )  # fmt: skip


def moe_declined(layer: Any, act_quant: str, kernel_backend: str, fallback: str) -> str | None:
    """None, or why our fused MoE must not take this FusedMoE layer (SGLang's method serves)."""
    from sgl_kernel_rocm.moe import resolve_backend

    from sglang_mx.selfcheck.moe import MoeShape, check_moe

    device = torch.get_default_device()  # SGLang builds the model under its target device
    if not wanted(device) or resolve_backend(kernel_backend, device.type) != "triton":
        return None  # the torch reference serves: nothing of ours to check
    shape = MoeShape(int(layer.num_local_experts), int(layer.hidden_size),
                     int(layer.intermediate_size_per_partition), int(layer.top_k), act_quant,
                     layer.params_dtype)  # fmt: skip
    case = ("moe", shape.describe(), lambda: check_moe(shape, device, kernel_backend))
    return _declined(check_group([case], device, "sglang_mx fused MXFP4 MoE", fallback))


def _attn_tp_size(runner: Any) -> int:
    try:
        from sglang.srt.runtime_context import get_parallel

        return int(get_parallel().attn_tp_size)
    except Exception:  # no published parallel config (a bare runner): the runner's TP
        return int(getattr(runner, "tp_size", 1) or 1)


def _model_dtype(runner: Any) -> torch.dtype:
    return getattr(runner, "dtype", None) or runner.model_config.dtype


def dsa_declined(runner: Any) -> str | None:
    """None, or why mx_dsa must not decode on our kernels (its torch path serves): MLA dense
    and DSA sparse decode and, for a DSA pool, the indexer, at the runner's shapes."""
    from sglang_mx.selfcheck.mla import IndexerShape, MlaShape, check_indexer, check_mla

    device = torch.device(str(runner.device))
    if not wanted(device):
        return None
    try:
        pool, hf = runner.token_to_kv_pool, runner.model_config.hf_config
        page = int(runner.page_size)
        dsa = hasattr(pool, "get_index_k_with_scale_buffer")
        top_k = int(hf.index_topk) if dsa else 0
        floor = GPU_CONTEXT if device.type != "cpu" else CPU_CONTEXT
        context = max(floor, top_k + page + 1)
        mla = MlaShape(
            heads=int(runner.model_config.num_attention_heads) // _attn_tp_size(runner),
            d_lat=int(pool.kv_lora_rank), d_rope=int(pool.qk_rope_head_dim), page=page,
            kv_dtype=pool.dtype, packed=bool(getattr(pool, "dsa_kv_cache_store_fp8", False)),
            q_dtype=_model_dtype(runner),
            sm_scale=float(hf.qk_nope_head_dim + hf.qk_rope_head_dim) ** -0.5, context=context,
        )  # fmt: skip
        cases: list[Case] = [("mla_decode", mla.describe(), lambda: check_mla(mla, device))]
        if dsa:
            idx = IndexerShape(int(hf.index_n_heads), int(pool.index_head_dim),
                               int(getattr(pool, "index_page_size", page)), top_k,
                               _model_dtype(runner), context)  # fmt: skip
            cases += [
                ("dsa_sparse_decode", f"{mla.describe()} top{top_k}",
                 lambda: check_mla(mla, device, top_k)),
                ("dsa_indexer", idx.describe(), lambda: check_indexer(idx, device)),
            ]  # fmt: skip
    except Exception as e:  # shapes we cannot read are shapes we have not checked
        cases = [("mx_dsa", "unknown", _raise(e))]
    fallback = "mx_dsa's torch decode path (dsa/sparse_math; eager, no CUDA graphs)"
    return _declined(check_group(cases, device, "mx_dsa Triton decode", fallback))


def gqa_declined(runner: Any, delegate: str) -> str | None:
    """None, or why mx_triton must not decode on gqa_decode (its delegate serves decode too)."""
    from sglang_mx.selfcheck.gqa import GqaShape, check_gqa

    device = torch.device(str(runner.device))
    if not wanted(device):
        return None
    try:
        pool = runner.token_to_kv_pool
        shape = GqaShape(
            q_heads=int(runner.model_config.num_attention_heads) // _attn_tp_size(runner),
            kv_heads=int(pool.head_num), head_dim=int(pool.head_dim),
            v_head_dim=int(pool.v_head_dim), kv_dtype=pool.dtype, q_dtype=_model_dtype(runner),
            sm_scale=float(pool.head_dim) ** -0.5,
            context=GPU_CONTEXT if device.type != "cpu" else CPU_CONTEXT,
        )  # fmt: skip
        cases: list[Case] = [("gqa_decode", shape.describe(), lambda: check_gqa(shape, device))]
    except Exception as e:
        cases = [("gqa_decode", "unknown", _raise(e))]
    fallback = f"SGLang's {delegate} backend (mx_triton's delegate) for decode"
    return _declined(check_group(cases, device, "mx_triton gqa_decode", fallback))


def _raise(e: Exception) -> Callable[[], ToleranceVerdict]:
    def fail() -> ToleranceVerdict:
        raise e

    return fail
