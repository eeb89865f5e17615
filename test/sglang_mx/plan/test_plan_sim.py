"""Simulator against cases computed by hand with a linear step cost (plan_support.COST:
10 ms per step + 0.1 ms per prefill token + 1 ms per decoding request)."""

from __future__ import annotations

import math

import pytest
from plan_support import BASE, COST, PER_DECODE, PER_TOKEN, cfg, trace
from sglang_mx.measure.metrics import summarize
from sglang_mx.plan.sim import build_groups, simulate


def run(tr, config=None, ranks=1, groups=1, cost=COST):
    return simulate(tr, build_groups(config or cfg(), cost, ranks, groups))


def test_single_request_by_hand():
    res = run(trace([("a", [("u", 1000)], 5, 0.0)]))
    (r,) = res.request_results()
    prefill = BASE + 1000 * PER_TOKEN  # one step, whole prompt (chunk 4096)
    step = BASE + PER_DECODE
    assert r.ttft == pytest.approx(prefill)
    assert r.itl == pytest.approx([step] * 4)
    assert r.e2e == pytest.approx(prefill + 4 * step)
    assert r.completion_tokens == 5


def test_chunked_prefill_splits_the_prompt():
    res = run(trace([("a", [("u", 1000)], 2, 0.0)]), cfg(chunked_prefill_size=256))
    (r,) = res.request_results()
    # 256 + 256 + 256 + 232: four steps, each paying the base cost
    assert r.ttft == pytest.approx(4 * BASE + 1000 * PER_TOKEN)
    assert [s.prefill_tokens for s in res.steps[:4]] == [256, 256, 256, 232]


def test_saturated_queue_serves_one_at_a_time():
    reqs = [(f"r{i}", [(f"u{i}", 1000)], 5, 0.0) for i in range(4)]
    res = run(trace(reqs), cfg(max_running_requests=1))
    service = BASE + 1000 * PER_TOKEN + 4 * (BASE + PER_DECODE)
    ttfts = sorted(r.ttft for r in res.request_results())
    assert ttfts == pytest.approx([k * service + BASE + 1000 * PER_TOKEN for k in range(4)])


def test_prefill_runs_before_decode_and_batches_requests():
    reqs = [(f"r{i}", [(f"u{i}", 500)], 3, 0.0) for i in range(3)]
    res = run(trace(reqs))
    # all three prompts fit one prefill batch (16384 max prefill tokens): one step, then decode
    assert res.steps[0].prefill_tokens == 1500
    assert res.steps[1].decode_rows == 3
    assert res.steps[1].seconds == pytest.approx(BASE + 3 * PER_DECODE)


def test_cache_hit_lowers_prefill():
    shared = ("doc", 800)
    reqs = [("a", [shared, ("ua", 200)], 2, 0.0), ("b", [shared, ("ub", 200)], 2, 5.0, 800)]
    a, b = run(trace(reqs)).request_results()
    assert a.cached_tokens == 0 and b.cached_tokens == 800
    assert a.ttft == pytest.approx(BASE + 1000 * PER_TOKEN)
    assert b.ttft == pytest.approx(BASE + 200 * PER_TOKEN)


def test_page_size_rounds_hits_down():
    shared = ("doc", 800)
    reqs = [("a", [shared, ("ua", 200)], 2, 0.0), ("b", [shared, ("ub", 200)], 2, 5.0)]
    _, b = run(trace(reqs), cfg(page_size=64)).request_results()
    assert b.cached_tokens == 768  # 12 whole pages of the 800 shared tokens


def test_lpm_serves_longest_cached_prefix_first():
    prime = [("doc", 3000)]
    reqs = [("cold", [("x", 3000)], 2, 0.0), ("warm", [("doc", 3000), ("y", 10)], 2, 0.0)]
    # a 2000-token prefill budget: whichever goes first, the cold 3000-token prompt ends the batch
    config = cfg(max_prefill_tokens=2000, schedule_policy="lpm")
    res = simulate(trace(reqs, prime=prime), build_groups(config, COST))
    by_id = {r.request_id: r for r in res.request_results()}
    assert by_id["warm"].ttft < by_id["cold"].ttft
    fcfs = simulate(
        trace(reqs, prime=prime),
        build_groups(cfg(max_prefill_tokens=2000, schedule_policy="fcfs"), COST),
    )
    by_id = {r.request_id: r for r in fcfs.request_results()}
    assert by_id["cold"].ttft < by_id["warm"].ttft


def test_kv_limit_retracts_and_still_finishes():
    reqs = [("r0", [("u0", 100)], 20, 0.0)]
    reqs += [(f"r{i}", [(f"u{i}", 100)], 400, 0.0) for i in range(1, 6)]
    # r0, r1, r2 fill the budget; when r0 finishes, admission reserves only new_token_ratio
    # (0.7 x 0.3 here) of r1's and r2's remaining tokens, so r3 joins and three requests
    # (1500 tokens at the end) share a 1200-token pool: decode must retract, as SGLang does
    res = run(trace(reqs), cfg(max_total_tokens=1200, schedule_conservativeness=0.3))
    assert res.retractions > 0
    out = res.request_results()
    assert [r.completion_tokens for r in out if r.ok] == [20] + [400] * 5
    assert any(s.binding == "kv-capacity" for s in res.steps)


def test_littles_law_on_the_running_batch():
    """Time-average running-batch size = throughput x mean time in the running batch."""
    from sglang_mx.capacity.workload import WorkloadSpec
    from sglang_mx.measure.tracegen import generate

    spec = WorkloadSpec(num_requests=200, rate=4.0, hit_rate=0.0, prefix_groups=1)
    res = run(generate(spec))
    out = res.request_results()
    busy_end = max(s.start + s.seconds for s in res.steps)
    area = sum(s.running * s.seconds for s in res.steps)
    lam = len(out) / busy_end
    # a request sits in the running batch from its first token to its last
    w = sum(r.e2e - r.ttft for r in out) / len(out)
    assert area / busy_end == pytest.approx(lam * w, rel=0.03)


def test_dp_ranks_step_in_lockstep_round_robin():
    reqs = [(f"r{i}", [(f"u{i}", 1000)], 3, 0.0) for i in range(2)]
    res = run(trace(reqs), ranks=2)
    a, b = res.request_results()
    # one request per rank: both prefill in the same step, each rank's cost is its own batch
    assert a.ttft == pytest.approx(BASE + 1000 * PER_TOKEN) == b.ttft
    assert res.steps[0].prefill_tokens == 2000


def test_pd_disaggregation_hands_off_after_first_token():
    from sglang_mx.plan.engine import Engine
    from sglang_mx.plan.sim import Group

    groups = [Group([Engine(cfg(), role="prefill")], COST),
              Group([Engine(cfg(), role="decode")], COST)]  # fmt: skip
    tr = trace([("a", [("u", 1000)], 4, 0.0)])
    res = simulate(tr, groups, handoff_s=lambda r: 0.5)
    (r,) = res.request_results()
    # the client's first token comes from the decode server once the KV has arrived (SGLang
    # streams it from the prebuilt batch), then one decode step per token
    assert r.ttft == pytest.approx(BASE + 1000 * PER_TOKEN + 0.5)
    assert r.itl == pytest.approx([BASE + PER_DECODE] * 3)


def test_closed_loop_concurrency_keeps_n_in_flight():
    reqs = [(f"r{i}", [(f"u{i}", 100)], 4, None) for i in range(6)]
    res = run(trace(reqs, arrival="concurrency", concurrency=2))
    s = summarize(res.request_results())
    assert s.completed == 6
    starts = sorted(r.start for r in res.request_results())
    assert starts[:2] == [0.0, 0.0] and starts[2] > 0


def test_request_too_large_for_the_pool_is_reported_not_hung():
    res = run(trace([("big", [("u", 5000)], 4, 0.0)]), cfg(max_total_tokens=1000))
    (r,) = res.request_results()
    assert not r.ok and math.isnan(r.e2e)


def test_prefill_base_is_charged_only_on_prefill_steps():
    from sglang_mx.plan.stepcost import LinearStepCost

    cost = LinearStepCost(BASE, PER_TOKEN, 0.0, PER_DECODE, 0.0, prefill_base_s=0.5)
    (r,) = run(trace([("a", [("u", 1000)], 3, 0.0)]), cost=cost).request_results()
    assert r.ttft == pytest.approx(0.5 + BASE + 1000 * PER_TOKEN)
    assert r.itl == pytest.approx([BASE + PER_DECODE] * 2)


def test_cpu_overlap_loop_sends_each_step_after_the_next():
    """SGLang's overlap loop on a CPU (sync_forward): a step's tokens go out after the next
    step's forward; the last token, with nothing left to run, goes out at once."""
    tr = trace([("a", [("u", 100)], 4, 0.0)])
    prefill, step = BASE + 100 * PER_TOKEN, BASE + PER_DECODE
    (lag,) = run(tr, cfg(sync_forward=True)).request_results()
    assert lag.ttft == pytest.approx(prefill + step)
    assert lag.itl == pytest.approx([step, step, 0.0])
    assert lag.e2e == pytest.approx(prefill + 3 * step)
    (plain,) = run(tr).request_results()
    assert plain.ttft == pytest.approx(prefill) and plain.itl == pytest.approx([step] * 3)
    assert plain.e2e == pytest.approx(lag.e2e)


def test_decode_waits_for_every_chunk_of_a_chunked_prefill():
    """Mixed chunk off: a chunked request's next chunk is scheduled as a prefill batch, which
    runs before decode (get_next_batch_to_run), so no decode step runs between chunks."""
    reqs = [("a", [("ua", 100)], 10, 0.0), ("b", [("ub", 1000)], 2, 0.05)]
    res = run(trace(reqs), cfg(chunked_prefill_size=256))
    assert [s.prefill_tokens for s in res.steps[:8]] == [100, 0, 0, 0, 256, 256, 256, 232]
    assert [s.decode_rows for s in res.steps[4:9]] == [0, 0, 0, 0, 2]
    a = next(r for r in res.request_results() if r.request_id == "a")
    chunks = 4 * BASE + 1000 * PER_TOKEN
    assert max(a.itl) == pytest.approx(chunks + BASE + 2 * PER_DECODE)
