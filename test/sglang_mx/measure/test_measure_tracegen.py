"""Trace generator: exact designed hit rate, determinism, JSONL round trip, arrivals."""

from __future__ import annotations

import random

import pytest
from sglang_mx.capacity.workload import PRESETS, LengthDist, WorkloadSpec, get_preset
from sglang_mx.measure.tracegen import Trace, generate


def simulate_radix(trace: Trace) -> int:
    """Independent check: cached tokens of a prefix cache over the segment sequences, in
    dispatch order, with priming; a turn's previous prompt is inserted before the turn runs."""
    seen: list[list[tuple[str, int]]] = [[p] for p in trace.prime]
    total = 0
    for r in trace.requests:
        best = 0
        for s in seen:
            n = 0
            for (ka, la), (kb, lb) in zip(r.segments, s, strict=False):
                if ka != kb:
                    break
                n += min(la, lb)
                if la != lb:
                    break
            best = max(best, n)
        total += min(best, r.input_len - 1)
        seen.append(r.segments)
    return total


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_hit_target_exactly(name):
    trace = generate(get_preset(name))
    assert trace.predicted_hit_rate == pytest.approx(get_preset(name).hit_rate, abs=5e-4)
    assert simulate_radix(trace) == sum(r.expected_cached for r in trace.requests)
    lens = [r.input_len for r in trace.requests]
    assert sum(lens) / len(lens) == pytest.approx(get_preset(name).input_len.value, rel=1e-3)


def test_production_preset_is_the_public_workload():
    spec = get_preset("production-20k-1k-60")
    trace = generate(spec)
    assert {r.input_len for r in trace.requests} == {20000}
    assert {r.output_len for r in trace.requests} == {1000}
    assert trace.prefix_len == 12000


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_specs_hit_target(seed):
    rng = random.Random(seed)
    spec = WorkloadSpec(
        input_len=LengthDist.parse(f"uniform:{rng.randint(200, 800)}:{rng.randint(900, 4000)}"),
        output_len=LengthDist.parse("uniform:8:64"),
        hit_rate=rng.choice([0.6, 0.7, 0.8]),
        turns=rng.choice([1, 2, 3]),
        prefix_groups=rng.randint(1, 5),
        num_requests=rng.randint(20, 60),
        seed=seed,
    )
    trace = generate(spec)
    assert trace.predicted_hit_rate == pytest.approx(spec.hit_rate, abs=0.01)
    assert simulate_radix(trace) == sum(r.expected_cached for r in trace.requests)


def test_unprimed_first_use_of_each_prefix_is_a_miss():
    spec = get_preset("cpu-2k-32-60").with_overrides(prime=False, num_requests=40)
    trace = generate(spec)
    assert trace.prime == []
    first = {}
    for r in trace.requests:
        first.setdefault(r.segments[0][0], r)
    assert all(r.expected_cached == 0 for r in first.values())
    assert trace.predicted_hit_rate == pytest.approx(0.6, abs=0.01)


def test_trace_is_seeded_and_round_trips(tmp_path):
    spec = get_preset("agentic-20k-1k-60").with_overrides(num_requests=30)
    a, b = generate(spec), generate(spec)
    assert [r.to_dict() for r in a.requests] == [r.to_dict() for r in b.requests]
    loaded = Trace.load(a.save(tmp_path / "t.jsonl"))
    assert [r.to_dict() for r in loaded.requests] == [r.to_dict() for r in a.requests]
    assert loaded.spec == spec and loaded.prime == a.prime
    other = generate(spec.with_overrides(seed=7))
    assert [r.arrival_s for r in other.requests] != [r.arrival_s for r in a.requests]


def test_sessions_wait_for_their_previous_turn():
    trace = generate(get_preset("agentic-20k-1k-60").with_overrides(num_requests=24))
    pos = {r.id: i for i, r in enumerate(trace.requests)}
    for r in trace.requests:
        if r.turn:
            assert r.after == f"s{r.session}t{r.turn - 1}" and pos[r.after] < pos[r.id]
            prev = trace.requests[pos[r.after]]
            assert r.expected_cached == prev.input_len


def test_arrivals():
    spec = get_preset("cpu-2k-32-60").with_overrides(num_requests=2000, rate=4.0)
    times = [r.arrival_s for r in generate(spec).requests]
    assert times == sorted(times)
    assert (len(times) - 1) / times[-1] == pytest.approx(4.0, rel=0.1)  # Poisson mean rate
    fixed = generate(spec.with_overrides(arrival="fixed-rate", num_requests=5))
    assert [r.arrival_s for r in fixed.requests] == [0, 0.25, 0.5, 0.75, 1.0]
    closed = generate(spec.with_overrides(arrival="concurrency", num_requests=5))
    assert all(r.arrival_s is None for r in closed.requests)


def test_unreachable_hit_rate_is_an_error():
    # 4-turn sessions re-send earlier turns, so their hit rate cannot drop to 10%
    with pytest.raises(ValueError, match="fewer turns"):
        generate(WorkloadSpec(hit_rate=0.1, turns=4, num_requests=20))


def test_bad_specs_are_rejected_with_a_reason():
    with pytest.raises(ValueError, match="hit_rate"):
        WorkloadSpec(hit_rate=1.0)
    with pytest.raises(ValueError, match="arrival"):
        WorkloadSpec(arrival="burst")
    with pytest.raises(ValueError, match="bad length"):
        LengthDist.parse("zipf:3")
