"""The kernel cost model (sgl_kernel_rocm/compile_check/costmodel): refit on the committed H200
rows, judged on the held-out shapes against the issue's bounds; planted faults (a bound removed
from the model) must fail the same judgement. No compile, no GPU: the compiled facts of the
kernels the rows ran are committed in docs/results/cost-model/points-sm90.json."""

from __future__ import annotations

import json

import pytest
from sgl_kernel_rocm.compile_check.costmodel import calibrate as K
from sgl_kernel_rocm.compile_check.costmodel import model
from sgl_kernel_rocm.compile_check.costmodel.pipes import mma_macs, pipe_of


@pytest.fixture(scope="module")
def data():
    return K.load()


@pytest.fixture(scope="module")
def result(data):
    return K.evaluate(data)


def test_the_points_are_the_code_the_rows_ran(data):
    # Every kernel the points compile is the same code (AST) as at the run's commit, compiled
    # with the rows' Triton; every point names a measured row that exists.
    assert all(data["kernel_sources_same_as_run_commit"].values())
    assert data["compiled_with_triton"] == "3.6.0"
    sources = {s: json.loads((K.RESULTS / s).read_text())["rows"] for s in data["rows_from"]}
    for p in data["points"]:
        row = sources[p["source"]][p["row"]]
        what = p["kernel"].split(".")[-1]
        meas = row.get(f"{what}_us") if p["kernel"] in ("moe.gate_up", "moe.down") else row["us"]
        assert meas == p["measured_us"]
        assert all(k["key"] in data["facts"] for k in p["kernels"])


def test_held_out_rows_meet_the_bounds(result):
    assert K.passes(result) == [], K.passes(result)
    assert result["rows_held_out"] >= 50 and result["rows_fit"] >= 100
    assert result["pairs_ranked"] >= 100


def test_committed_calibration_is_what_a_refit_gives(result):
    committed = json.loads(K.CALIBRATION_FILE.read_text())
    for key in ("held_out_median_abs_rel_err", "held_out_max_ratio", "pair_rank_accuracy",
                "rows_fit", "rows_held_out"):  # fmt: skip
        assert committed[key] == result[key], key
    assert committed["fit"] == result["fit"] == model.PERF["fit"]


@pytest.mark.parametrize("term", ["issue", "latency", "spill"])
def test_a_model_without_a_bound_fails(data, term):
    """Planted: with the issue-port bound (the pipe every instruction passes), the latency bound
    or the spill term removed, the refit model breaks the held-out bounds."""
    assert K.passes(K.evaluate(data, drop_term=term))


def _rec(loop_ops: dict[str, int], regs: int = 64) -> dict:
    loop = {"ops": loop_ops, "instructions": 0}
    return {"regs": {"reg": regs}, "shared_bytes": 0, "isa": {"ops": loop_ops, "main_loop": loop}}


def test_a_conversion_bound_loop_binds_on_its_pipe_and_needs_its_rate():
    # 8 warps x 16 programs per SM: the scheduler is full, so the F2F pipe (16/clk/SM) binds.
    rec = _rec({"F2F": 64, "FFMA": 64, "LDG": 4})
    launch = model.Launch(programs=132 * 16, iters=100, hbm_bytes=1e6, bytes_per_iter=512)
    fit = {"cpi": 2}
    p = model.predict(rec, 8, 3, "sm90", launch, fit)
    assert p.bound == "pipe:cvt"
    planted = model.predict(rec, 8, 3, "sm90", launch, fit, drop_term="pipe:cvt")
    assert planted.us < p.us / 2 and planted.bound != "pipe:cvt"
    # The same loop on gfx950, where a conversion is an ordinary VALU op: the issue bound.
    assert model.predict(rec, 8, 3, "gfx950", launch, fit).bound != "pipe:cvt"


def test_memory_waves_and_launch_terms():
    rec = _rec({"LDG": 2, "FFMA": 4})
    c = model.constants("sm90")
    big = model.Launch(programs=132 * 4, iters=10, hbm_bytes=4.2e9, bytes_per_iter=64)
    p = model.predict(rec, 4, 2, "sm90", big)
    assert p.bound == "memory"
    assert p.us == pytest.approx(1000 + c["launch_us"], rel=1e-6)  # 4.2 GB at 4.2 TB/s
    tiny = model.Launch(programs=1, iters=0, hbm_bytes=0, bytes_per_iter=0)
    assert model.predict(rec, 4, 2, "sm90", tiny).bound in ("launch", "prologue")
    # One more program than fits in a wave adds a round.
    occ = model.occupancy(rec, 4, "sm90", c)
    full = model.Launch(programs=132 * occ, iters=1000, hbm_bytes=0, bytes_per_iter=16)
    over = model.Launch(programs=132 * occ + 1, iters=1000, hbm_bytes=0, bytes_per_iter=16)
    a, b = model.predict(rec, 4, 2, "sm90", full), model.predict(rec, 4, 2, "sm90", over)
    assert (a.rounds, b.rounds) == (1, 2) and b.us > 1.8 * (a.us - c["launch_us"])


def test_pipes_and_matrix_sizes():
    assert pipe_of("F2FP.BF16", False) == "cvt" and pipe_of("IMAD", False) == "imad"
    assert pipe_of("LDSM", False) == "ldsm" and pipe_of("UIADD3", False) == "uniform"
    assert pipe_of("v_cvt_scalef32_pk_bf16_fp4", True) == "cvt"
    assert pipe_of("v_mfma_scale_f32_16x16x128_f8f6f4", True) == "mma"
    assert pipe_of("ds_read_b128", True) == "mio" and pipe_of("s_add_u32", True) == "salu"
    assert mma_macs("HMMA.16816", False) == 16 * 8 * 16
    assert mma_macs("HGMMA.64x64x16", False) == 64 * 64 * 16 // 4
    assert mma_macs("v_mfma_f32_16x16x32_bf16", True) == 16 * 16 * 32
