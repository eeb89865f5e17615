"""The `mx_cuda` platform (SGLang on a CUDA GPU without sgl_kernel): which platform claims a
process, the server-argument defaults it applies, and its class and hooks, on this CPU box (the
class imports and answers without CUDA). Serving on a GPU is scripts/gpu_serve_check.sh."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import tomllib
import torch
from sglang_mx import platform_choice
from sglang_mx.assets import bundled_model_path
from sglang_mx.platform_choice import MX_CPU, MX_CUDA, Facts, choose
from sglang_mx.seam import platform

ROOT = Path(__file__).resolve().parents[3]


def facts(**kw) -> Facts:
    base = dict(disabled=False, force_cpu=False, gpu=True, hip=False, sgl_kernel=True)
    return Facts(**{**base, "wanted": "auto", **kw})


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, None),  # a real SGLang GPU image: nothing changes
        ({"wanted": "cuda-native"}, MX_CUDA),  # asked for
        ({"sgl_kernel": False}, MX_CUDA),  # CUDA without sgl_kernel
        ({"gpu": False}, MX_CPU),  # a CPU box stays mx_cpu ...
        ({"gpu": False, "wanted": "cuda-native"}, MX_CPU),  # ... even when cuda-native is asked
        ({"force_cpu": True, "sgl_kernel": False}, MX_CPU),
        ({"hip": True, "sgl_kernel": False}, None),  # ROCm keeps SGLang's platform
        ({"disabled": True, "sgl_kernel": False}, None),
        ({"disabled": True, "gpu": False}, None),
    ],
)
def test_platform_choice(kw, expected):
    assert choose(facts(**kw)) == expected


def test_this_cpu_box_is_mx_cpu_even_when_cuda_native_is_asked(monkeypatch):
    monkeypatch.setenv("SGLANG_MX_PLATFORM", "cuda-native")
    f = platform_choice.current_facts()
    # The venv's sgl_kernel is our stand-in, which does not count as the real package.
    assert (f.gpu, f.sgl_kernel, f.wanted) == (False, False, "cuda-native")
    assert platform.activate() == platform.PLATFORM_CLASS
    assert platform.activate_cuda() is None


@pytest.mark.parametrize("kw", [{"sgl_kernel": False}, {"wanted": "cuda-native"}])
def test_exactly_one_entry_point_activates(monkeypatch, kw):
    # SGLang refuses to start when two platform plugins activate without SGLANG_PLATFORM.
    monkeypatch.setattr(platform_choice, "current_facts", lambda: facts(**kw))
    assert platform.activate() is None
    assert platform.activate_cuda() == platform.CUDA_PLATFORM_CLASS
    monkeypatch.setattr(platform_choice, "current_facts", lambda: facts())
    assert platform.activate() is None and platform.activate_cuda() is None


def test_bad_platform_value_is_named(monkeypatch):
    monkeypatch.setenv("SGLANG_MX_PLATFORM", "cuda")
    with pytest.raises(ValueError, match="SGLANG_MX_PLATFORM must be auto or cuda-native"):
        platform_choice.current_facts()


def test_entry_point_is_declared():
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert eps["sglang.srt.platforms"]["mx_cuda"] == "sglang_mx.seam.platform:activate_cuda"
    assert eps["sglang.srt.platforms"]["mx_cpu"] == "sglang_mx.seam.platform:activate"


# The ServerArgs fields MxCudaPlatform.apply_server_args_defaults reads or sets.
PLATFORM_FLAGS = {
    "device",
    "sampling_backend",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "disable_custom_all_reduce",
}


def unset_args(model_path: str, **kw) -> SimpleNamespace:
    """Server args as SGLang has them when the user sets none of PLATFORM_FLAGS (its own
    defaults, read from ServerArgs), but for `kw`."""
    import msgspec
    from sglang.srt.server_args import ServerArgs

    fields = msgspec.structs.fields(ServerArgs)
    unset = {f.name: f.default for f in fields if f.name in PLATFORM_FLAGS}
    assert unset.keys() == PLATFORM_FLAGS, "SGLang renamed a flag the platform reads"
    return SimpleNamespace(model_path=model_path, **{**unset, **kw})


def test_server_args_defaults_for_a_dsa_model():
    from sglang_mx.seam.platform_cuda import MxCudaPlatform

    args = unset_args(bundled_model_path("glm5-mxfp4"))
    MxCudaPlatform().apply_server_args_defaults(args)
    assert args.device == "cuda"
    assert args.sampling_backend == "pytorch"  # not FlashInfer
    assert args.attention_backend == "mx_dsa"  # not SGLang's GPU-kernel `dsa`
    assert args.disable_custom_all_reduce is True


def test_server_args_defaults_for_a_gqa_model_and_explicit_flags():
    from sglang_mx.seam.platform_cuda import MxCudaPlatform

    gqa = unset_args(bundled_model_path("mxfp4"))
    MxCudaPlatform().apply_server_args_defaults(gqa)
    # Left unset: SGLang asks an out-of-tree platform for its default, mx_triton.
    assert gqa.attention_backend is None
    assert MxCudaPlatform().get_default_attention_backend() == "mx_triton"

    given = unset_args(
        bundled_model_path("glm5-mxfp4"),
        device="cuda",
        sampling_backend="flashinfer",
        decode_attention_backend="triton",
    )
    MxCudaPlatform().apply_server_args_defaults(given)
    assert (given.sampling_backend, given.attention_backend) == ("flashinfer", None)


def test_class_imports_without_cuda_and_answers_its_hooks():
    assert not torch.cuda.is_available()
    from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
    from sglang_mx.quant.config import MxFp4ExpertsConfig
    from sglang_mx.seam.platform_cuda import MxCudaPlatform

    p = MxCudaPlatform()
    assert p.is_out_of_tree() and not p.is_cuda()  # SGLang consults an OOT platform's hooks
    assert (p.device_name, p.device_type) == ("cuda", "cuda")
    assert p.get_dispatch_key_name() == "native"
    assert p.capabilities.graph_capture and p.capabilities.supports_triton
    assert not p.capabilities.piecewise_graph and not p.capabilities.hicache_device_kernels
    assert p.get_graph_runner_cls() is DecodeCudaGraphRunner
    assert p.get_group_coordinator_device(3) == torch.device("cuda", 3)
    assert p.get_quantization_config("quark") is MxFp4ExpertsConfig
    assert p.get_quantization_config("mxfp4") is MxFp4ExpertsConfig
    assert p.get_quantization_config("fp8") is None
    assert p.get_compile_backend() == "eager"


def test_custom_ops_dispatch_to_native_under_mx_cuda(monkeypatch):
    """With mx_cuda as SGLang's current platform, SGLang's own op dispatch picks forward_native
    for its custom ops (never forward_cuda, which calls sgl_kernel)."""
    import sglang.srt.platforms as platforms
    from sglang.kernels import fused_op
    from sglang.srt.layers.activation import SiluAndMul
    from sglang.srt.layers.layernorm import RMSNorm
    from sglang_mx.seam.platform_cuda import MxCudaPlatform

    monkeypatch.setattr(platforms, "_current_platform", MxCudaPlatform())
    fused_op._oot_dispatch_key.cache_clear()
    # What the in-tree CUDA platform would pick on a GPU: forward_cuda.
    monkeypatch.setattr(fused_op, "_platform_key", lambda: "cuda")
    try:
        for op in (RMSNorm(64), SiluAndMul()):
            chosen = op._resolve_forward_method()
            assert chosen.__func__ is type(op).forward_native, (type(op).__name__, chosen)
            assert hasattr(type(op), "forward_cuda")  # there was a CUDA path to avoid
    finally:
        fused_op._oot_dispatch_key.cache_clear()


@pytest.mark.gpu
def test_cuda_machine_without_sgl_kernel_is_claimed_by_mx_cuda():
    """On the H200 image (no sgl_kernel): the platform that claims the process is mx_cuda."""
    f = platform_choice.current_facts()
    assert f.gpu and not f.hip
    if f.sgl_kernel:
        pytest.skip("the real sgl_kernel is installed: SGLang's CUDA platform serves")
    assert platform.activate_cuda() == platform.CUDA_PLATFORM_CLASS


def test_cuda_hooks_put_torch_in_place_of_two_jit_kernels():
    from sglang_mx.seam import cuda_hooks

    ids = torch.tensor([[1, 2], [3, 4], [5, 6]], dtype=torch.int32)
    cuda_hooks.mask_padded_rows(ids, torch.tensor(2), -1)
    assert ids.tolist() == [[1, 2], [3, 4], [-1, -1]]
    calls = []
    cuda_hooks._mask_padded_on_torch(lambda *a: calls.append(a), ids, None)
    assert len(calls) == 1  # no padded count (or a CPU tensor): SGLang's own function runs

    # Applied as SGLang applies plugin hooks (a fresh process: hooks are process-wide). With
    # SGLang's CUDA flags forced, its router would pick the JIT tiny GEMM; hooked, it never does.
    code = """
import torch
from sglang.srt.plugins.hook_registry import HookRegistry
from sglang.srt.models.deepseek_common import utils
from sglang_mx.seam import cuda_hooks
utils._is_cuda, utils._device_sm = True, 90
shape = dict(num_experts=256, hidden_size=6144, weight_dtype=torch.bfloat16)  # unhooked: 16
cuda_hooks.register()
HookRegistry.apply_hooks()
from sglang.srt.layers.moe import topk
assert hasattr(utils.tiny_router_gemm_max_tokens, "__wrapped__")
assert hasattr(topk._mask_topk_ids_padded_region, "__wrapped__")
print("router", utils.tiny_router_gemm_max_tokens(**shape))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0 and "router -1" in out.stdout, out.stderr[-2000:]
