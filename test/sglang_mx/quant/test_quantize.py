"""`sglang-mx quantize` round trip and checkpoint validation errors."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors import safe_open
from sgl_kernel_rocm.mx import dequantize_mxfp4, quantize_mxfp4
from sglang_mx.assets import bundled_model_path
from sglang_mx.cli.main import main
from sglang_mx.quant.checkpoint import CheckpointError, validate_checkpoint
from sglang_mx.quant.scheme import parse_scheme


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    dst = tmp_path_factory.mktemp("q") / "mxfp4"
    assert main(["quantize", bundled_model_path("bf16"), str(dst)]) == 0
    return dst


def test_quantized_checkpoint_config_and_validation(quantized):
    config = json.loads((quantized / "config.json").read_text())
    scheme = parse_scheme(config["quantization_config"])
    assert (scheme.source, scheme.act_quant) == ("mxfp4", "none")
    validate_checkpoint(quantized)
    assert (quantized / "tokenizer.json").exists()


def test_experts_equal_reference_dequantization(quantized):
    src = safe_open(f"{bundled_model_path('bf16')}/model.safetensors", framework="pt")
    dst = safe_open(f"{quantized}/model.safetensors", framework="pt")
    expert_names = [n for n in src.keys() if ".mlp.experts." in n]
    assert len(expert_names) == 3 * 16 * 3  # 3 MoE layers x 16 experts x gate/up/down
    for name in expert_names:
        w = src.get_tensor(name).float()
        packed, scales = dst.get_tensor(name), dst.get_tensor(name + "_scale")
        assert packed.dtype == torch.uint8 and packed.shape == (w.shape[0], w.shape[1] // 2)
        assert scales.shape == (w.shape[0], w.shape[1] // 32)
        ref_packed, ref_scales = quantize_mxfp4(w, axis=-1)
        assert torch.equal(packed, ref_packed) and torch.equal(scales, ref_scales)
        deq = dequantize_mxfp4(packed, scales, dtype=torch.float32)
        # Per OCP MX: |x|/scale < 8 and E2M1's widest gap is 4 -> 6, so rounding errs by <= 1
        # scale and saturating (6, 8) to 6 by < 2 scales.
        bound = 2.0 ** (scales.float() - 127).repeat_interleave(32, dim=1) * 2.0
        assert bool(((deq - w).abs() <= bound + 1e-6).all()), name
    for name in src.keys():
        if ".mlp.experts." not in name:
            assert torch.equal(src.get_tensor(name), dst.get_tensor(name)), name


def test_quantize_refuses_quantized_input(quantized, tmp_path, capsys):
    assert main(["quantize", str(quantized), str(tmp_path / "again")]) == 2
    out = capsys.readouterr()
    assert "already quantized" in out.err and out.out == ""  # errors go to stderr (issue 43)


def test_truncated_checkpoint_names_file_and_problem(tmp_path):
    ckpt = tmp_path / "trunc"
    shutil.copytree(bundled_model_path("mxfp4"), ckpt)
    weights = ckpt / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError) as exc:
        validate_checkpoint(ckpt)
    assert exc.value.path == weights
    assert "truncated" in str(exc.value)


def test_mismatched_checkpoint_names_tensor_and_config(tmp_path):
    ckpt = tmp_path / "mismatch"
    shutil.copytree(bundled_model_path("bf16"), ckpt)
    config = json.loads((ckpt / "config.json").read_text())
    config["moe_intermediate_size"] *= 2
    (ckpt / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as exc:
        validate_checkpoint(ckpt)
    msg = str(exc.value)
    assert "model.safetensors" in msg and "mlp.experts" in msg and "config.json" in msg


def test_derived_model_is_built_on_first_use_as_quantize_writes_it(
    quantized, tmp_path, monkeypatch
):
    """The GLM-4.5 MXFP4 bundled model is not stored: the first bundled_model_path("mxfp4")
    builds it from the bf16 one, byte for byte what `sglang-mx quantize` writes, and four
    concurrent first uses each get the whole checkpoint (built aside, renamed into place)."""
    from concurrent.futures import ThreadPoolExecutor

    import sglang_mx.assets as assets

    shutil.copytree(bundled_model_path("bf16"), tmp_path / "tiny-glm-moe-bf16")
    monkeypatch.setattr(assets, "ASSETS", tmp_path)
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: bundled_model_path("mxfp4"), range(4)))
    assert set(paths) == {str(tmp_path / "tiny-glm-moe-mxfp4")}
    built = sorted(p.name for p in (tmp_path / "tiny-glm-moe-mxfp4").iterdir())
    assert built == sorted(p.name for p in quantized.iterdir())
    for name in built:
        assert (tmp_path / "tiny-glm-moe-mxfp4" / name).read_bytes() == (
            quantized / name
        ).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-glm-moe-bf16", "tiny-glm-moe-mxfp4"]
    validate_checkpoint(tmp_path / "tiny-glm-moe-mxfp4")
