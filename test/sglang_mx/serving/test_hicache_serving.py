"""SGLang's hierarchical cache (HiCache) on the CPU platform through mx_dsa: a prefix evicted from
the device pool to the host pool and loaded back serves what it served from the device.

Three servers of the default tiny GLM-5 (float32 compute, `--enable-hierarchical-cache
--hicache-ratio 2`, a 768-token device pool), one per latent page layout: bf16 rows (direct io,
page-first-direct host layout, write-back), FP8 in plain rows (the layout SGLang picks on HIP
and for raw-layout DSA kernels, selected here by `--dsa-*-backend trtllm`; layer-first host
layout, selective write-through), and FP8 in packed rows (NoPE + scales + bf16 RoPE, SGLang's
choice on a CPU box; SGLang's default kernel io, page-first layout, write-through) with EAGLE
5/1/6 as the recipes run it, whose NextN draft has its own latent and index-key pages in the
same host pools.

Each case (`restore`): a fresh random 260-token prompt is served cold (computed), again (a
device hit on its 256 tokens of full pages), then three other prompts push it out of the
768-token device pool, then it is served again. Asserted on that last request, from SGLang's
own counters: the prefix came from the host tier (`cached_tokens_details` device 0, host 256;
`sglang:load_back_tokens_total{pool="kv"}` up by 256), and the bytes loaded are 256 tokens'
latent rows **and** index-key pages (`sglang:load_back_bytes_total`, which counts the sidecar
pools; the draft's layers too under EAGLE). Its greedy tokens and top-5 log-probs then equal the
device hit's exactly (same arithmetic over the same values; a page restored whole changes
nothing), and the cold recompute's exactly too: the servers prefill in 256-token chunks, so the
cold request runs the same two steps as a cached one (256 tokens, then 4 over the 256 in the
pool). Without the chunking a 260-token prefill sums in another order, and the difference is
heavy-tailed: median 1e-6 nats, but 4 of 180 cases over 1e-4 and one at 2.6e-3 (FP8 rows, where a
rounding flip moves a value by a whole step), so no fixed tolerance held; with it, 0.0 in all 180
(scripts/measure_hicache_spread.py, docs/results/hicache_spread.json). Under EAGLE the accept
length after the restore equals the device hit's (margin 0: the draft is deterministic, so
restored draft pages propose the same drafts).

Planted breaks (hicache_plant/ beside this file; one server serves the honest case and its
plants, switched per request through a file): latent pages restored one page off (`slot`),
index-key pages not restored (`index`), draft pages not restored (`draft`). Each must fail the
same check the honest case passes."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.server

PROMPT, CACHED, NEW, FILLERS = 260, 256, 8, 3
POOL = ["--max-total-tokens", "768"]
CHUNK = ["--chunked-prefill-size", str(CACHED)]  # a cold prefill sums as a cached one does
HICACHE = ["--enable-hierarchical-cache", "--hicache-ratio", "2", "--enable-metrics"]
EAGLE = ["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "5",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "6"]  # fmt: skip
FP8 = ["--kv-cache-dtype", "fp8_e4m3"]
# Each server also takes one of SGLang's host layouts, io backends and write policies (the third
# is SGLang's default, as the recipes run it), so each of them serves a restore.
SERVERS = {
    "bf16": ["--kv-cache-dtype", "bfloat16", "--hicache-io-backend", "direct",
             "--hicache-mem-layout", "page_first_direct", "--hicache-write-policy", "write_back"],
    "fp8-plain": [*FP8, "--dsa-prefill-backend", "trtllm", "--dsa-decode-backend", "trtllm",
                  "--hicache-mem-layout", "layer_first",
                  "--hicache-write-policy", "write_through_selective"],
    "fp8-packed-eagle": [*FP8, *EAGLE],
}  # fmt: skip
# Bytes per token in the host pools, from the model's config (docs/tiny-model.md: 4 layers, MLA
# latent 512 + RoPE 64, indexer keys 128 wide in FP8 with one fp32 scale per 128, an indexer in
# layers 0 and 2 whose top-k the next layer shares; the NextN draft is one more layer with its
# own latent and indexer) and the row layouts (packed FP8: 512 FP8 + 4 fp32 scales + 64 bf16).
LATENT_ROW = {"bf16": 576 * 2, "fp8-plain": 576, "fp8-packed-eagle": 512 + 4 * 4 + 64 * 2}
LAYERS = {"bf16": 4, "fp8-plain": 4, "fp8-packed-eagle": 5}
INDEX_ROW, INDEX_LAYERS = 128 + 4, {"bf16": 2, "fp8-plain": 2, "fp8-packed-eagle": 3}
PLANT = Path(__file__).parent / "hicache_plant"


def load_bytes(name: str, tokens: int) -> int:
    return tokens * (LATENT_ROW[name] * LAYERS[name] + INDEX_ROW * INDEX_LAYERS[name])


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """{name: (base URL, plant switch file)}: the three servers, started side by side."""
    from sglang_mx_lab.testing.server import default_serve_args, start_servers

    model, base = default_serve_args()
    switches = {n: tmp_path_factory.mktemp("plant") / n for n in SERVERS}
    env = {"PYTHONPATH": os.pathsep.join([str(PLANT), os.environ.get("PYTHONPATH", "")])}
    specs = [
        (model, [*base, "--dtype", "float32", *HICACHE, *POOL, *CHUNK, *args],
         {**env, "SGLANG_MX_PLANT_HICACHE": str(switches[n])}, None)
        for n, args in SERVERS.items()
    ]  # fmt: skip
    handles = start_servers(specs, timeout=600)
    try:
        yield {n: (h.base_url, switches[n]) for n, h in zip(SERVERS, handles, strict=True)}
    finally:
        for h in handles:
            h.stop(wait=False)


def generate(url: str, ids: list[int]) -> dict:
    r = httpx.post(f"{url}/generate", timeout=600, json={
        "input_ids": ids, "return_logprob": True, "top_logprobs_num": 5,
        "sampling_params": {"max_new_tokens": NEW, "temperature": 0, "ignore_eos": True},
    })  # fmt: skip
    r.raise_for_status()
    out, meta = r.json(), r.json()["meta_info"]
    return {
        "tokens": out["output_ids"],
        "logprobs": [lp for lp, *_ in meta["output_token_logprobs"]],
        "top": [[(t, lp) for lp, t, *_ in step] for step in meta["output_top_logprobs"]],
        "details": meta.get("cached_tokens_details") or {},
        "verify": meta.get("spec_verify_ct"),
    }


def counters(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    out = {"tokens": 0.0, "bytes": 0.0}
    for line in text.splitlines():
        m = re.match(r"sglang:load_back_(tokens|bytes)_total\{(.*)\} (\S+)$", line)
        if m and (m.group(1) == "bytes" or 'pool="kv"' in m.group(2)):
            out[m.group(1)] += float(m.group(3))
    return out


def restore(url: str, switch: Path, plant: str = "") -> dict:
    """One evict-then-restore case on a fresh prompt (see the module docstring)."""
    rng = random.Random(random.randrange(2**31))
    prompt = lambda: [rng.randrange(100, 2000) for _ in range(PROMPT)]  # noqa: E731
    ids = prompt()
    cold, warm = generate(url, ids), generate(url, ids)
    for _ in range(FILLERS):
        generate(url, prompt())
    before = counters(url)
    switch.write_text(plant)
    try:
        restored = generate(url, ids)
    finally:
        switch.write_text("")
    after = counters(url)
    loaded = {k: after[k] - before[k] for k in after}
    return {"cold": cold, "warm": warm, "restored": restored, "loaded": loaded}


def problems(name: str, case: dict) -> list[str]:
    """What is wrong with a restore case (empty: restored whole, from the host tier)."""
    cold, warm, got, loaded = case["cold"], case["warm"], case["restored"], case["loaded"]
    out = []
    if warm["details"].get("device") != CACHED:
        out.append(f"the second request was not a device hit: {warm['details']}")
    if got["details"] != {"device": 0, "host": CACHED}:
        out.append(f"the restore did not come from the host tier: {got['details']}")
    if loaded["tokens"] != CACHED:
        out.append(f"load_back_tokens_total grew by {loaded['tokens']}, not {CACHED}")
    if loaded["bytes"] != load_bytes(name, CACHED):
        out.append(f"{loaded['bytes']:.0f} bytes loaded, not {load_bytes(name, CACHED)} "
                   "(latent rows + index-key pages)")  # fmt: skip
    if (got["tokens"], got["logprobs"], got["top"]) != (warm["tokens"], warm["logprobs"],
                                                         warm["top"]):  # fmt: skip
        out.append(f"restored {got['tokens']} {got['logprobs']} != device hit "
                   f"{warm['tokens']} {warm['logprobs']}")  # fmt: skip
    if (got["tokens"], got["logprobs"], got["top"]) != (cold["tokens"], cold["logprobs"],
                                                         cold["top"]):  # fmt: skip
        out.append(f"restored {got['tokens']} {got['logprobs']} != cold recompute "
                   f"{cold['tokens']} {cold['logprobs']}")  # fmt: skip
    if got["verify"] != warm["verify"]:
        out.append(f"verify steps after the restore {got['verify']} != device hit {warm['verify']}")
    return out


@pytest.mark.parametrize("name", list(SERVERS))
def test_evicted_prefix_restored_whole_from_the_host_tier(servers, name):
    url, switch = servers[name]
    case = restore(url, switch)
    assert problems(name, case) == [], case
    if name == "fp8-packed-eagle":
        assert case["restored"]["verify"] < NEW  # the drafts were accepted (some beyond 1)


# What each plant must trip. Stale draft pages change the drafts; the check sees it as other
# verify steps, or as a verify batch of another shape whose sums differ (both seen, 2026-12-06).
SAME_OUTPUT, SAME_VERIFY = "!= device hit", "verify steps"


@pytest.mark.parametrize(
    "name,plant,caught",
    [("bf16", "slot", (SAME_OUTPUT,)), ("fp8-plain", "index", (SAME_OUTPUT,)),
     ("fp8-packed-eagle", "slot", (SAME_OUTPUT,)),
     ("fp8-packed-eagle", "draft", (SAME_VERIFY, SAME_OUTPUT))],
)  # fmt: skip
def test_planted_restore_breaks_fail_the_check(servers, name, plant, caught):
    url, switch = servers[name]
    found = problems(name, restore(url, switch, plant))
    assert any(c in p for p in found for c in caught), f"planted {plant!r} on {name}: {found}"
