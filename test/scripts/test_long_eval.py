"""The context evaluator's chunked path (scripts/long_eval.py, `eval_tiny_glm5_context.py
--chunked`, the only one that reaches 32k here) measures what its transformers path measures:
per-position NLL with the indexer's top-k active, and the dense attention mass the indexer's
top-k keeps by band, on the bundled model at a length where both run; a planted selection (the
indexer's lowest-scored keys) moves the mass far outside the agreement.

The baseline is the evaluator's transformers path (full L x L eager attention captured by
dsa_reference's hooks, its own top-k): another implementation of the same quantities."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import eval_tiny_glm5_context as ctx  # noqa: E402
import long_eval  # noqa: E402
from sglang_mx.assets import bundled_model_path  # noqa: E402
from sglang_mx_lab.testing import dsa_reference as dsa  # noqa: E402
from sglang_mx_lab.testing.corpus import held_out_ids  # noqa: E402
from tiny_common import load_eager  # noqa: E402

BF16 = bundled_model_path("glm5-bf16")
LENGTH, TOPK, CHUNK = 512, 64, 128
BANDS = [(0, 256), (256, 512)]
# float32 on both sides, same weights, different matmul order: NLL agreed to 7e-6 and mass to
# 1.5e-8 (2026-12-06); a wrong key set moves a band's mass by ~1 (the planted case below).
NLL_TOL, MASS_TOL = 1e-3, 1e-3


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(2)
    m = load_eager(BF16)
    dsa.set_index_topk(m, TOPK)
    return m


@pytest.fixture(scope="module")
def window() -> torch.Tensor:
    from transformers import AutoTokenizer

    return held_out_ids(AutoTokenizer.from_pretrained(BF16), LENGTH + 1)


def test_chunked_nll_is_the_transformers_nll(model, window):
    for k in (TOPK, dsa.DENSE):
        dsa.set_index_topk(model, k)
        want = ctx.position_nll(model, [window])
        got = long_eval.position_nll(model, [window], k, CHUNK)
        err = float((got - want).abs().max())
        print(f"top-{k}: max |NLL diff| {err:.2e}")
        assert err < NLL_TOL, f"chunked NLL off by {err:.2e} at top-{k}"
    dsa.set_index_topk(model, TOPK)


def _worst(a: dict, b: dict) -> float:
    return max(abs(x[f] - y[f]) for layer in a for x, y in zip(a[layer], b[layer], strict=True)
               for f in ("indexer", "best"))  # fmt: skip


def test_chunked_mass_is_the_transformers_mass(model, window, monkeypatch):
    want = ctx.mass_by_band(model, window[:-1], TOPK, BANDS)
    got = long_eval.mass_by_band(model, window[:-1], TOPK, BANDS, CHUNK)
    assert set(got) == set(want) and all(len(got[k]) == len(BANDS) for k in got)
    err = _worst(got, want)
    print(f"max |mass diff| {err:.2e}")
    assert err < MASS_TOL, f"chunked top-k mass off by {err:.2e}"
    scores = long_eval.index_scores
    monkeypatch.setattr(long_eval, "index_scores", lambda q, k, w, s: -scores(q, k, w, s))
    planted = long_eval.mass_by_band(model, window[:-1], TOPK, BANDS, CHUNK)
    err = _worst(planted, want)
    print(f"planted lowest-scored keys: max |mass diff| {err:.2e}")
    assert err > 10 * MASS_TOL, f"a selection of the lowest-scored keys went unnoticed ({err:.2e})"
    # overlap with the attention's own top-k: above chance (k / keys) on the product, far below
    # it on the lowest-scored keys
    for layer in got:
        for row, bad in zip(got[layer], planted[layer], strict=True):
            assert row["random"] < row["overlap"] <= 1.0, (layer, row)
            assert bad["overlap"] < row["overlap"] - 0.2, (layer, row, bad)
