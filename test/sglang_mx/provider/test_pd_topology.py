"""provider -> smg (SGLang Model Gateway 1.13, PD mode) -> one prefill + one decode SGLang
server, both on the default GLM-5 model (mx_dsa, MLA latent pages + FP8 index-key pages), KV moved
by Mooncake's transfer engine over TCP on loopback; one plain server with the same arguments is
the reference. Prompts go to the gateway as text (its OpenAI routes refuse token ids).

Greedy tokens equal the plain server's, through the router and through the provider; the
decode server's sparse attention picks the same top-k as the plain server's at every decode
position past index_topk (so the index keys arrived, not only the latent KV); cached tokens and
the bill are the plain server's; and a side killed under streaming load leaves every request
completed or failed fast with an OpenAI-shaped error, the ledger whole, and the supervisor and
router serving again. The same topology by hand: scripts/launch/pd_topology.sh; the fault
counts recorded in docs: scripts/record_pd_faults.py."""

from __future__ import annotations

import time
from contextlib import ExitStack

import httpx
import pytest
import torch
from provider_support import (
    MODEL_ID,
    expected_cost,
    pd_router_process,
    price_served_model,
    provider_process,
)
from sglang_mx.attention.dsa.indexer import TOPK_DUMP_ENV
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger
from sglang_mx_lab.testing.pd_faults import fault_run, unique_prompt

pytestmark = pytest.mark.server

REQUEST_BOUND_S = 300  # a request outliving this counts as hung
STALL_S = 30  # so does one that gets no new token for this long
BACK_WITHIN_S = 300  # the killed side restarted and the router routing again
INDEX_TOPK = 128  # the tiny GLM-5's index_topk (config.json)


@pytest.fixture(scope="module")
def pd(tmp_path_factory):
    from sglang_mx_lab.testing.pd_servers import start_pd_sides
    from sglang_mx_lab.testing.server import default_serve_args, spawn_server, wait_ready

    tmp = tmp_path_factory.mktemp("pd")
    dumps = {"decode": tmp / "decode-topk", "plain": tmp / "plain-topk"}
    for d in dumps.values():
        d.mkdir()
    model, args = default_serve_args()
    with ExitStack() as stack:
        t0 = time.monotonic()
        sides = start_pd_sides(model, args, decode_env={TOPK_DUMP_ENV: str(dumps["decode"])})
        stack.callback(sides.close)
        plain = spawn_server(model, args, env={TOPK_DUMP_ENV: str(dumps["plain"])})
        stack.callback(plain.stop, wait=False)
        wait_ready(plain, 400)
        sides.wait_serving(400 - (time.monotonic() - t0))
        prefill, decode = sides.prefill.base_url, sides.decode.base_url
        router = stack.enter_context(pd_router_process([(prefill, sides.bootstrap_port)], [decode]))
        print(f"PD topology serving after {time.monotonic() - t0:.0f} s")
        pricing = price_served_model(plain.base_url, tmp)[1]
        db = tmp / "provider.sqlite"
        _, key = KeyStore(db).create("pd-test")
        prov = stack.enter_context(provider_process(router, pricing, db, "--default-rpm", "100000"))
        yield {"url": prov.url, "router": router, "plain": plain.base_url, "sides": sides,
               "db": db, "key": key, "dumps": dumps}  # fmt: skip


_prompt = unique_prompt  # the model serves 512 tokens


def _generate(url: str, text: str, n: int) -> dict:
    body = {"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0}}
    r = httpx.post(url + "/generate", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("pairs", [1, 8, 40])
def test_greedy_tokens_equal_the_plain_server(pd, pairs) -> None:
    text = _prompt(pairs)
    through_pd = _generate(pd["router"], text, 16)
    plain = _generate(pd["plain"], text, 16)
    assert through_pd["meta_info"]["prompt_tokens"] == plain["meta_info"]["prompt_tokens"]
    assert through_pd["output_ids"] == plain["output_ids"]


def _complete(url: str, text: str, key: str | None = None) -> tuple[dict, str | None]:
    body = {"model": MODEL_ID if key else "default", "prompt": text, "max_tokens": 12,
            "temperature": 0}  # fmt: skip
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(url + "/v1/completions", json=body, headers=headers, timeout=300)
    assert r.status_code == 200, r.text
    return r.json(), r.headers.get("x-request-id")


def test_provider_text_cached_tokens_and_bill_are_the_plain_servers(pd) -> None:
    text = _prompt(20)  # > one 64-token page, so its repeat reuses cached pages
    via = [_complete(pd["url"], text, pd["key"]) for _ in range(2)]
    plain = [_complete(pd["plain"], text) for _ in range(2)]
    for (v, rid), (p, _) in zip(via, plain, strict=True):
        assert v["choices"][0]["text"] == p["choices"][0]["text"]
        assert v["usage"]["prompt_tokens"] == p["usage"]["prompt_tokens"]
        assert v["usage"]["completion_tokens"] == p["usage"]["completion_tokens"]
        cached = (v["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        plain_cached = (p["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        assert cached == plain_cached
        row = Ledger(pd["db"]).get(rid)
        assert row.cached_tokens == cached and row.status == "ok"
        u = v["usage"]
        assert row.cost == pytest.approx(
            expected_cost(u["prompt_tokens"], u["completion_tokens"], cached)
        )
    assert (via[1][0]["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0) >= 64


def _rows(folder) -> dict[tuple[int, int], frozenset[int]]:
    """(layer, position) -> the set of token indices the indexer selected there."""
    out = {}
    for f in sorted(folder.glob("*.pt")):
        rec = torch.load(f)
        for pos, row in zip(rec["positions"].tolist(), rec["topk"], strict=True):
            out[(rec["layer"], pos)] = frozenset(i for i in row.tolist() if i >= 0)
    return out


def test_decode_selects_the_plain_servers_top_k(pd) -> None:
    # The decode side computed none of the prompt (its KV came over the transfer engine), and
    # past index_topk, decode's sparse attention picks its top-k from the index keys the prefill
    # server's pages brought: wrong or missing keys select other tokens.
    for d in pd["dumps"].values():
        for f in d.glob("*.pt"):
            f.unlink()
    text, n = _prompt(40), 8
    through_pd = _generate(pd["router"], text, n)
    plain = _generate(pd["plain"], text, n)
    assert through_pd["output_ids"] == plain["output_ids"]
    prompt_len = plain["meta_info"]["prompt_tokens"]
    assert prompt_len > INDEX_TOPK
    decode_all = _rows(pd["dumps"]["decode"])
    plain_rows = _rows(pd["dumps"]["plain"])
    # The KV crossed: the decode side ran its indexer at no prompt position past index_topk
    # (where it selects; a short health probe's own prefill sits below), where a side that
    # computed the prefill itself runs it at every one, as the plain server did.
    prompt_span = set(range(INDEX_TOPK, prompt_len))
    assert prompt_span <= {pos for _, pos in plain_rows}
    computed = sorted({pos for _, pos in decode_all} & prompt_span)
    assert not computed, f"the decode side computed prompt positions {computed[:5]}..."
    decode_rows = {k: v for k, v in decode_all.items() if k[1] >= prompt_len}
    # The plain server decodes n - 1 steps (the first token comes from its prefill); the decode
    # side runs those and may run one more past the last token (discarded): compare the steps
    # both ran, which must be all of the plain server's.
    plain_positions = {pos for _, pos in plain_rows if pos >= prompt_len}
    positions = {pos for _, pos in decode_rows}
    assert len(plain_positions) == n - 1 and plain_positions <= positions, sorted(positions)
    decode_rows = {k: v for k, v in decode_rows.items() if k[1] in plain_positions}
    # A real choice: not simply the first index_topk tokens (what an all-equal score gives).
    assert any(sel != frozenset(range(INDEX_TOPK)) for sel in decode_rows.values())
    for key, selected in decode_rows.items():
        assert len(selected) == INDEX_TOPK, key
        assert selected == plain_rows[key], f"layer {key[0]} position {key[1]}"


@pytest.mark.parametrize("side", ["decode", "prefill"])
def test_side_killed_under_streaming_load(pd, side) -> None:
    run = fault_run(pd["sides"], side, pd["url"], pd["key"], MODEL_ID, pd["db"],
                    bound_s=REQUEST_BOUND_S, stall_s=STALL_S, back_within_s=BACK_WITHIN_S,
                    log=print)  # fmt: skip
    print(run)
    assert run["decoding_at_kill"] == run["streams"], "the kill did not catch the requests live"
    for phase in ("during", "after"):
        assert run[phase]["hung"] == 0 and run[phase]["broken"] == 0, run
    if side == "decode":  # the streams were decoding there: none can finish
        assert run["during"]["failed"] == run["streams"], run
    assert run["side_restarted"] and run["side_serving_after_s"] is not None, run
    assert run["routed_again_after_s"] is not None, run
    assert not run["ledger_problems"], run
    sup = getattr(pd["sides"], side)
    assert "server exited (signal SIGKILL)" in sup.log_path.read_text(errors="replace")
