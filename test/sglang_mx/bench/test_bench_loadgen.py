"""The load generator spread over worker processes (loadgen.py): sessions stay in one worker and
keep their turn order, every worker sends on the one clock, the self-check judges each process,
reach is read from the merged timeline, calibrate climbs its ladder at each process count, and
verify sizes its processes from a calibration. Live against the paced null server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_processes import null_upstream
from sglang_mx.bench.load.client_check import EARLY_LIMIT_S, processes_needed, selfcheck
from sglang_mx.bench.load.loadgen import Job, share_concurrency, split
from sglang_mx.bench.load.reach import by_send_time
from sglang_mx.bench.run.runner import RunConfig, run_trace
from sglang_mx.capacity.workload import WorkloadSpec
from sglang_mx.measure.tracegen import Trace, TraceRequest

ITL_S = 0.004
TURN_OUT = 8


@pytest.fixture(scope="module")
def null_url():
    with null_upstream("--stream-max-tokens", "--itl-s", str(ITL_S)) as url:
        yield url


def _jobs(arrivals: list[tuple[str, float, str | None]]) -> list[Job]:
    return [Job(i, [1], "", 4, a, after) for i, a, after in arrivals]


def test_split_keeps_sessions_whole_and_deals_them_by_first_arrival():
    jobs = _jobs([("a0", 0.0, None), ("b0", 0.1, None), ("a1", 0.2, "a0"), ("c0", 0.3, None),
                  ("a2", 0.4, "a1"), ("b1", 0.5, "b0")])  # fmt: skip
    shares = split(jobs, 2)
    ids = [[j.id for j in s] for s in shares]
    assert ids == [["a0", "a1", "a2", "c0"], ["b0", "b1"]]
    assert [[j.id for j in s] for s in split(jobs, 5)] == [["a0", "a1", "a2"], ["b0", "b1"], ["c0"]]
    assert share_concurrency(5, 2) == [3, 2] and share_concurrency(None, 3) == [None] * 3


def test_reach_by_send_time_counts_only_first_tokens_before_the_send():
    a = TraceRequest("a", 0, 0, [("p", 100), ("a", 10)], 4, 0)
    b = TraceRequest("b", 1, 0, [("p", 100), ("b", 10)], 4, 100)
    c = TraceRequest("c", 2, 0, [("p", 100), ("c", 10)], 4, 100)
    # b sent after a's first token, c before it (its own process's clock, the same clock)
    held = by_send_time([a, b, c], {"a": 0.0, "b": 0.5, "c": 0.2}, {"a": 0.3, "b": 0.6})
    assert held == {"a": 0, "b": 100, "c": 0}
    assert by_send_time([a, b], {"b": 0.1}, {}, [("p", 100)]) == {"a": 0, "b": 100}


def test_selfcheck_judges_the_busiest_process_and_scales_the_calibration():
    summary = (90.0, 900.0)  # the run's (request_throughput, output_tok_s)
    calib = {"req_s": 100.0, "tok_s": 10_000.0, "by_processes": {"2": {"req_s": 150.0,
             "tok_s": 15_000.0}}}  # fmt: skip
    one = selfcheck([], [], [0.95], 1.0, summary, calib)
    assert one.client_bound and any("client CPU 95%" in r for r in one.reasons)
    assert any("90% of the client's calibrated ceiling 100" in r for r in one.reasons)
    two = selfcheck([], [], [0.5, 0.6], 1.0, summary, calib)
    assert two.processes == 2 and two.client_cpu_fraction == 0.6
    assert not two.client_bound and two.ceiling_basis == "measured at 2 process(es)"
    three = selfcheck([], [], [0.5, 0.5, 0.99], 1.0, summary, calib)
    assert three.client_bound and "busiest" in three.reasons[0]
    assert "x 3 (not measured" in three.ceiling_basis


def test_selfcheck_flags_a_run_with_one_early_send():
    """Two requests of 40 sent 0.2 s before they were due (a worker that started early): the
    median lag is on time, the minimum is not, and the run is flagged."""
    from sglang_mx.measure.metrics import RequestResult

    results = [RequestResult(request_id=str(i), requested_output=4) for i in range(40)]
    for i, r in enumerate(results):
        r.lag = -0.2 if i < 2 else 0.001
    check = selfcheck(results, [], [0.1], 1.0)
    assert check.schedule_lag_s.p50 >= 0 and check.schedule_lag_s.min == -0.2
    assert check.client_bound and check.early_sends == 2
    assert "2 of 40 requests sent early (schedule lag min -200.0 ms" in check.reasons[0]
    on_time = selfcheck(results[2:], [], [0.1], 1.0)
    assert not on_time.client_bound and on_time.early_sends == 0, on_time


def test_processes_needed_reads_measured_counts_then_shares_out():
    calib = {"req_s": 100.0, "tok_s": 3000.0, "by_processes": {"1": {"req_s": 100.0,
             "tok_s": 3000.0}, "2": {"req_s": 170.0, "tok_s": 5000.0}}}  # fmt: skip
    assert processes_needed(50.0, 1500.0, calib)[0] == 1
    assert processes_needed(120.0, 3500.0, calib)[0] == 2  # 0.8 x 170 = 136 req/s covers it
    n, basis = processes_needed(150.0, 3000.0, calib)  # over 2's measured ceiling
    assert n == 3 and "not measured" in basis  # ceil(150 / 80) = 2, but 2 measured short
    assert processes_needed(700.0, 100.0, {"req_s": 100.0, "tok_s": 3000.0})[0] == 9


def _session_trace(sessions: int, turns: int, rate: float) -> Trace:
    """`sessions` sessions of `turns` turns, first turns arriving at `rate`; turn k waits for
    turn k-1 (closed within a session, open across sessions)."""
    spec = WorkloadSpec.fixed("loadgen", 8, TURN_OUT, hit_rate=0.0, num_requests=sessions * turns,
                              arrival="fixed-rate", rate=rate, prime=False)  # fmt: skip
    reqs = []
    for s in range(sessions):
        for t in range(turns):
            rid = f"s{s}t{t}"
            after = f"s{s}t{t - 1}" if t else None
            reqs.append(TraceRequest(rid, s, t, [(rid, 8)], TURN_OUT, 0,
                                     arrival_s=s / rate, after=after))  # fmt: skip
    return Trace(spec, 0, [], reqs)


def _config(url: str, processes: int) -> RunConfig:
    return RunConfig(base_url=url, flush=False, prime=False, warmup=0, progress=False,
                     check_limits=False, scrape_metrics=False, processes=processes)  # fmt: skip


def test_two_processes_send_on_one_clock_and_keep_each_session_in_order(null_url):
    trace = _session_trace(sessions=12, turns=3, rate=20.0)
    prompts = {r.id: [1] * 8 for r in trace.requests}
    res = run_trace(trace, prompts, _config(null_url, 2))
    by = {r.request_id: r for r in res.results}
    assert all(r.ok and r.completion_tokens == TURN_OUT for r in res.results), res.warnings
    assert {r.worker for r in res.results} == {0, 1}
    check = res.summary.selfcheck
    assert check.processes == 2 and len(check.client_cpu_fraction_by_process) == 2
    for s in range(12):
        first = by[f"s{s}t0"]
        assert abs(first.start - s / 20.0) < 0.1, first  # every worker's t0 is the run's t0
        for t in (1, 2):
            prev, turn = by[f"s{s}t{t - 1}"], by[f"s{s}t{t}"]
            assert turn.worker == prev.worker  # a session never crosses workers
            assert turn.start >= prev.start + prev.e2e - 1e-6  # sent after its previous turn
    # the merged timeline interleaves the workers' sends, as one clock would
    starts = sorted((r.start, r.worker) for r in res.results if r.request_id.endswith("t0"))
    assert [w for _, w in starts[:4]] == [0, 1, 0, 1]
    # no send before its time, the minimum held to the clocks' bound (the plant: below)
    print(f"schedule lag min {check.schedule_lag_s.min * 1e3:.2f} ms")
    assert check.schedule_lag_s.min >= -EARLY_LIMIT_S and check.early_sends == 0, check


def test_a_worker_that_starts_early_is_flagged(null_url, monkeypatch):
    """Issue 54, item 4's plant, on the run above: worker 1 wakes for each request EARLY_S
    before it is due (loadgen_plants.early_worker, in its spawned process). Its sessions' turns
    go up to 0.2 s early; the merged record's minimum schedule lag falls below -EARLY_LIMIT_S
    and the self-check flags the run (2026-12-06: min -199.2 to -199.7 ms, 18 of 36 early, all
    of worker 1's; unplanted, min +0.01 ms and none). About 1.3 s."""
    from loadgen_plants import EARLY_S, EARLY_WORKER, early_worker
    from sglang_mx.bench.load import loadgen

    monkeypatch.setattr(loadgen, "_worker", early_worker)
    trace = _session_trace(sessions=12, turns=3, rate=20.0)
    res = run_trace(trace, {r.id: [1] * 8 for r in trace.requests}, _config(null_url, 2))
    assert all(r.ok for r in res.results), res.warnings
    check, lags = res.summary.selfcheck, {r.request_id: r.lag for r in res.results}
    early = {r.request_id for r in res.results if r.lag < -EARLY_LIMIT_S}
    mine = {r.request_id for r in res.results if r.worker == EARLY_WORKER}
    print(f"planted: schedule lag min {check.schedule_lag_s.min * 1e3:.1f} ms, "
          f"{check.early_sends} of {len(lags)} early")  # fmt: skip
    # its first turns at least (a later turn goes early too when its previous one ended before
    # it was due), and none of the other worker's
    assert {i for i in mine if i.endswith("t0")} <= early <= mine, (early, lags)
    assert -EARLY_S - 0.01 <= check.schedule_lag_s.min < -EARLY_LIMIT_S, check
    assert check.early_sends == len(early) and check.client_bound, check
    assert any("sent early" in r for r in check.reasons), check.reasons


def test_a_failing_worker_is_one_error_naming_it_not_a_hang(null_url):
    from sglang_mx.bench.load.limits import BenchError
    from sglang_mx.bench.load.loadgen import spread

    jobs = _jobs([("a", 0.0, None), ("b", 0.1, "gone")])  # b waits for a turn nobody sends
    with pytest.raises(BenchError, match=r"load worker 1 failed: KeyError: 'gone'"):
        spread(_config(null_url, 2), "m", jobs, None, 2)


def test_calibrate_climbs_at_each_process_count(null_url, tmp_path):
    out = tmp_path / "calibration.json"
    cli = str(Path(sys.executable).parent / "sglang-mx")  # the installed console script
    cmd = [cli, "bench", "calibrate", "--url", null_url,
           "--processes", "1,2", "--start-rate", "20", "--max-rate", "40", "--step-s", "1",
           "--output-len", "4", "-o", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())
    assert set(data["by_processes"]) == {"1", "2"}
    assert {s["processes"] for s in data["steps_by_processes"]["2"]} == {2}
    assert "ceiling at 2 process(es)" in proc.stdout
    bad = subprocess.run(cmd[:-2] + ["--processes", "2,4", "-o", str(out)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "1 included" in bad.stderr
    nowhere = str(tmp_path / "no-such-tokenizer")  # SGLang's client would look it up on a hub
    bad = subprocess.run(cmd + ["--with-sglang", nowhere], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "not a local tokenizer directory" in bad.stderr, bad.stderr


def _verify(url: str, claim: str, tmp_path, out, *extra: str) -> tuple[int, dict]:
    import argparse

    from sglang_mx.bench.cli import verbs as bench_cli

    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "verify", claim, "--url", url, "--tokenizer", str(tmp_path),
                              "--hardware", "CPU", "--gpus", "1", "--warmup", "0",
                              "--no-progress", "-o", str(out), *extra])  # fmt: skip
    status = args.func(args)
    return status, json.loads((out / "result.json").read_text())


def _calibration(tmp_path, name: str, req_s: float, tok_s: float) -> str:
    path = tmp_path / name
    one = {"req_s": req_s, "tok_s": tok_s}
    path.write_text(json.dumps({"ceiling": one, "by_processes": {"1": one}}))
    return str(path)


def test_verify_sizes_its_load_processes_from_the_calibration(tmp_path, tiny_tokenizer):
    """A calibration whose one-process ceiling is far below the claim's load: verify spreads the
    run over as many processes as it needs, at most this box's cores, says the box falls short,
    and the self-check calls the run client-bound (inconclusive, saying what would decide). With
    room to spare (--processes 2 given), the merged run of two processes is judged."""
    import os

    from bench_processes import fake_server_process
    from claim_files import write_claim

    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    # 160 requests (about 2 s a repeat): the event-loop probe's p99 is then a tail of some 800
    # wake-ups, not the largest of 90, which one 50 ms preemption by a test beside it decided
    workload = {"input_len": 64, "output_len": 8, "hit_rate": 0.5, "prefix_groups": 2,
                "num_requests": 160, "arrival": "concurrency", "concurrency": 4}  # fmt: skip
    claim = write_claim(tmp_path, 1.0, hardware={"name": "CPU", "gpus": 1}, workload=workload)
    short = _calibration(tmp_path, "short.json", 0.01, 0.05)  # 1 tok/s needs 25 processes
    roomy = _calibration(tmp_path, "roomy.json", 10_000.0, 1e6)
    with fake_server_process() as url:
        status, starved = _verify(url, claim, tmp_path, tmp_path / "starved", "--repeats", "1",
                                  "--calibration", short)  # fmt: skip
        ok, spread = _verify(url, claim, tmp_path, tmp_path / "spread", "--repeats", "3",
                             "--calibration", roomy, "--processes", "2")  # fmt: skip
    load = starved["load_generator"]
    assert load["needed"] == 25 and load["processes"] == min(25, os.cpu_count())
    assert "needs 25 load processes" in load["warning"]
    assert starved["sweep"]["points"][0]["summary"]["selfcheck"]["processes"] == load["processes"]
    assert (status, starved["verdict"]["verdict"]) == (1, "inconclusive")
    assert any("client-bound" in r for r in starved["verdict"]["reasons"])
    assert spread["load_generator"]["needed"] == 1
    assert spread["load_generator"]["chosen_by"] == "--processes"
    for point in spread["sweep"]["points"]:
        assert point["summary"]["selfcheck"]["processes"] == 2
        # no request goes before it was due, the first of any worker's included (a closed loop
        # once sent before the shared t0: lag p50 -0.149 s); the bound is the clocks'
        # (client_check.EARLY_LIMIT_S), and the minimum, not the median, is held to it
        check = point["summary"]["selfcheck"]
        assert check["schedule_lag_s"]["min"] >= -EARLY_LIMIT_S, check
        assert check["early_sends"] == 0, check
        assert not point["summary"]["selfcheck"]["client_bound"], point["summary"]["selfcheck"]
    assert (ok, spread["verdict"]["verdict"]) == (0, "reproduced"), spread["verdict"]["reasons"]
