"""GLM-5 architecture (MLA + DSA) served by real SGLang through the plugin's mx_dsa backend.

One server for the module: the shipped tiny GlmMoeDsaForCausalLM `tiny-glm5-bf16` (bf16
weights, float32 compute), a small --chunked-prefill-size so long prompts are prefilled in chunks,
--enable-mixed-chunk so prefills share batches with running decodes, and the indexer's
diagnostic top-k dump so the served selections can be compared with transformers'.

What is compared and why the bounds are what they are (both sides compute in float32; on the
CPU engine the latent cache keeps the model dtype, so it is float32 too):
- Up to index_topk keys every query attends all of its keys: greedy tokens equal transformers'.
- Past index_topk the served indexer scores FP8 index keys (SGLang's pool format), transformers
  bf16/fp32 ones; near-ties at the top-k boundary can swap. So (1) the selected-key sets must
  overlap >= 0.9 (issue 12); (2) given the served selections (forced into transformers), the
  log-probs must agree to float32 noise: |d logp| <= 2 * |d logit|, and a float32 logit over
  this depth (4 layers, ~6 chained reductions of length <= 2048 each, relative error
  <= sqrt(2048) * 2**-24 ~ 3e-6 per reduction) with |logit| <= ~30 is off by <= 24 * 3e-6 * 30
  ~ 2e-3; (3) against plain transformers, the only remaining difference is the selections, which
  differ only through FP8 index keys. transformers with FP8 index keys measures that effect on
  this model: G = |logp(fp8 keys) - logp|. Served and that emulation are two FP8-keyed forwards
  whose selections differ only by float32 noise (and LayerNorm eps), i.e. by at most another G:
  mean |served - reference| <= 2 * mean(G) (triangle inequality, on means over tokens).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import threading

import httpx
import pytest
import torch
from sglang_mx.assets import bundled_model_path
from sglang_mx_lab.testing.dsa_selection import forced_selection, fp8_index_keys, reference_topk
from sglang_mx_lab.testing.hf_reference import greedy, load_hf, token_logprobs
from sglang_mx_lab.testing.serve_probe import CHUNK, SHORT_PROMPTS, long_ids, topk_dump_server
from sglang_mx_lab.testing.served_distribution import greedy_generate

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def model_dir():
    return bundled_model_path("tiny-glm5-bf16")


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


@pytest.fixture(scope="module")
def hf_model(model_dir):
    return load_hf(model_dir)


@pytest.fixture(scope="module")
def dump_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("topk")


@pytest.fixture(scope="module")
def server(model_dir, dump_dir):
    args = ["--enable-mixed-chunk", "--chunked-prefill-size", str(CHUNK)]
    with topk_dump_server(model_dir, dump_dir, args) as handle:
        yield handle


def generate(url: str, ids: list[int], max_new_tokens: int, **extra) -> dict:
    return greedy_generate(url, max_new_tokens, input_ids=ids, **extra)


def served_rows(dump_dir) -> dict[int, dict[int, torch.Tensor]]:
    """layer -> position -> served top-k row, from the indexer's dump files."""
    rows: dict[int, dict[int, torch.Tensor]] = {}
    for f in sorted(dump_dir.glob("*.pt")):
        rec = torch.load(f)
        layer = rows.setdefault(rec["layer"], {})
        for pos, row in zip(rec["positions"].tolist(), rec["topk"], strict=True):
            layer[pos] = row
    return rows


def served_prompt_logprobs(url: str, ids: list[int]) -> torch.Tensor:
    out = generate(url, ids, 1, return_logprob=True, logprob_start_len=0)
    lps = out["meta_info"]["input_token_logprobs"][1:]
    return torch.tensor([x[0] for x in lps], dtype=torch.float64)


def test_dsa_model_gets_mx_dsa_and_page_64(server):
    log = server.log_path.read_text(errors="replace")
    assert "'attention_backend': 'mx_dsa'" in log
    assert "'page_size': 64" in log


def test_short_prompts_match_transformers_greedy(server, tokenizer, hf_model):
    topk = hf_model.config.index_topk
    for prompt in SHORT_PROMPTS:
        ids = tokenizer(prompt)["input_ids"]
        n = 24
        assert len(ids) + n <= topk  # every query sees all its keys: no sparsity yet
        served = generate(server.base_url, ids, n)["output_ids"]
        assert served == greedy(hf_model, ids, n), prompt


@pytest.fixture(scope="module")
def long_run(server, tokenizer, hf_model, dump_dir):
    """One long prompt (> index_topk, > one prefill chunk): served log-probs and selections.
    448 tokens: inside the advertised 512-token context, where the model's quality holds
    (docs/tiny-model.md; SGLang's scheduler takes prompts up to context - 7 tokens)."""
    ids = long_ids(tokenizer, CHUNK + 2 * hf_model.config.index_topk - 64)
    for f in dump_dir.glob("*.pt"):
        f.unlink()
    served = served_prompt_logprobs(server.base_url, ids)
    layer0_calls = len(list(dump_dir.glob("*-L0.pt")))
    return ids, served, served_rows(dump_dir), layer0_calls


def test_long_prompt_is_chunked_and_fully_indexed(long_run, hf_model):
    ids, _, rows, layer0_calls = long_run
    assert layer0_calls >= 2, "the long prompt was not prefilled in chunks"
    full = [i for i, t in enumerate(hf_model.config.indexer_types) if t == "full"]
    assert sorted(rows) == full  # shared layers reuse the previous top-k, they do not index
    k = hf_model.config.index_topk
    for layer in full:
        assert sorted(rows[layer]) == list(range(len(ids)))
        for pos, row in rows[layer].items():
            chosen = row[row >= 0]
            assert len(chosen) == min(k, pos + 1), (layer, pos)
            assert int(chosen.max()) <= pos and len(set(chosen.tolist())) == len(chosen)


def test_long_prompt_selections_overlap_transformers(long_run, hf_model):
    ids, _, rows, _ = long_run
    k = hf_model.config.index_topk
    overlaps = {}
    for layer, ref in reference_topk(hf_model, ids).items():
        per_row = [
            len(set(rows[layer][p].tolist()) & set(ref[p].tolist())) / k
            for p in range(k, len(ids))  # rows with more causal keys than top-k
        ]
        overlaps[layer] = sum(per_row) / len(per_row)
    overall = sum(overlaps.values()) / len(overlaps)
    assert overall >= 0.9, f"selected-key overlap {overlaps} (mean {overall:.3f}) < 0.9"


def test_long_prompt_logprobs_given_served_selections(long_run, hf_model):
    ids, served, rows, _ = long_run
    with forced_selection(rows):
        forced = token_logprobs(hf_model, ids)
    gap = (served - forced).abs()
    assert gap.max() <= 2e-3, f"max |served - transformers(same selections)| {gap.max():.2e}"


def test_long_prompt_logprobs_within_fp8_selection_bound(long_run, hf_model):
    ids, served, _, _ = long_run
    reference = token_logprobs(hf_model, ids)
    with fp8_index_keys():
        fp8_keys = token_logprobs(hf_model, ids)
    g = (fp8_keys - reference).abs()
    gap = (served - reference).abs()
    k = hf_model.config.index_topk
    assert gap[: k - 1].max() <= 2e-3  # dense prefix: float32 noise only (module docstring)
    assert gap.mean() <= 2 * g.mean(), (
        f"mean |served - reference| {gap.mean():.4f} > 2 * mean G = {2 * g.mean():.4f}"
    )


def test_repeated_long_prompt_hits_radix_cache(server, tokenizer):
    ids = long_ids(tokenizer, 3 * 64 + 40)[::-1]  # not a prefix another test cached
    first = generate(server.base_url, ids, 16)
    second = generate(server.base_url, ids, 16)
    assert first["meta_info"]["cached_tokens"] == 0
    assert second["meta_info"]["cached_tokens"] >= 3 * 64  # whole 64-token pages
    assert second["output_ids"] == first["output_ids"]


def stream_generate(url: str, ids: list[int], n: int, started: threading.Event) -> list[int]:
    """Streamed /generate; sets `started` at the first streamed token (the request decodes)."""
    body = {
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": n, "temperature": 0.0},
        "stream": True,
    }
    last: dict = {}
    with httpx.stream("POST", f"{url}/generate", json=body, timeout=600) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data:") and line != "data: [DONE]":
                last = json.loads(line[5:])
                started.set()
    return last["output_ids"]


def segments(positions: list[int]) -> list[tuple[int, int]]:
    """(first position, length) of each consecutive run."""
    runs: list[tuple[int, int]] = []
    for p in positions:
        if runs and p == runs[-1][0] + runs[-1][1]:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def test_concurrent_requests_mix_prefill_and_decode(server, tokenizer, hf_model, dump_dir):
    prompts = [tokenizer(p)["input_ids"] for p in SHORT_PROMPTS]
    n = 32
    expected = [greedy(hf_model, ids, n) for ids in prompts]
    for f in dump_dir.glob("*.pt"):
        f.unlink()
    with cf.ThreadPoolExecutor(len(prompts)) as pool:
        futures = []
        for ids in prompts:
            started = threading.Event()
            futures.append(pool.submit(stream_generate, server.base_url, ids, n, started))
            # The next prefill arrives while this request (and the earlier ones) decode.
            assert started.wait(120), "request did not start decoding"
        got = [f.result() for f in futures]
    assert got == expected
    # A mixed batch: one indexer call over a fresh prefill (a run from position 0) together
    # with a running request's single decode token.
    mixed = []
    for f in dump_dir.glob("*-L0.pt"):
        runs = segments(torch.load(f)["positions"].tolist())
        if any(start == 0 for start, _ in runs) and any(s > 0 and k == 1 for s, k in runs):
            mixed.append(runs)
    assert mixed, "no batch mixed a prefill with running decodes"
