"""`bench verify` against the live CPU server, on a claim about this CPU box (issue 45, item 2;
issue 54, item 1), judged against figures that do not come from verify itself:

- SGLang's own benchmark client (`python -m sglang.benchmark.serving`) on the claim's lengths and
  closed loop, against the same server just before, sets the claims: the honest one at HONEST x
  its output tok/s is not refuted; the near one at NEAR x it is not refuted through a proxy that
  tells no lie (the relay costs little), and is refuted through a proxy that slows each stream;
- the server's own e2e latency histogram over the very requests of the honest run bounds what
  verify may measure (SERVER_LOW below): measured at the same moment, so it holds on a box whose
  speed swings between two runs (SGLang's client measured 13-36 tok/s here within 10 minutes
  at a load average of 10-23, 2026-12-06); a verify that measures 2x low falls out of it
  (test_a_verify_that_measures_half_is_caught runs that plant).

Lying proxies in front of the same server (sglang_mx_lab.testing.liar_proxy) are refuted, each
for its own reason: slower streams against the near claim (the interval), inflated usage (the
token audit against the stream and SGLang's own counters), failed requests. Through the CLI, exit
codes checked. (Until 2026-12-06 the honest claim was 1.0 tok/s against a server measured at
70-112, and the near claim 0.8x verify's own figure: a verify that measured 2x low reproduced
both.)

HONEST = 0.6: reproduced needs the 95% interval over 3 repeats (t = 4.3) to clear 0.9 x the
claim, which on a loaded box it may not (the verdict is then inconclusive, and says so); refuted
needs the interval's top under it, which at 0.6x of SGLang's figure only a box ~2x slower than a
minute before would give."""

from __future__ import annotations

import argparse
import json
import subprocess

import pytest
from claim_files import write_claim
from sglang_mx.bench.cli import verbs as bench_cli
from sglang_mx_lab.testing.liar_proxy import Lies, liar_proxy
from verdict_retry import client_bound_only, until_decided

pytestmark = pytest.mark.server
HONEST, NEAR = 0.6, 0.8  # fractions of SGLang's client's output tok/s (module docstring)
SGLANG_REQUESTS = 12  # twice the claim's 6: one run of SGLang's client, its figure less noisy
REQUESTS, SLOTS, OUT = 6, 2, 16  # the claim's closed loop
# The server's own bound on a closed loop's throughput, from its e2e latency histogram over the
# very requests verify sent (Little's law: SLOTS requests in flight at most, each at least as
# long as the server timed it, so output tok/s <= SLOTS x OUT / mean server e2e). It is an upper
# bound, and verify's figure must come within SERVER_LOW of it: what lies between is the client's
# side of each request (HTTP, SSE parsing) and the loop's tail.
SERVER_LOW = 0.7


def _claim(tmp_path, value: float, hit_rate: float = 0.5, **sections) -> str:
    """A claim about this CPU box: 6 requests of 64 tokens in, 16 out, two at a time."""
    workload = {"input_len": 64, "output_len": OUT, "hit_rate": hit_rate, "prefix_groups": 2,
                "num_requests": REQUESTS, "arrival": "concurrency",
                "concurrency": SLOTS}  # fmt: skip
    return write_claim(tmp_path, value, hardware={"name": "CPU", "gpus": 1}, workload=workload,
                       slo={"ttft_s": 60.0}, **sections)  # fmt: skip


def sglang_output_tok_s(url: str, tokenizer: str, workdir) -> float:
    """SGLang's own client on the claim's lengths (64 in, 16 out) and closed loop of 2: its
    output tok/s (no prefix sharing: the claim's 50% hit only makes our run's prefill cheaper)."""
    from sglang_mx.bench.load.prompts import SegmentTokens, load_tokenizer
    from sglang_mx.bench.load.sglang_bench import (
        read_sglang_result,
        sglang_bench_command,
        sglang_env,
        write_dataset,
    )

    workdir.mkdir(parents=True, exist_ok=True)
    data = write_dataset(SegmentTokens(load_tokenizer(tokenizer)), workdir / "prompts.json",
                         SGLANG_REQUESTS)  # fmt: skip
    out = workdir / "sglang.jsonl"
    cmd = sglang_bench_command(url, tokenizer, data, 64, 16, SGLANG_REQUESTS, out,
                               concurrency=2)  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, env=sglang_env(), cwd=workdir,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    got = read_sglang_result(out)
    assert got["completed"] == SGLANG_REQUESTS and got["output_tokens"] == 16 * SGLANG_REQUESTS
    return got["output_tok_s"]


def server_e2e(url: str) -> tuple[float, float]:
    """(sum, count) of SGLang's `sglang:e2e_request_latency_seconds` histogram, read from
    /metrics here (not through bench's scraper, which is under test)."""
    import httpx

    text = httpx.get(f"{url}/metrics", timeout=30).text
    got = {"_sum": 0.0, "_count": 0.0}
    for line in text.splitlines():
        for tail in got:
            if line.startswith("sglang:e2e_request_latency_seconds" + tail):
                got[tail] += float(line.rsplit(" ", 1)[1])
    return got["_sum"], got["_count"]


def _verify(url: str, claim: str, tokenizer: str, out, warmup: int = 1) -> tuple[int, dict]:
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "verify", claim, "--url", url, "--tokenizer", tokenizer,
                              "--hardware", "CPU", "--gpus", "1", "--repeats", "3",
                              "--warmup", str(warmup), "--no-progress",
                              "-o", str(out)])  # fmt: skip
    status = args.func(args)
    return status, json.loads((out / "verdict.json").read_text())


def _verify_decided(url: str, claim: str, tokenizer: str, out, tries: int = 3):
    """_verify, rerun by verdict_retry.until_decided while only a starved client left it open."""
    return until_decided(lambda where: _verify(url, claim, tokenizer, where), out, tries)


def half_speed_clock(monkeypatch) -> None:
    """The plant: the clock verify times requests by (time.perf_counter, read by the load
    generator, each stream and the run's t0) advances 2 s for every real second, so every
    duration it measures is twice the truth and its tok/s half. The liar proxies and SGLang's
    client run in processes of their own and keep the true clock."""
    import time

    real = time.perf_counter
    base = real()
    monkeypatch.setattr(time, "perf_counter", lambda: base + 2.0 * (real() - base))


def honest_and_near(url: str, tokenizer: str, ref: float, tmp_path, tries: int = 3):
    """The honest claim (HONEST x SGLang's client figure `ref`) run straight at the server and
    the near one (NEAR x ref) through a proxy that tells no lie, each judged as the module
    docstring says. Returns the figures, the checks that failed (empty when verify is honest)
    and the near run's verdict."""
    # the honest run: no prefix sharing and no warm-up, so the server's window holds only the
    # repeats' requests. Run again (bound read afresh) while it falls under the bound and the
    # verdict names a starved client as the only cause: what lies between the bound and verify's
    # figure is the client's side, and a client measured starved is what the verdict asks to
    # rerun (CI 2026-12-07: ratio 0.683 with event-loop lag p99 121 and 174 ms in two repeats)
    for attempt in range(1, tries + 1):
        e2e_sum, e2e_n = server_e2e(url)
        _, honest = _verify(url, _claim(tmp_path, HONEST * ref, hit_rate=0.0), tokenizer,
                            tmp_path / f"honest-{attempt}", warmup=0)  # fmt: skip
        after_sum, after_n = server_e2e(url)
        assert after_n - e2e_n == 3 * REQUESTS, (e2e_n, after_n)
        bound = SLOTS * OUT / ((after_sum - e2e_sum) / (after_n - e2e_n))
        values = honest["values"]  # equal tokens per repeat: their harmonic mean is tokens / time
        overall = len(values) / sum(1 / v for v in values)
        if overall >= SERVER_LOW * bound or not client_bound_only(honest):
            break
    near = _claim(tmp_path, NEAR * ref)
    with liar_proxy(url, Lies()) as relay:  # a proxy that tells no lie
        _, relayed, _ = _verify_decided(relay, near, tokenizer, tmp_path / "relayed", tries)
    again = ""
    if relayed["verdict"] == "not reproduced" and tries > 1:
        # refuted against a reference taken minutes before: the box may have slowed since
        # (the suite here, 2026-12-07: SGLang's client 123.7 tok/s at the module's start, relay 63.8
        # later, verify straight at the server 115.9 between). SGLang's client again, now, sets
        # the near claim for one more relayed run: judged against the same moment, as the bound
        ref_now = sglang_output_tok_s(url, tokenizer, tmp_path / "sglang-again")
        again = (f"; refuted at {relayed['measured']:.4g} against {NEAR * ref:.4g}, SGLang's "
                 f"client now {ref_now:.4g}, relayed again")  # fmt: skip
        with liar_proxy(url, Lies()) as relay:
            _, relayed, _ = _verify_decided(relay, _claim(tmp_path, NEAR * ref_now), tokenizer,
                                            tmp_path / "relayed-again", tries)  # fmt: skip
    figures = (f"SGLang's client {ref:.4g} tok/s; verify {honest['measured']:.4g} "
               f"({honest['verdict']}; repeats "
               f"{', '.join(f'{v:.4g}' for v in values)}, overall {overall:.4g}); the server's "
               f"bound {bound:.4g}, ratio {overall / bound:.3f}; through the honest proxy "
               f"{relayed['measured']:.4g} ({relayed['verdict']}){again}")  # fmt: skip
    failed = []
    if not SERVER_LOW * bound <= overall <= bound:
        failed.append(f"verify {overall / bound:.3f} of the server's bound, out of "
                      f"[{SERVER_LOW}, 1]")  # fmt: skip
    for name, verdict in (("honest", honest), ("near", relayed)):
        if verdict["verdict"] == "not reproduced":
            failed.append(f"the {name} claim refuted: {verdict['reasons']}")
    return figures, failed, relayed


@pytest.fixture(scope="module")
def sglang_ref(live_server, bundled_tokenizer_dir, tmp_path_factory) -> float:
    """SGLang's client's output tok/s on the claim's loop, measured once for the module, just
    before its first test (the plant's check below does not lean on it: the server's bound is
    read at the same moment as the run it bounds)."""
    return sglang_output_tok_s(live_server, bundled_tokenizer_dir,
                               tmp_path_factory.mktemp("sglang"))  # fmt: skip


def test_honest_server_reproduces_and_each_liar_is_refuted(
    live_server, bundled_tokenizer_dir, sglang_ref, tmp_path
):
    ref = sglang_ref
    figures, failed, relayed = honest_and_near(live_server, bundled_tokenizer_dir, ref, tmp_path)
    print("\n" + figures)
    assert not failed, (figures, failed)
    near = _claim(tmp_path, NEAR * ref)
    # the slow liar holds each event so a request takes ~3x what it took SGLang's client (at
    # its figure, SLOTS x OUT / ref seconds): on a box that slows down between the two runs a
    # fixed hold (0.1 s) shrank next to the request and passed the near claim (load 16 on the
    # 2 cores, 2026-12-06: 15.1 tok/s against a near claim of 10.6)
    hold = 2 * SLOTS / ref
    cases = [
        (Lies(delay_s=hold), near, "is not at least"),
        (Lies(inflate=3), _claim(tmp_path, 1.0), "token audit failed"),
        (Lies(fail_every=4), _claim(tmp_path, 1.0), "requests failed"),
    ]
    written = []
    for i, (lies, claim, reason) in enumerate(cases):
        with liar_proxy(live_server, lies) as url:
            status, v, where = _verify_decided(url, claim, bundled_tokenizer_dir,
                                               tmp_path / f"liar-{i}")  # fmt: skip
        assert (status, v["verdict"]) == (1, "not reproduced"), (lies, v["reasons"])
        assert any(reason in r for r in v["reasons"]), (lies, v["reasons"])
        written.append(where)
    slow = json.loads((written[0] / "verdict.json").read_text())
    assert slow["measured"] < 0.5 * ref, (slow["measured"], figures)
    print(f"through the honest proxy {relayed['measured']:.4g} ({relayed['verdict']}); slow "
          f"liar {slow['measured']:.4g} (held {hold * 1e3:.0f} ms an event)")  # fmt: skip


def test_a_verify_that_measures_half_is_caught(
    live_server, bundled_tokenizer_dir, sglang_ref, tmp_path, monkeypatch
):
    """The plant the module docstring names: verify's clock at half speed (half_speed_clock),
    so it measures the honest server 2x low. The server's own bound, read over the very same
    requests, puts it out of [SERVER_LOW, 1], whatever the box's speed did since SGLang's client
    ran (2026-12-06, three runs: ratio 0.439-0.478 planted, 0.901-0.958 unplanted). The claims
    alone need not catch it: the near claim was refuted in two (42.2 and 33.3 tok/s against 58.4
    and 54.6) and inconclusive in the third, where SGLang's client had run at a slow moment
    (39.5 against 33.1); the honest one was never refuted. Costs one honest and one near run,
    about 12 s."""
    half_speed_clock(monkeypatch)
    figures, failed, _ = honest_and_near(live_server, bundled_tokenizer_dir, sglang_ref, tmp_path,
                                         tries=1)  # fmt: skip
    print("\nplanted: " + figures)
    assert any("of the server's bound" in f for f in failed), (figures, failed)


def test_a_draft_claimed_on_a_server_without_one_is_refuted(
    live_server, bundled_tokenizer_dir, tmp_path
):
    """The suite's server runs no draft (no --speculative-algorithm): a claim that states an
    EAGLE accept length of 2.0 is refuted by the acceptance gate, from SGLang's own counters
    (no verify step ran), though its figure is far below what the server does."""
    spec = {"algorithm": "EAGLE", "accept_length": 2.0, "simulated": False, "source": "test"}
    claim = _claim(tmp_path, 1.0, speculative=spec)
    status, v = _verify(live_server, claim, bundled_tokenizer_dir, tmp_path / "no-draft")
    assert (status, v["verdict"]) == (1, "not reproduced"), v["reasons"]
    assert any("the draft is off" in r for r in v["reasons"]), v["reasons"]
    assert v["acceptance"]["claimed"] == 2.0
