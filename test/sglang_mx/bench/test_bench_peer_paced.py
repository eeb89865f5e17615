"""Peer agreement where the server's latencies are known: our runner and SGLang's own
`python -m sglang.benchmark.serving` side by side against the null upstream paced to a first
token after TTFT_S and one token every ITL_S (benchmark/null_upstream.py), so each latency
median is a client's measurement of a fixed time and every figure holds its peer.BOUNDS entry
on its own (issue 42: a rank-sum "cannot tell them apart" no longer passes a figure). A 15%
error planted in our runner's TTFT fails it (the bound is 10%; issue 54: the plant was 40%, which
a bound of 35% would also have caught)."""

from __future__ import annotations

import pytest
from bench_processes import null_upstream
from sglang_mx_lab import peer
from sglang_mx_lab.peer import PeerWorkload, side_by_side, table

TTFT_S, ITL_S = 0.25, 0.05
PLANT = 1.15  # our TTFT read 15% long: 1.5x the bound (measured unplanted: ratio 1.008)


@pytest.fixture(scope="module")
def paced_url():
    pace = ("--ttft-s", str(TTFT_S), "--itl-s", str(ITL_S))
    with null_upstream("--stream-max-tokens", *pace) as url:
        yield url


W = PeerWorkload(input_len=64, output_len=8, num_requests=12, concurrency=2)


def test_every_figure_within_its_bound_on_a_paced_server(paced_url, bundled_tokenizer_dir,
                                                         tmp_path):  # fmt: skip
    got = side_by_side(paced_url, bundled_tokenizer_dir, W, tmp_path)
    print("\n" + table(got["rows"]))
    assert got["ours"]["completed"] == got["sglang"]["completed"] == W.num_requests
    assert all(r["ok"] for r in got["rows"]), "\n" + table(got["rows"])
    # and both measured the times the server keeps
    for side in ("ours", "sglang"):
        assert got[side]["ttft_p50_s"] == pytest.approx(TTFT_S, rel=0.1), side
        assert got[side]["itl_p50_s"] == pytest.approx(ITL_S, rel=0.1), side


def test_a_15pct_ttft_error_in_our_runner_fails(paced_url, bundled_tokenizer_dir, tmp_path,
                                                monkeypatch):  # fmt: skip
    real = peer.run_ours

    def inflated(*a, **kw):
        out = real(*a, **kw)
        return out | {"ttft_p50_s": out["ttft_p50_s"] * PLANT,
                      "ttft_samples": [x * PLANT for x in out["ttft_samples"]]}  # fmt: skip

    monkeypatch.setattr(peer, "run_ours", inflated)
    got = side_by_side(paced_url, bundled_tokenizer_dir, W, tmp_path)
    print("\n" + table(got["rows"]))
    rows = {r["figure"]: r for r in got["rows"]}
    assert not rows["ttft_p50_s"]["ok"], "\n" + table(got["rows"])
    assert rows["itl_p50_s"]["ok"] and rows["request_throughput"]["ok"]
