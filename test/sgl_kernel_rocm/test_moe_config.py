"""Per-arch MoE launch configs: the JSON tables, the resolver, and that a table config launches."""

from __future__ import annotations

import json

import pytest
import torch
from sgl_kernel_rocm.moe import fused_moe_mxfp4
from sgl_kernel_rocm.moe.config import (
    OP,
    heuristic_config,
    resolve_config,
    shape_key,
    validate_config,
)
from sgl_kernel_rocm.moe.synthetic import random_moe_inputs
from sgl_kernel_rocm.tuning import CONFIG_DIR, get_config

ARCHS = ("gfx950", "gfx942", "sm90", "sm100")


def _load(arch: str) -> dict:
    return json.loads((CONFIG_DIR / OP / f"{arch}.json").read_text())


@pytest.mark.parametrize("arch", ARCHS)
def test_tables_are_valid_and_say_where_they_come_from(arch):
    table = _load(arch)
    meta = table["_meta"]
    assert meta["source"] == "static"
    # Static tables say they are not measured, how they were chosen, and under which Triton.
    assert all(word in meta["how"] for word in ("not measured", "compile gate", "ceiling"))
    assert meta["triton"] and meta["hardware"].startswith("none")
    assert "DEFAULT_a16" in table and "DEFAULT_a4" in table
    for key, buckets in table.items():
        if key == "_meta":
            continue
        assert "any" in buckets
        for cfg in buckets.values():
            bm, bn, bk = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]
            # Launch constraints: powers of two, dot dims >= 16, whole scale blocks per tile.
            assert all(v & (v - 1) == 0 for v in (bm, bn, bk))
            assert bm >= 16 and bn % 32 == 0 and bk % 64 == 0
            assert cfg["num_warps"] in (4, 8) and 1 <= cfg["num_stages"] <= 4


def _shipped_entries():
    for arch in ARCHS:
        for key, buckets in _load(arch).items():
            if key != "_meta":
                for bucket, cfg in buckets.items():
                    yield f"{arch}/{key}/{bucket}", cfg


def test_every_shipped_config_key_is_one_the_kernels_take():
    """Every entry of every shipped table, every key (tiles of both GEMMs, "down", SWAP_AB at
    both levels, SPLIT_K / SPLIT_K_DOWN, stages, "upcast"), through the validator the launcher
    itself calls; and the entries use each optional key somewhere, so each is exercised."""
    seen = set()
    for where, cfg in _shipped_entries():
        try:
            validate_config(cfg)
        except ValueError as e:
            raise AssertionError(f"{where}: {e}") from e
        seen |= set(cfg) | {f"down.{k}" for k in cfg.get("down", {})}
    assert {"down", "SWAP_AB", "SPLIT_K", "SPLIT_K_DOWN", "upcast", "down.SWAP_AB"} <= seen


GOOD = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 2}


@pytest.mark.parametrize(
    "bad,key",
    [
        ({"BLOCK_M": 8}, "BLOCK_M"),
        ({"BLOCK_N": 96}, "BLOCK_N"),  # a multiple of 32, not a power of two
        ({"BLOCK_K": 32}, "BLOCK_K"),
        ({"num_warps": 3}, "num_warps"),
        ({"num_stages": 0}, "num_stages"),
        ({"num_stages": True}, "num_stages"),
        ({"SPLIT_K": 0}, "SPLIT_K"),
        ({"SPLIT_K_DOWN": 2.0}, "SPLIT_K_DOWN"),
        ({"SWAP_AB": 1}, "SWAP_AB"),
        ({"upcast": "asm"}, "upcast"),
        ({"down": {"BLOCK_K": 96}}, "down.BLOCK_K"),
        ({"down": {"num_stages": 9}}, "down.num_stages"),
        ({"down": {"SWAP_AB": "yes"}}, "SWAP_AB"),
        ({"down": {"BLOCK_M": 32}}, "down"),
        ({"down": []}, "down"),
        ({"BLOCK_SIZE_M": 16}, "BLOCK_SIZE_M"),  # unknown (SGLang's spelling)
    ],
)
def test_the_validator_names_each_bad_key(bad, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        validate_config(GOOD | bad)


def test_a_planted_bad_table_entry_fails_the_shipped_check(monkeypatch, tmp_path):
    """The shipped-table test reads tables through _load: a copy with one bad "down" entry
    and one bad SWAP_AB planted must make it fail, naming the entry."""
    real = _load("sm90")
    key = next(k for k in real if k != "_meta")
    bucket = next(iter(real[key]))
    for plant in ({"down": {"BLOCK_N": 48}}, {"SWAP_AB": "true"}):
        table = json.loads(json.dumps(real))
        table[key][bucket] |= plant
        monkeypatch.setitem(globals(), "_load", lambda arch, t=table: t if arch == "sm90" else {})
        with pytest.raises(AssertionError, match=f"sm90/{key}/{bucket}"):
            test_every_shipped_config_key_is_one_the_kernels_take()


def test_static_pick_takes_the_least_predicted_time():
    """The static tuner keeps candidates that pass the gate and ranks them by the cost model's
    predicted time, ties to fewer warps, then fewer stages."""
    from sgl_kernel_rocm.compile_check.static_tune import _name, moe_block_m, pick

    def cfg(bn, warps=4, stages=1):
        return {"BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": 128, "num_warps": warps,
                "num_stages": stages}  # fmt: skip

    small, big, bad, twin = cfg(64), cfg(256), cfg(128), cfg(64, warps=8)
    scores = {
        _name(small): (True, [], []),
        _name(big): (True, [], []),
        _name(bad): (False, [], ["spills"]),
        _name(twin): (True, [], []),
    }
    predicted = {64: 10.0, 256: 20.0, 128: 1.0}  # the failing candidate would be fastest
    cost = lambda c: predicted[c["BLOCK_N"]]  # noqa: E731
    assert pick("gfx950", [small, big, bad, twin], scores, cost) == small  # fewer warps wins
    assert pick("gfx950", [big, bad, twin], scores, cost) == twin
    assert pick("gfx950", [big, bad], scores, cost) == big
    assert pick("gfx950", [bad], scores, cost) is None
    # M tile: expected slots per expert, clamped to [16, 128].
    assert moe_block_m(1, 256) == 16 and moe_block_m(1024, 256) == 32
    assert moe_block_m(4096, 256) == 128 and moe_block_m(64, 32) == 16


def test_resolver_buckets_and_fallbacks(monkeypatch):
    key = shape_key(256, 6144, 256, "none")
    table = _load("gfx950")
    cfg, tuned = get_config(OP, "gfx950", 3, key, heuristic_config)
    assert cfg == table[key]["M_LEQ_4"] and tuned is False  # derived, so never "tuned"
    cfg, _ = get_config(OP, "gfx950", 10**6, key, heuristic_config)
    assert cfg == table[key]["any"]
    cfg, _ = get_config(OP, "gfx950", 8, "E7_H64_I32_a16", heuristic_config, "DEFAULT_a16")
    assert cfg == table["DEFAULT_a16"]["M_LEQ_16"]
    # resolve_config (as on a GPU: the interpreter off) sends an unknown shape to its
    # activation format's default.
    with monkeypatch.context() as m:
        m.setenv("TRITON_INTERPRET", "0")
        cfg, tuned = resolve_config("gfx950", 200, 7, 64, 32, "mxfp4")
    assert cfg == table["DEFAULT_a4"]["M_LEQ_256"] and tuned is False
    cfg, tuned = get_config(OP, "gfx1100", 8, key, heuristic_config)  # no table for this arch
    assert cfg == heuristic_config(8) and tuned is False
    # On CPU the interpreter gets big tiles whatever the shape.
    cfg, tuned = resolve_config("cpu", 8, 256, 6144, 256, "none")
    assert cfg["BLOCK_N"] >= 64 and tuned is False


@pytest.mark.parametrize("arch", ["gfx950", "gfx942"])
def test_a_table_config_launches_in_the_interpreter(arch):
    cfg = _load(arch)["DEFAULT_a16"]["M_LEQ_16"]
    inputs = random_moe_inputs(5, 4, 256, 128, 2, dtype=torch.bfloat16, seed=1)
    out = fused_moe_mxfp4(*inputs, backend="triton", path="unpack", config=cfg)
    ref = fused_moe_mxfp4(*inputs, backend="torch")
    # bf16 per-slot buffer and output rounding, k = 2 (see test_moe.py).
    scale = ref.float().abs().max().item()
    assert (out.float() - ref.float()).abs().max().item() <= 4 * 2.0**-8 * scale
