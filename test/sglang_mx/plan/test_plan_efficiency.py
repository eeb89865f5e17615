"""The measured efficiency profile is what docs/results/gpu-check-sm90.json says, not a copy
that can drift; every profile labels every field with a source."""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_mx.plan.efficiency import get_profile, measured_fractions, profiles

GPU_CHECK = Path(__file__).parents[3] / "docs" / "results" / "gpu-check-sm90.json"


def test_measured_profile_matches_the_gpu_check_result():
    derived = measured_fractions(GPU_CHECK)
    prof = get_profile("sglang-mx-sm90-measured")
    for key, value in derived.items():
        assert getattr(prof, key) == pytest.approx(value, abs=5e-4), key


def test_every_field_has_a_source():
    for prof in profiles().values():
        if prof.name == "ideal":
            continue
        for key in ("moe_mem", "attn_mem", "dense_mem", "compute", "sched_base_us"):
            assert key in prof.sources, (prof.name, key)


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(KeyError, match="production-assumed"):
        get_profile("nope")
