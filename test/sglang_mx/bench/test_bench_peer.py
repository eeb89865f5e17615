"""peer.py without a server: SGLang's result record read into our keys, the permutation test
of two medians on hand samples, and the agreement rows (a ratio inside its bound, a latency
outside it that is still within sampling error, one that is not)."""

from __future__ import annotations

import json

import pytest
from sglang_mx.bench.load.limits import BenchError
from sglang_mx_lab.peer import (
    LIVE_BOUNDS,
    PeerWorkload,
    compare,
    rank_sum_p,
    read_sglang_result,
)


def _theirs(**over) -> dict:
    d = {"completed": 4, "total_output_tokens": 32, "duration": 2.0, "request_throughput": 2.0,
         "output_throughput": 16.0, "median_ttft_ms": 100.0, "median_itl_ms": 20.0,
         "median_tpot_ms": 21.0, "ttfts": [0.09, 0.1, 0.1, 0.11],
         "itls": [[0.02] * 7, [0.021] * 7, [0.019] * 7, [0.02] * 7]}  # fmt: skip
    return d | over


def test_sglang_record_in_our_units(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(_theirs(completed=1)) + "\n" + json.dumps(_theirs()) + "\n")
    got = read_sglang_result(path)  # the last record: SGLang appends one per run
    assert got["completed"] == 4 and got["ttft_p50_s"] == 0.1 and got["itl_p50_s"] == 0.02
    assert len(got["itl_samples"]) == 28 and got["ttft_samples"] == [0.09, 0.1, 0.1, 0.11]
    with pytest.raises(BenchError, match="no SGLang benchmark result"):
        read_sglang_result(tmp_path / "missing.jsonl")


def test_rank_sum_test_by_hand():
    a = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    assert rank_sum_p(a, list(a)) == 1.0
    # b wholly above a: U = 0, z = (18 - 0.5) / sqrt(39) = 2.802, p = 0.00508
    assert rank_sum_p(a, [x + 1 for x in a]) == pytest.approx(0.00508, abs=1e-5)
    # interleaved: U = 15, z = (3 - 0.5) / sqrt(39) = 0.400, p = 0.689
    assert rank_sum_p(a, [x + 0.05 for x in a]) == pytest.approx(0.689, abs=1e-3)
    assert rank_sum_p([1.0] * 5, [1.0] * 5) == 1.0  # all tied: nothing tells them apart


def _ours(**over) -> dict:
    d = {"request_throughput": 2.1, "output_tok_s": 16.8, "ttft_p50_s": 0.1, "itl_p50_s": 0.02,
         "ttft_samples": [0.09, 0.1, 0.1, 0.11], "itl_samples": [0.02] * 28}  # fmt: skip
    return d | over


def test_rows_judge_each_figure_by_its_bound_alone(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text(json.dumps(_theirs()))
    theirs = read_sglang_result(path)
    rows = {r["figure"]: r for r in compare(_ours(), theirs)}
    assert rows["request_throughput"]["ratio"] == pytest.approx(1.05) and rows["output_tok_s"]["ok"]
    assert all(r["ok"] for r in rows.values())
    # TTFT 30% high from four noisy samples spanning SGLang's: the rank-sum test cannot tell
    # them apart, and the figure fails all the same (the p-value is shown, never an excuse)
    noisy = _ours(ttft_p50_s=0.13, ttft_samples=[0.05, 0.12, 0.14, 0.3])
    row = next(r for r in compare(noisy, theirs) if r["figure"] == "ttft_p50_s")
    assert row["ratio"] > 1.2 and row["p_value"] >= 0.01 and not row["ok"]
    # with the live bounds a latency median is shown, not judged
    live = {r["figure"]: r for r in compare(noisy, theirs, LIVE_BOUNDS)}
    assert live["ttft_p50_s"]["bound"] is None and live["ttft_p50_s"]["ok"]
    # ITL doubled over 28 steady gaps: outside the bound and significant
    slow = _ours(itl_p50_s=0.04, itl_samples=[0.04] * 28)
    row = next(r for r in compare(slow, theirs) if r["figure"] == "itl_p50_s")
    assert row["p_value"] < 0.01 and not row["ok"]
    throughput = next(r for r in compare(_ours(request_throughput=2.3), theirs))
    assert not throughput["ok"]  # 15% off, no sampling excuse for a throughput


def test_bad_workload_is_one_line():
    with pytest.raises(BenchError, match="output_len must be at least 2"):
        PeerWorkload(64, 1, 4, 1)
