"""Frontend-DSL agent programs: hit rate and reuse-vs-no-reuse comparison, trace recording."""

from __future__ import annotations

import pytest
from bench_fake_openai import FakeCache, make_app
from sglang_mx.bench.agents.common import compare_reuse, to_trace
from sglang_mx.bench.agents.multiturn_chat import chat
from sglang_mx.bench.agents.review_forkjoin import review
from sglang_mx.bench.agents.tool_agent import tool_agent
from sglang_mx_lab.testing.inprocess import serve_in_thread

PROGRAMS = {"tool_agent": tool_agent, "review": review, "chat": chat}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_agent_plumbing_on_fake_server(name):
    with serve_in_thread(make_app(FakeCache())) as url:
        res = compare_reuse(PROGRAMS[name], url, sessions=2, warmup=False, max_tokens=4)
    assert res["calls"] >= 6
    # every program re-sends a long shared context, so most prompt tokens must hit
    assert res["hit_rate"] > 0.5
    assert res["no_reuse_hit_rate"] == 0.0
    assert res["prefill_tokens_no_reuse"] > 2 * res["prefill_tokens_reuse"]
    trace = to_trace(res["meter"], lambda t: list(t.encode()), name=name)
    assert len(trace.requests) == res["calls"]
    # the replayed structure keeps the recorded sharing: designed hits ~ measured hits
    assert trace.predicted_hit_rate == pytest.approx(res["hit_rate"], abs=0.05)


@pytest.mark.server
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_agents_against_live_server(live_server, name):
    # one small session each keeps CPU time down; the shared context still dominates prompts
    kwargs = {"max_tokens": 2, "context_chars": 800}
    kwargs |= {"steps": 2} if name == "tool_agent" else {"turns": 3} if name == "chat" else {}
    res = compare_reuse(PROGRAMS[name], live_server, sessions=1, warmup=False, **kwargs)
    assert res["calls"] >= 3
    assert res["hit_rate"] > 0.5, res
    assert res["no_reuse_hit_rate"] < 0.05, res
    assert res["prefill_tokens_no_reuse"] > 2 * res["prefill_tokens_reuse"]
