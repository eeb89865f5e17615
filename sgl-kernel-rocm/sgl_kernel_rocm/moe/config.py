"""Launch configs for the fused MXFP4 MoE: JSON tables per arch (configs/moe_mxfp4/<arch>.json)
resolved by `sgl_kernel_rocm.tuning.get_config`, plus a heuristic that launches on any GPU."""

from __future__ import annotations

import os
from typing import Any

from sgl_kernel_rocm.arch import has_native_dot_scaled
from sgl_kernel_rocm.tuning import get_config

OP = "moe_mxfp4"
CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")
# Optional keys: split-K of gate_up (over H) and of down (over INTER), 1 when absent.
SPLIT_KEYS = ("SPLIT_K", "SPLIT_K_DOWN")
MAX_SPLIT_K = 16
UPCASTS = ("triton", "ptx", "gfx950")
# Optional key: the weights take the MMA's M side (decode tiles; False when absent).
SWAP_KEY = "SWAP_AB"
# Optional key: the down GEMM's own tile, entries over the shared ones (BLOCK_M is the
# alignment's and stays shared; the down split is SPLIT_K_DOWN at the top level).
DOWN_KEY = "down"
DOWN_TILE_KEYS = ("BLOCK_N", "BLOCK_K", "num_warps", "num_stages", "SWAP_AB")
UPCAST_KEY = "upcast"
KNOWN_KEYS = (*CONFIG_KEYS, *SPLIT_KEYS, SWAP_KEY, DOWN_KEY, UPCAST_KEY)
MAX_WARPS, MAX_STAGES = 16, 8


def shape_key(num_experts: int, hidden: int, inter: int, act_quant: str) -> str:
    """Key of one weight shape in the JSON tables, e.g. "E256_H6144_I2048_a16"."""
    return f"E{num_experts}_H{hidden}_I{inter}_{'a4' if act_quant == 'mxfp4' else 'a16'}"


def heuristic_config(m: int) -> dict[str, Any]:
    """A config that compiles on every supported GPU: dot dims >= 16, K tile a multiple of 64
    (two 32-element scale blocks, and the packed K/2 >= 32 that dot_scaled wants)."""
    if m <= 32:
        return {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 2}
    if m <= 512:
        return {"BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 2}
    return {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "num_warps": 8, "num_stages": 2}


def interpreter_config(m: int) -> dict[str, Any]:
    """The interpreter pays per program and per op, so few big tiles are fastest there."""
    return {
        "BLOCK_M": 32 if m <= 64 else 64,
        "BLOCK_N": 64,
        "BLOCK_K": 128,
        "num_warps": 4,
        "num_stages": 1,
    }


def resolve_config(
    arch: str, m: int, num_experts: int, hidden: int, inter: int, act_quant: str
) -> tuple[dict[str, Any], bool]:
    """(config, is_tuned) for `m` tokens; on CPU (interpreter) the interpreter config."""
    if arch == "cpu" or os.environ.get("TRITON_INTERPRET") == "1":
        return interpreter_config(m), False
    key = shape_key(num_experts, hidden, inter, act_quant)
    # W4A16 and W4A4 keep separate defaults: a tile that builds cleanly for one may not for the
    # other (the compile gate checks both).
    default = "DEFAULT_a4" if act_quant == "mxfp4" else "DEFAULT_a16"
    return get_config(OP, arch, m, key, heuristic_config, default_key=default)


def choose_path(arch: str, act_dtype_is_fp32: bool, act_quant: str = "none") -> str:
    """dot_scaled where the matrix units take the operands natively, else nibble unpack.

    W4A4 (e2m1 x e2m1) takes dot_scaled on gfx950 and sm100 (native block-scaled MMA). W4A16
    (bf16 x e2m1) takes it on gfx950 only, where `v_cvt_scalef32_pk_bf16_fp4` upcasts in
    hardware; Triton decomposes it into a software upcast on sm100, which the word-wise unpack
    upcast beat by the retired static ceiling (not re-ranked by the cost model yet; an estimate).
    fp32 activations always unpack: dot_scaled takes bf16/fp16 or MX operands only.
    """
    if act_dtype_is_fp32 or not has_native_dot_scaled(arch):
        return "unpack"
    if act_quant == "mxfp4" or arch == "gfx950":
        return "dot_scaled"
    return "unpack"


def choose_upcast(arch: str, config: dict[str, Any] | None = None) -> str:
    """The word-wise FP4 upcast of the unpack path (`moe/_upcast.py`): a config's "upcast" when
    it names one, else inline PTX on sm90/sm100, the hardware convert on gfx950, pure Triton
    elsewhere (gfx942, the interpreter)."""
    if config and "upcast" in config:
        if config["upcast"] not in UPCASTS:
            raise ValueError(f"config upcast must be one of {UPCASTS}, got {config['upcast']!r}")
        return config["upcast"]
    return {"sm90": "ptx", "sm100": "ptx", "gfx950": "gfx950"}.get(arch, "triton")


def split_k_of(config: dict[str, Any]) -> tuple[int, int]:
    """(gate_up split, down split) of a launch config: its "SPLIT_K" / "SPLIT_K_DOWN" (default
    1 each). A split runs a contiguous range of K blocks as a third grid axis; the fp32
    partials are summed in split order by the tile's last arriver (`moe/_split_k.py`)."""
    out = []
    for key in SPLIT_KEYS:
        v = config.get(key, 1)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SPLIT_K:
            raise ValueError(f"config {key} must be an int in 1..{MAX_SPLIT_K}, got {v!r}")
        out.append(v)
    return out[0], out[1]


def swap_ab_of(config: dict[str, Any]) -> bool:
    """Whether a launch config puts the weights on the MMA's M side ("SWAP_AB", default False):
    each GEMM then accumulates out^T = W . x^T, so at a few tokens per expert the BLOCK_N weight
    rows fill the MMA's tall side (Hopper's wgmma needs 64) and the tokens its short one."""
    v = config.get(SWAP_KEY, False)
    if not isinstance(v, bool):
        raise ValueError(f"config {SWAP_KEY} must be true or false, got {v!r}")
    return v


def down_config(config: dict[str, Any]) -> dict[str, Any]:
    """The down GEMM's launch config: the shared config with its "down" entries over it (a
    per-GEMM tile: any of DOWN_TILE_KEYS). Without "down" both GEMMs run the same tile."""
    over = config.get(DOWN_KEY, {})
    if not isinstance(over, dict):
        raise ValueError(f"config {DOWN_KEY} must be an object, got {over!r}")
    bad = sorted(set(over) - set(DOWN_TILE_KEYS))
    if bad:
        raise ValueError(f"config {DOWN_KEY} keys {bad} are not among {list(DOWN_TILE_KEYS)}")
    out = {k: v for k, v in config.items() if k != DOWN_KEY} | over
    for key in ("BLOCK_N", "BLOCK_K", "num_warps", "num_stages"):
        v = out.get(key)
        if key in over and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"config {DOWN_KEY}.{key} must be a positive int, got {v!r}")
    return out


def _pow2(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, int) and v >= 1 and v & (v - 1) == 0


def _check_tile(cfg: dict[str, Any], where: str, need: tuple[str, ...]) -> None:
    """The tile entries of one GEMM: tl.arange wants powers of two, tl.dot dims >= 16, a K tile
    of whole 32-element scale blocks with a packed K/2 >= 32 (dot_scaled), N in 32s."""
    rules = {
        "BLOCK_M": (lambda v: _pow2(v) and v >= 16, "a power of two >= 16"),
        "BLOCK_N": (lambda v: _pow2(v) and v % 32 == 0, "a power-of-two multiple of 32"),
        "BLOCK_K": (lambda v: _pow2(v) and v % 64 == 0, "a power-of-two multiple of 64"),
        "num_warps": (lambda v: _pow2(v) and v <= MAX_WARPS, f"a power of two <= {MAX_WARPS}"),
        "num_stages": (
            lambda v: not isinstance(v, bool) and isinstance(v, int) and 1 <= v <= MAX_STAGES,
            f"an int in 1..{MAX_STAGES}",
        ),
    }
    for key, (ok, what) in rules.items():
        if key not in cfg:
            if key in need:
                raise ValueError(f"config {where}{key} is missing")
            continue
        if not ok(cfg[key]):
            raise ValueError(f"config {where}{key} must be {what}, got {cfg[key]!r}")


def validate_config(config: dict[str, Any]) -> None:
    """Raises ValueError naming the key of anything in a launch config the fused-MoE kernels do
    not take: unknown keys, the tiles of both GEMMs (the shared one and "down"), SPLIT_K /
    SPLIT_K_DOWN, SWAP_AB (both levels) and "upcast". The launcher calls it on every config;
    the suite calls it on every shipped table entry."""
    if not isinstance(config, dict):
        raise ValueError(f"a MoE launch config must be an object, got {config!r}")
    unknown = sorted(set(config) - set(KNOWN_KEYS))
    if unknown:
        raise ValueError(f"config keys {unknown} are not among {list(KNOWN_KEYS)}")
    _check_tile(config, "", need=("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    split_k_of(config)
    swap_ab_of(config)
    if UPCAST_KEY in config and config[UPCAST_KEY] not in UPCASTS:
        raise ValueError(f"config upcast must be one of {UPCASTS}, got {config[UPCAST_KEY]!r}")
    down = down_config(config)
    _check_tile({k: down[k] for k in config.get(DOWN_KEY, {}) if k != SWAP_KEY}, "down.", ())
    swap_ab_of(down)
