"""The retrieval probe's `plant_selected` (scripts/eval_tiny_glm5_retrieval.py): the share of the
planted line a value query's top-k holds, which is what puts a missed recall on the indexer
rather than on the copy. Checked on hand-made selections whose answer is known by
construction, and on a real held-out sample (the planted line where long_data put it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import eval_tiny_glm5_retrieval as probe  # noqa: E402
from long_data import LongData, Sample  # noqa: E402
from sglang_mx.assets import bundled_model_path  # noqa: E402

CHUNK = 4


def _sample() -> Sample:
    ids = torch.arange(
        21
    )  # 20 positions; the planted line at 4..7 (gap 17), values asked at 13, 14
    answer = torch.zeros(20, dtype=torch.bool)
    answer[13:15] = True
    return Sample(ids, answer, gap=17, plant_len=4)


def test_share_of_the_planted_line_per_query_and_indexer():
    s = _sample()
    chunks = [torch.zeros(CHUNK, 2, dtype=torch.long) for _ in range(5)]
    whole = [c.clone() for c in chunks]
    whole[3] = torch.tensor([[0, 1], [4, 5], [6, 7], [0, 1]])  # query 13: 4, 5; query 14: 6, 7
    assert probe.plant_selected([whole], s, CHUNK) == 0.5  # each query sees half the line
    none = [c.clone() for c in chunks]
    assert probe.plant_selected([none], s, CHUNK) == 0.0
    dense = [None] * 5  # the sequence within top-k: every key
    assert probe.plant_selected([whole, dense], s, CHUNK) == 0.75  # averaged over indexers


def test_planted_line_where_long_data_puts_it():
    """On a held-out sample the line `len(ids) - gap` on holds `NAME = 'value'`."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(bundled_model_path("glm5-bf16"))
    s = LongData(tok, "held", seed=1).sample(0, 1280, gap=1024)
    at = s.ids.numel() - s.gap
    line = tok.decode(s.ids[at : at + s.plant_len])
    value = tok.decode(s.ids[1:][s.answer])
    assert line.endswith(f" = '{value}'\n"), (line, value)


def test_length_fixes_the_sequence_and_keeps_the_gap(monkeypatch):
    """`--length`: every probed sequence has that many tokens with the line `gap` back, so a miss
    can be put on the distance or on the length; a length that cannot hold the gap is refused."""
    from transformers import AutoTokenizer

    path = bundled_model_path("glm5-bf16")
    data = LongData(AutoTokenizer.from_pretrained(path), "held", seed=1)
    seen = []

    def forward(model, ids, st, selections):
        seen.append(ids.numel())
        return torch.zeros(ids.numel(), int(ids.max()) + 2), None  # a stand-in model

    monkeypatch.setattr(probe, "forward", forward)
    with pytest.raises(ValueError, match="cannot hold"):
        probe.probe(None, data, 1024, 1, 64, length=1200)
    row = probe.probe(None, data, 256, 2, 64, length=1536)
    assert seen == [1536, 1536] and row["length"] == 1536 and row["gap"] == 256
    seen.clear()
    assert probe.probe(None, data, 256, 1, 64)["length"] == 512 and seen == [512]


def test_first_probes_fresh_sequences(monkeypatch):
    """`--first N`: the probe reads held-out sequences N.. on, so a second run adds sequences the
    first did not see (the pooled figure then rests on more data, none read twice)."""
    from transformers import AutoTokenizer

    data = LongData(AutoTokenizer.from_pretrained(bundled_model_path("glm5-bf16")), "held", seed=1)
    seen = []

    def forward(model, ids, st, selections):
        seen.append(ids.clone())
        return torch.zeros(ids.numel(), int(ids.max()) + 2), None  # a stand-in model

    monkeypatch.setattr(probe, "forward", forward)
    assert probe.probe(None, data, 256, 3, 64)["first"] == 0
    head, seen[:] = list(seen), []
    row = probe.probe(None, data, 256, 2, 64, first=3)
    assert row["first"] == 3 and row["samples"] == 2
    assert not any(torch.equal(a, b) for a in head for b in seen)
    seen.clear()
    probe.probe(None, data, 256, 2, 64, first=1)
    assert torch.equal(seen[0], head[1]) and torch.equal(seen[1], head[2])
