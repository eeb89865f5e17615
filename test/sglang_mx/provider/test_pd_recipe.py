"""The 2x8 MI355X 1P1D recipe's flags (python/sglang_mx/recipes, `mi355x-1p1d`) on the CPU PD
topology, each role scaled to one CPU rank: what a CPU can run of it (FP8 KV cache, MTP as
EAGLE 1/1/2 on both sides, HiCache on the prefill as the recipe has it, its batch sizes,
parsers) moves through Mooncake and comes
back greedy-equal to a plain server with the decode role's flags. Every dropped flag is named
with its reason; any other flag the recipe gains reaches the CPU run as it is."""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack

import httpx
import pytest
from provider_support import pd_router_process
from sglang_mx.recipes import pd as pd_recipes

pytestmark = pytest.mark.server

RECIPE = "mi355x-1p1d"
# flag -> why the CPU run leaves it out (a value-taking flag drops its value too)
DROPPED = {
    "--tp-size": "one CPU rank per side (the ranks a GPU node spreads over)",
    "--ep-size": "one CPU rank per side",
    "--dp-size": "one CPU rank per side: DP attention needs a rank per DP group",
    "--enable-dp-attention": "one CPU rank per side",
    "--moe-dense-tp-size": "one CPU rank per side",
    "--enable-dp-lm-head": "one CPU rank per side",
    "--mem-fraction-static": "a GPU memory fraction",
    "--chunked-prefill-size": "sized for a GPU: SGLang reserves activation memory for it and the "
    "derived --mem-fraction-static goes negative on this box (32768: -1.07)",
    "--disable-custom-all-reduce": "no all-reduce at one rank",
    "--disaggregation-mode": "set per side by sglang_mx_lab.testing.pd_servers",
    "--disaggregation-transfer-backend": "mooncake over TCP, set by testing.pd_servers",
    "--disaggregation-bootstrap-port": "a free port, set by sglang_mx_lab.testing.pd_servers",
    "--disaggregation-ib-device": "no RDMA device",
}


def cpu_role_args(role: str) -> list[str]:
    return pd_recipes.without(tuple(pd_recipes.role_args(RECIPE, role, "mooncake")), DROPPED)


def test_the_cpu_run_keeps_the_recipes_kv_and_mtp_flags():
    for role in ("prefill", "decode"):
        args = cpu_role_args(role)
        assert args[args.index("--kv-cache-dtype") + 1] == "fp8_e4m3"
        assert args[args.index("--speculative-algorithm") + 1] == "EAGLE"
        assert not set(DROPPED) & set(args)
    # HiCache on the prefill only, as the recipe (and InferenceX) runs it (seam/hicache_cpu.py).
    assert "--enable-hierarchical-cache" in cpu_role_args("prefill")
    assert "--enable-hierarchical-cache" not in cpu_role_args("decode")


@pytest.fixture(scope="module")
def topology():
    from sglang_mx_lab.testing.pd_servers import start_pd_sides
    from sglang_mx_lab.testing.server import default_serve_args, spawn_server, wait_ready

    model, _ = default_serve_args()
    with ExitStack() as stack:
        t0 = time.monotonic()
        sides = start_pd_sides(
            model, prefill_extra=cpu_role_args("prefill"), decode_extra=cpu_role_args("decode")
        )
        stack.callback(sides.close)
        plain = spawn_server(model, cpu_role_args("decode"))
        stack.callback(plain.stop, wait=False)
        wait_ready(plain, 500)
        sides.wait_serving(500 - (time.monotonic() - t0))
        router = stack.enter_context(
            pd_router_process(
                [(sides.prefill.base_url, sides.bootstrap_port)], [sides.decode.base_url]
            )  # fmt: skip
        )
        yield {"router": router, "plain": plain.base_url}


@pytest.mark.parametrize("pairs", [1, 40])
def test_recipe_flags_serve_greedy_equal_across_pd(topology, pairs):
    words = " ".join(f"mill{i % 37} river{i % 11}" for i in range(pairs))
    body = {"text": f"[{uuid.uuid4().hex}] {words}",
            "sampling_params": {"max_new_tokens": 16, "temperature": 0}}  # fmt: skip
    out = {}
    for name in ("router", "plain"):
        r = httpx.post(topology[name] + "/generate", json=body, timeout=300)
        assert r.status_code == 200, r.text
        out[name] = r.json()
    assert out["router"]["output_ids"] == out["plain"]["output_ids"]
    assert out["router"]["meta_info"]["prompt_tokens"] == out["plain"]["meta_info"]["prompt_tokens"]
    # The draft ran on the decode side: SGLang counts its verify steps per request.
    assert out["router"]["meta_info"].get("spec_verify_ct", 0) > 0
