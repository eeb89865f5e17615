"""Suite-wide setup: CPU by default, Triton kernels through the interpreter, no model hubs."""

from __future__ import annotations

import os
import random

# Read by triton when @triton.jit decorators run, so it must be set before any kernel imports.
if not os.environ.get("SGLANG_MX_TEST_GPU"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# One OpenMP thread per process (inherited by every server the suite starts): `make test` runs
# two pytest-xdist workers on two cores, and OpenMP teams spin-waiting for a core another
# process holds slowed a server's decode by 10x or more.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A 32k-token KV pool for the suite's servers (sglang_mx_lab.testing.server.POOL_ENV): the
# platform's 131k-token default is 0.4 GB (bf16) to 1.1 GB (float32) more per server, and with
# several servers up at once on each worker a CI run had a scheduler OOM-killed (2026-12-04).
os.environ.setdefault("SGLANG_MX_TEST_POOL_TOKENS", "32768")

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


# `make test`'s two pytest-xdist workers take the tests on each kind of session server (below) as
# one work unit, so each of those servers starts once. The master process, which schedules, sees
# node ids only, hence lists (checked against the tests' fixtures at collection). In the mixed
# modules a test's parameters name its server ("[glm5-..." or not).
GLM5_SESSION_MODULES = frozenset(
    {
        "test/sglang_mx/assets/test_default_server_context.py",
        "test/sglang_mx/serving/test_mtp_serving.py",
        "test/sglang_mx/quant/test_quark_checkpoint.py",
        "test/sglang_mx/provider/test_sglang_client.py",
    }
)
MIXED_SESSION_MODULES = frozenset(
    {
        "test/sglang_mx/guards/test_hostile_campaign.py",
        "test/sglang_mx/provider/test_provider_guards.py",
    }
)
MXFP4_SESSION_MODULES = frozenset(
    {
        "test/sglang_mx/bench/test_bench_agents.py",
        "test/sglang_mx/bench/test_bench_live.py",
        "test/sglang_mx/bench/test_bench_peer_live.py",
        "test/sglang_mx/bench/test_bench_sessions.py",
        "test/sglang_mx/bench/test_bench_task_eval.py",
        "test/sglang_mx/bench/test_bench_verify_live.py",
        "test/sglang_mx/bench/test_bench_verify_agreement.py",
        "test/sglang_mx/bench/test_bench_verify_liars.py",
        "test/sglang_mx/provider/test_live_server.py",
        "test/sglang_mx/provider/test_native_routes.py",
        "test/sglang_mx/provider/test_openai_fields.py",
        "test/sglang_mx/provider/test_router_topology.py",
        "test/sglang_mx/seam/test_entry_points.py",
        "test/sglang_mx/guards/test_guards_server.py",
        "test/sglang_mx/serving/test_reference_equivalence.py",
        "test/sglang_mx/serving/test_server.py",
    }
)
GLM5_SERVER_FIXTURES = frozenset(
    {"default_server", "default_server_handle", "mtp_server", "mtp_server_handle"}
)
MXFP4_SERVER_FIXTURES = frozenset({"mxfp4_server", "mxfp4_server_handle", "live_server"})
GLM5_UNIT, MXFP4_UNIT = "glm5-session-servers", "glm45-session-server"
KERNEL_TESTS = "test/sgl_kernel_rocm/"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):  # a pytest-xdist worker
        _order_for_workers(items)
    if torch.cuda.is_available() and os.environ.get("SGLANG_MX_TEST_GPU"):
        return
    skip_gpu = pytest.mark.skip(reason="needs a GPU (set SGLANG_MX_TEST_GPU=1 on a GPU node)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def work_unit(nodeid: str) -> str:
    """What a worker runs in one go: the tests on each kind of session server together; any
    other module outside the kernel tests whole (a module-scoped server starts once); kernel
    tests one by one, which even out the end of the run."""
    path = nodeid.split("::", 1)[0]
    if path in GLM5_SESSION_MODULES or (path in MIXED_SESSION_MODULES and "[glm5-" in nodeid):
        return GLM5_UNIT
    if path in MXFP4_SESSION_MODULES or path in MIXED_SESSION_MODULES:
        return MXFP4_UNIT
    return nodeid if path.startswith(KERNEL_TESTS) else path


def _order_for_workers(items):
    """Units go out in order of first appearance: the two session-server units, the other
    modules that start servers, the other modules, then the kernel tests. A test that uses a
    session server by fixture must sit in that server's unit; a module that reaches one through
    request.getfixturevalue carries the `session_servers` mark and must be listed."""
    wrong = []
    for item in items:
        unit, names = work_unit(item.nodeid), set(item.fixturenames)
        if (GLM5_SERVER_FIXTURES & names and unit != GLM5_UNIT) or (
            MXFP4_SERVER_FIXTURES & names and unit != MXFP4_UNIT
        ):
            wrong.append(item.nodeid)
        elif item.get_closest_marker("session_servers") and unit not in (GLM5_UNIT, MXFP4_UNIT):
            wrong.append(item.nodeid)
    if wrong:
        raise pytest.UsageError(
            f"session-server tests outside their unit (conftest lists): {wrong}"
        )

    def rank(item):
        unit = work_unit(item.nodeid)
        if unit in (GLM5_UNIT, MXFP4_UNIT):
            return 0 if unit == GLM5_UNIT else 1
        if item.get_closest_marker("server") or item.get_closest_marker("packaging"):
            return 2
        return 4 if unit == item.nodeid else 3

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent with -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's scope scheduler over `work_unit` (its xdist_group marks do not take under
    pytest 9, whose node ids no longer read the `_nodeid` they rewrite)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SuiteScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return SuiteScheduling(config, log)


# Session servers by work unit, stopped when a worker leaves their unit (below) rather than at
# the end of the session: otherwise three idle servers (2-3 GB each) sit through the rest of it.
_UNIT_SERVERS: dict[str, list] = {}


def _session_server(unit, model, args):
    from sglang_mx_lab.testing.server import start_server

    handle = start_server(model, args)
    _UNIT_SERVERS.setdefault(unit, []).append(handle)
    try:
        yield handle
    finally:
        handle.stop(wait=False)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """On an xdist worker a unit's tests run together (`_order_for_workers`), so the unit's
    session servers go once its last test is done; a later request for one would get a stopped
    server, which the collection check rules out. Without xdist they live to the end."""
    if not hasattr(item.config, "workerinput"):
        return
    unit = work_unit(item.nodeid)
    if unit in _UNIT_SERVERS and (nextitem is None or work_unit(nextitem.nodeid) != unit):
        for handle in _UNIT_SERVERS.pop(unit):
            handle.stop(wait=False)


@pytest.fixture(scope="session")
def mxfp4_server_handle():
    """One real SGLang server on the bundled MXFP4 model, shared by the session."""
    from sglang_mx.assets import bundled_model_path

    # --enable-metrics: the bench token audit reads SGLang's Prometheus counters
    yield from _session_server(
        MXFP4_UNIT, bundled_model_path("mxfp4"), ["--enable-cache-report", "--enable-metrics"]
    )


@pytest.fixture(scope="session")
def mxfp4_server(mxfp4_server_handle):
    """Base URL of the session's MXFP4 server."""
    return mxfp4_server_handle.base_url


@pytest.fixture(scope="session")
def default_server_handle():
    """One real SGLang server on what `sglang-mx serve` serves by default (the bundled GLM-5
    MXFP4 model: mx_dsa attention, MLA + DSA, page 64, chunked prefill), shared by the session."""
    from sglang_mx_lab.testing.server import default_serve_args

    yield from _session_server(GLM5_UNIT, *default_serve_args())


@pytest.fixture(scope="session")
def mtp_server_handle():
    """`sglang-mx serve --mtp`: the default model with its NextN layer as SGLang's EAGLE draft
    (target verify and draft extend through mx_dsa), shared by the session."""
    from sglang_mx.cli.serve import MTP_ARGS
    from sglang_mx_lab.testing.server import default_serve_args

    model, args = default_serve_args()
    # --enable-metrics: bench's run-level acceptance reads SGLang's spec_verify_calls_total
    yield from _session_server(GLM5_UNIT, model, [*args, *MTP_ARGS, "--enable-metrics"])


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
