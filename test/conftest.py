"""Suite-wide setup: CPU by default, Triton kernels through the interpreter, no model hubs."""

from __future__ import annotations

import os
import random

# Read by triton when @triton.jit decorators run, so it must be set before any kernel imports.
if not os.environ.get("SGLANG_MX_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

_SEED_ENV = "SGLANG_MX_TEST_SEED"


@pytest.fixture(autouse=True)
def _test_seed(request):
    """Each test draws fresh random inputs from its own seed (random unless SGLANG_MX_TEST_SEED
    is set); a failing test reports it, so the failure can be replayed."""
    seed = int(os.environ.get(_SEED_ENV) or random.SystemRandom().randrange(2**31))
    request.node._seed = seed
    random.seed(seed)
    torch.manual_seed(seed)
    yield seed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    seed = getattr(item, "_seed", None)
    if report.failed and seed is not None:
        report.sections.append(("random seed", f"replay with {_SEED_ENV}={seed}"))


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available() and os.environ.get("SGLANG_MX_TEST_GPU"):
        return
    skip_gpu = pytest.mark.skip(reason="needs a GPU (set SGLANG_MX_TEST_GPU=1 on a GPU node)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _session_server(model, args):
    from sglang_mx.testing.server import start_server

    handle = start_server(model, args)
    try:
        yield handle
    finally:
        handle.stop()


@pytest.fixture(scope="session")
def mxfp4_server_handle():
    """One real SGLang server on the bundled MXFP4 model, shared by the session."""
    from sglang_mx.assets import bundled_model_path

    yield from _session_server(bundled_model_path("mxfp4"), ["--enable-cache-report"])


@pytest.fixture(scope="session")
def mxfp4_server(mxfp4_server_handle):
    """Base URL of the session's MXFP4 server."""
    return mxfp4_server_handle.base_url


@pytest.fixture(scope="session")
def default_server_handle():
    """One real SGLang server on what `sglang-mx serve` serves by default (the bundled GLM-5
    MXFP4 model: mx_dsa attention, MLA + DSA, page 64, chunked prefill), shared by the session."""
    from sglang_mx.testing.server import default_serve_args

    yield from _session_server(*default_serve_args())


@pytest.fixture(scope="session")
def mtp_server_handle():
    """`sglang-mx serve --mtp`: the default model with its NextN layer as SGLang's EAGLE draft
    (target verify and draft extend through mx_dsa), shared by the session."""
    from sglang_mx.cli.serve import MTP_ARGS
    from sglang_mx.testing.server import default_serve_args

    model, args = default_serve_args()
    yield from _session_server(model, [*args, *MTP_ARGS])


@pytest.fixture(scope="session")
def mtp_server(mtp_server_handle):
    """Base URL of the session's MTP (EAGLE) server."""
    return mtp_server_handle.base_url


@pytest.fixture(scope="session")
def default_server(default_server_handle):
    """Base URL of the session's default-model server."""
    return default_server_handle.base_url


@pytest.fixture(scope="module")
def sglang_context():
    """SGLang's per-process context for building its layers outside a server: CPU, TP 1.
    Module-scoped, so the published dummy config is gone before any other module runs."""
    from sglang_mx.seam import plugin

    plugin.register()
    from sglang.srt.runtime_context import get_context, get_parallel

    override = get_context().override_server_args(device="cpu")
    override.install()
    get_parallel().override_permanently(moe_ep_rank=0, moe_tp_rank=0, tp_rank=0, tp_group=None)
    try:
        yield
    finally:
        get_parallel().clear_stamp()
        override.restore()
