"""The request guards as pure functions: every field that carries a token id, a length, a count
or an index is refused outside the model's limits, with the field and the limit named, and
ordinary requests pass untouched."""

from __future__ import annotations

from array import array
from types import SimpleNamespace

import pytest
from sglang_mx.guards.checks import (
    GuardViolation,
    ModelLimits,
    check_generate,
    check_generate_shape,
)

LIMITS = ModelLimits(vocab_size=2048, context_length=8192)


def _req(**kw):
    fields = {
        "sampling_params": {"max_new_tokens": 4},
        "top_logprobs_num": 0,
        "logprob_start_len": -1,
        "token_ids_logprob": None,
        "routed_experts_start_len": 0,
        "max_thinking_tokens": None,
        "priority": None,
        "bootstrap_room": None,
        "bootstrap_port": None,
    }
    fields.update(kw)
    return SimpleNamespace(**fields)


def _sp(**kw):
    return {"max_new_tokens": 4, **kw}


REFUSED = [
    ("input_ids", _req(), [1, 2048], "outside the vocabulary [0, 2048)"),
    ("input_ids", _req(), [-1, 5], "token id -1"),
    ("input_ids", _req(), [1, 10**30], "outside the vocabulary"),
    ("input_ids", _req(), [1, "2"], "integer token ids"),
    ("input_ids", _req(), [1, True], "integer token ids"),
    ("input_ids", _req(), 5, "must be a list"),
    ("input_ids", _req(), array("q", [1, 4096]), "token id 4096"),
    ("input_ids", _req(), [[1, 2]], "integer token ids"),
    ("input_ids", _req(), [], "must not be empty"),
    ("input_ids", _req(contains_mm_input=lambda: False), [], "must not be empty"),
    ("top_logprobs_num", _req(top_logprobs_num=2049), [1], "outside [0, 2048]"),
    ("top_logprobs_num", _req(top_logprobs_num=-1), [1], "outside [0, 2048]"),
    ("logprob_start_len", _req(logprob_start_len=-5), [1, 2], "outside [-1, 2]"),
    ("logprob_start_len", _req(logprob_start_len=3), [1, 2], "outside [-1, 2]"),
    ("token_ids_logprob", _req(token_ids_logprob=[1, 4096]), [1], "token id 4096"),
    ("sampling_params.stop_token_ids", _req(sampling_params=_sp(stop_token_ids=[2048])), [1],
     "outside the vocabulary"),
    ("sampling_params.stop_token_ids", _req(sampling_params=_sp(stop_token_ids=[-3])), [1],
     "token id -3"),
    ("sampling_params.logit_bias", _req(sampling_params=_sp(logit_bias={"5000": 1.0})), [1],
     "key 5000"),
    ("sampling_params.logit_bias", _req(sampling_params=_sp(logit_bias={"x": 1.0})), [1],
     "not an integer token id"),
    ("sampling_params.top_k", _req(sampling_params=_sp(top_k=2**31)), [1],
     "outside [1, 1073741824]"),
    ("sampling_params.top_k", _req(sampling_params=_sp(top_k=0)), [1], "outside [1, 1073741824]"),
    ("sampling_params.n", _req(sampling_params=_sp(n=10**6)), [1], "outside [1, 128]"),
    ("sampling_params.max_new_tokens", _req(sampling_params=_sp(max_new_tokens=2**63)), [1],
     "outside [0, 8192]"),
    ("sampling_params.min_new_tokens", _req(sampling_params=_sp(min_new_tokens=-1)), [1],
     "outside [0, 8192]"),
    ("sampling_params.stream_interval", _req(sampling_params=_sp(stream_interval=0)), [1],
     "outside [1, 8192]"),
    ("sampling_params", _req(sampling_params=[1, 2]), [1], "must be an object"),
    ("routed_experts_start_len", _req(routed_experts_start_len=10**9), [1], "outside [0, 8192]"),
    ("priority", _req(priority=2**70), [1], "outside"),
    ("session_params", _req(session_params={"x": 1}), [1], "unknown key 'x'"),
    ("session_params", _req(session_params=[1]), [1], "must be an object"),
    ("session_params.offset", _req(session_params={"offset": 2**63}), [1], "outside [0, 8192]"),
    ("session_params.id", _req(session_params={"id": 5}), [1], "must be a str"),
    ("bootstrap_room", _req(bootstrap_room=-(2**64)), [1], "outside"),
]  # fmt: skip


@pytest.mark.parametrize(("field", "req", "ids", "says"), REFUSED)
def test_refused_with_field_and_limit(field, req, ids, says):
    with pytest.raises(GuardViolation) as e:
        check_generate(req, ids, LIMITS)
    assert e.value.field == field
    assert str(e.value).startswith(f"`{field}`")
    assert says in str(e.value)
    assert isinstance(e.value, ValueError) and e.value.status_code == 400


@pytest.mark.parametrize(
    ("req", "ids"),
    [
        (_req(), [0, 1, 2047]),
        (_req(contains_mm_input=lambda: True), []),  # the image processor fills the ids
        (_req(), None),  # input_embeds requests carry no ids
        (_req(top_logprobs_num=2048, logprob_start_len=2), [1, 2]),
        (_req(sampling_params=_sp(top_k=-1, n=128, stop_token_ids=[0, 2047, None])), [1]),
        (_req(sampling_params=_sp(logit_bias={"0": -100, 2047: 100}, top_k=5000)), [1]),
        (_req(token_ids_logprob=[0, 2047], priority=-5, bootstrap_port=8998), [1]),
        (_req(sampling_params=None), [1]),
        (_req(), array("q", [0, 5, 2047])),  # ids a multimodal processor hands back
        (_req(session_params={"id": "s", "rid": None, "offset": 3, "replace": True}), [1]),
    ],
)
def test_ordinary_requests_pass(req, ids):
    check_generate(req, ids, LIMITS)


def test_embedding_request_without_generate_fields():
    # EmbeddingReqInput has no logprob fields: only the ids are checked.
    check_generate(SimpleNamespace(), [0, 5], LIMITS)
    with pytest.raises(GuardViolation):
        check_generate(SimpleNamespace(), [5, 2048], LIMITS)


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"sampling_params": []}, "sampling_params", "non-empty list"),
        ({"sampling_params": [1]}, "sampling_params", "list of objects"),
        ({"sampling_params": {"n": "5"}}, "sampling_params.n", "integer in [1, 128]"),
        ({"sampling_params": [{"n": 2}, {"n": 10**9}]}, "sampling_params.n", "outside [1, 128]"),
        ({"input_embeds": []}, "input_embeds", "non-empty list"),
        ({"input_embeds": [[]]}, "input_embeds", "non-empty list"),
    ],
)
def test_generate_shape_refused(fields, field, says):
    obj = SimpleNamespace(**{"sampling_params": None, "text": None, "input_ids": None,
                             "input_embeds": None, **fields})  # fmt: skip
    with pytest.raises(GuardViolation) as e:
        check_generate_shape(obj)
    assert e.value.field == field and says in str(e.value)


def test_generate_shape_passes_ordinary_and_session_continuations():
    for fields in ({"sampling_params": {"n": 2}}, {"sampling_params": [{}, None]},
                   {"input_embeds": [[0.1, 0.2]]}, {"sampling_params": None}):  # fmt: skip
        obj = SimpleNamespace(**{"sampling_params": None, "text": None, "input_ids": None,
                                 "input_embeds": None, **fields})  # fmt: skip
        check_generate_shape(obj)
    check_generate(_req(session_params={"id": "s1"}), [], LIMITS)  # history supplies the prompt
