"""Fixtures for provider tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from provider_support import write_pricing


@pytest.fixture
def pricing_file(tmp_path: Path) -> Path:
    return write_pricing(tmp_path / "pricing.json", "tiny")
