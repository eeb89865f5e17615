"""Bench test fixtures: an in-memory tokenizer and a live server (the suite's shared one)."""

from __future__ import annotations

import pytest
from bench_tiny_tokenizer import train_tokenizer


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return train_tokenizer()


@pytest.fixture(scope="session")
def live_server(request) -> str:
    """Base URL of the suite's bundled-MXFP4 server (test/conftest.py's mxfp4_server)."""
    try:
        return request.getfixturevalue("mxfp4_server")
    except pytest.FixtureLookupError:
        pytest.skip("the suite's mxfp4_server fixture is not available")


@pytest.fixture(scope="session")
def bundled_tokenizer_dir() -> str:
    from sglang_mx.assets import bundled_model_path

    try:
        return bundled_model_path("mxfp4")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
