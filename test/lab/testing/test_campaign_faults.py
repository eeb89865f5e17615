"""The hostile campaign's negative control: its failure detection, shrinking and saving, run
against a fake worker with planted faults (real HTTP on loopback, sglang_mx_lab.testing.fake_worker)
-- a 500, a traceback, a dropped connection, a hang, a worker that stops generating. Each must be
reported as its own failure, shrunk to the one field that triggers it and saved as a case that
replays; a worker without faults must pass the same campaign; the liveness probe must count the
token, not the status."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx
import pytest
from sglang_mx_lab.testing.campaign import (
    Campaign,
    _shrink_candidates,
    for_each_hostile,
    save_regression,
)
from sglang_mx_lab.testing.fake_worker import DEATH, FAULTS, FakeWorker
from sglang_mx_lab.testing.hostile import PROVIDER_ROUTES, HostileRequest, Target, attack
from sglang_mx_lab.testing.liveness import generates

MODEL = "fake-model"
TARGET = Target(MODEL, vocab_size=100, context_length=64)
TIMEOUT_S = 1.0  # the campaign's client timeout: a hang is an answer missing after this long
SEED = 20261201
# What each planted fault must be reported as.
EXPECTED = {
    "http_500": "http_500",
    "traceback": "traceback",
    "drop": "no_answer: RemoteProtocolError: Server disconnected without sending a response.",
    "hang": "no_answer: ReadTimeout: timed out",
    "stop_generating": "worker_death",
}


def _campaign(worker: FakeWorker) -> Campaign:
    return Campaign(worker, TARGET, timeout_s=TIMEOUT_S, settle_s=0.05)


def _completion(trigger: str) -> HostileRequest:
    """A request with the trigger among other fields the shrinker should drop."""
    body = {"model": MODEL, "max_tokens": 2, "temperature": 0, "prompt": "Hello", "seed": 3,
            trigger: {"7": 1}, "top_p": 0.5, "user": "u"}  # fmt: skip
    return HostileRequest("/v1/completions", json.dumps(body))


def _generate(trigger: str) -> HostileRequest:
    sp = {"max_new_tokens": 2, "temperature": 0, trigger: "(", "top_k": 3}
    body = {"text": "Hello", "sampling_params": sp, "rid": 5, "stream": False}
    return HostileRequest("/generate", json.dumps(body))


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("shape", ["completion", "generate"])
def test_fault_is_reported_shrunk_and_saved(fault, shape, tmp_path):
    trigger = "logit_bias" if shape == "completion" else "regex"
    req = _completion(trigger) if shape == "completion" else _generate(trigger)
    saved = []
    with FakeWorker({trigger: fault}) as worker:
        campaign = _campaign(worker)
        campaign.one(req, on_crash=lambda c: saved.append(save_regression(c, tmp_path, MODEL)))
        [crash] = campaign.result.crashes
        assert crash.failure == EXPECTED[fault], crash
        if fault == "stop_generating":
            assert crash.cause == DEATH  # the log's exception line, read after the death
            assert crash.restart_s is not None and crash.restart_s > 0
            assert campaign.result.deaths >= 1
        else:
            assert campaign.result.deaths == 0
        # Shrunk to the trigger plus what keeps a request short; the original is kept.
        body = json.loads(crash.request.body)
        if shape == "completion":
            assert set(body) == {"model", "max_tokens", trigger}, body
        else:
            assert set(body) == {"sampling_params"} and set(body["sampling_params"]) == {
                "max_new_tokens", trigger}, body  # fmt: skip
        assert crash.original == req
        # Saved once, with the model's name as a placeholder, and it replays the failure.
        [path] = saved
        case = json.loads(path.read_text())
        assert case["failure"] == crash.failure and case["cause"] == crash.cause
        assert HostileRequest.from_json(case["original_request"]) == req
        replay = HostileRequest.from_json(case["request"])
        if shape == "completion":
            assert '"{{model}}"' in replay.body and MODEL not in replay.body
            replay = HostileRequest(replay.route, replay.body.replace("{{model}}", MODEL))
        assert replay == crash.request
        worker.wait_healthy(timeout=30)
        with httpx.Client(timeout=TIMEOUT_S) as client:
            again = attack(client, worker.base_url, replay, worker.base_url)
        assert again.failure == crash.failure


def test_known_crash_class_is_not_shrunk_or_saved_again(tmp_path):
    saved = []
    with FakeWorker({"logit_bias": "http_500"}) as worker:
        campaign = _campaign(worker)
        for _ in range(2):
            campaign.one(_completion("logit_bias"), lambda c: saved.append(c))
    first, second = campaign.result.crashes
    assert first.crash_class == second.crash_class and len(campaign.result.classes) == 1
    assert saved == [first] and second.original is None and second.request == _completion(
        "logit_bias")  # fmt: skip


def test_healthy_worker_passes(tmp_path):
    with FakeWorker({}) as worker:
        campaign = _campaign(worker)
        for trigger in ("logit_bias", "regex"):
            campaign.one(_completion(trigger))
            campaign.one(_generate(trigger))
        campaign.run(40, SEED, PROVIDER_ROUTES)
    assert campaign.result.tried == 44 and campaign.result.crashes == []


def test_generated_campaign_finds_each_planted_class(tmp_path):
    """Every generated JSON body carries its route's prompt field: the fake fails each route its
    own way, and the campaign must come back with exactly those two classes, shrunk."""
    saved = []
    with FakeWorker({"prompt": "http_500", "messages": "traceback"}) as worker:
        campaign = _campaign(worker)
        campaign.run(40, SEED, PROVIDER_ROUTES, on_crash=saved.append)
    classes = campaign.result.classes
    assert sorted(c.failure for c in classes.values()) == ["http_500", "traceback"]
    assert len(saved) == 2
    for crash in saved:
        trigger = "prompt" if crash.failure == "http_500" else "messages"
        assert set(json.loads(crash.request.body)) == {"model", "max_tokens", trigger}


@pytest.mark.parametrize("tokens", [0, 2])
def test_liveness_counts_the_token(tokens):
    """A 200 from /generate is not enough: exactly one token must come back."""
    with FakeWorker({}, probe_tokens=tokens) as bad, FakeWorker({}) as good:
        with httpx.Client(timeout=10) as client:
            assert generates(client, good.base_url)
            assert httpx.post(bad.base_url + "/generate", json={}).status_code == 200
            assert not generates(client, bad.base_url)


def test_deep_body_does_not_break_the_shrinker():
    deep = '{"prompt": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert _shrink_candidates(HostileRequest("/v1/completions", deep)) == []


def _timed_server(
    seen: list[HostileRequest], at_most: int, each_s: float
) -> Callable[[HostileRequest], None]:
    """A stand-in target that records each request in `seen`, takes `each_s` over it, and fails
    the run once more than `at_most` arrive (the time budget should have ended it)."""

    def serve(req: HostileRequest) -> None:
        seen.append(req)
        assert len(seen) <= at_most, "the budget did not end the run"
        time.sleep(each_s)

    return serve


def test_time_budget_cuts_the_same_sequence_short():
    # The same seed and the same cap on examples (hypothesis schedules its generation by it);
    # only the time per request differs, as between a fast and a slow machine.
    fast: list[HostileRequest] = []
    # Each request takes at least 10 ms, so a 2 s budget allows at most 200 of them however
    # fast the machine generates (a bare append let a fast CI box reach 1,000 in 5 s).
    fast_server = _timed_server(fast, 200, 0.01)
    sent = for_each_hostile(PROVIDER_ROUTES, TARGET, 10_000, SEED, fast_server, budget_s=2.0)
    assert sent == len(fast) > 5
    slow: list[HostileRequest] = []
    slow_server = _timed_server(slow, 10, 0.2)
    sent = for_each_hostile(PROVIDER_ROUTES, TARGET, 10_000, SEED, slow_server, budget_s=1.0)
    assert 0 < sent == len(slow) <= 5
    assert slow == fast[:sent]
    # A floor: at least min_n requests, however slow each is.
    slow.clear()
    sent = for_each_hostile(
        PROVIDER_ROUTES, TARGET, 10_000, SEED, slow_server, budget_s=0.1, min_n=5
    )
    assert sent == len(slow) == 5 and slow == fast[:5]
