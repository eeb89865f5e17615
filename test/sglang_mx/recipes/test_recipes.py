"""Launch recipes as data (sglang_mx.recipes, python/sglang_mx/recipes/mi355x.json): the shell
recipes exec exactly the data's flags, the CPU scaling names every substitution, a recipe that
sets a flag twice is refused, and every flag of every recipe and role (the 1P1D prefill, decode
and router included) is one SGLang 0.5.23's and smg 1.13's (SGLang Model Gateway) own
parsers take (recipes.check). Starting each single-node recipe's CPU flag set: test_layouts.py;
the 1P1D Kubernetes manifests: test_k8s_manifests.py."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import recipe_facts
from sglang_mx import recipes
from sglang_mx.recipes import book, check, pd

ROOT = Path(__file__).parents[3]
SCRIPTS = {
    "mi355x-tp8": "mi355x-tp8.sh",
    "mi355x-tp8-dpattn": "mi355x-tp8-dpattn.sh",
    "mi355x-tp4x2-router": "mi355x-tp4x2-router.sh",
}
PD_SCRIPTS = {"mi355x-1p1d": "mi355x-1p1d.sh"}
# A stand-in for `sglang-mx` on PATH: `recipe` goes to the real CLI, `serve` prints its argv
# (one per line) and exits; the router launch is skipped the same way.
FAKE_CLI = """#!{python}
import sys
if sys.argv[1] == "serve":
    # one write: the engines print at the same time, and an unbuffered print writes piecewise
    sys.stdout.write("\\n".join(["SERVE", *sys.argv[2:]]) + "\\n")
    sys.exit(0)
from sglang_mx.cli.main import main
sys.exit(main(sys.argv[1:]))
"""

# A stand-in for `smg` on PATH that waits and exits: the router line is not run.
SLOW_ROUTER = """#!/bin/sh
sleep 10
"""


def test_every_recipe_has_a_script_and_keeps_the_public_facts():
    """Each recipe and each 1P1D role against what public deployments run (recipe_facts.py,
    sources CONTEXT section 14), not against literals copied from the recipe file."""
    assert set(recipes.names()) == set(SCRIPTS) and set(pd.names()) == set(PD_SCRIPTS)
    for name in recipes.names():
        broken = recipe_facts.violations(list(recipes.render_args(name)))
        assert broken == [], (name, broken)
    for name in pd.names():
        r = pd.recipe(name)
        for role in pd.ROLES:
            broken = recipe_facts.violations(list(r.roles[role]), role)
            assert broken == [], (name, role, broken)
        router = pd.router_args(name, *PD_URLS)
        assert recipe_facts.router_violations(router, list(r.roles["decode"])) == [], name


def _set(args: list[str], flag: str, new: str | None) -> list[str]:
    """`args` with `flag`'s value replaced (or the flag removed when new is None)."""
    out = list(args)
    i = out.index(flag)
    width = 2 if book.takes_value(out, i) else 1
    out[i : i + width] = [] if new is None else ([flag, new] if width == 2 else [flag])
    return out


# Breaks a wrong recipe could carry, each planted into a real recipe's flags: (recipe or
# "1p1d:ROLE", flag, new value or None to drop it).
PLANTED = [
    ("mi355x-tp4x2-router", "--kv-cache-dtype", "auto"),
    ("mi355x-tp4x2-router", "--disable-custom-all-reduce", None),
    ("mi355x-tp4x2-router", "--speculative-num-steps", "3"),
    ("mi355x-tp8", "--speculative-num-draft-tokens", "4"),
    ("mi355x-tp8", "--tool-call-parser", "glm45"),
    ("mi355x-tp8-dpattn", "--reasoning-parser", None),
    ("mi355x-tp8-dpattn", "--dp-size", "4"),
    ("1p1d:decode", "--enable-dp-lm-head", None),
    ("1p1d:decode", "--moe-dense-tp-size", "8"),
    ("1p1d:prefill", "--tp-size", "4"),
    ("1p1d:prefill", "--disaggregation-transfer-backend", "nixl"),
]


@pytest.mark.parametrize("where,flag,new", PLANTED)
def test_public_facts_catch_a_planted_break(where, flag, new):
    if where.startswith("1p1d:"):
        role = where.split(":")[1]
        args = list(pd.recipe("mi355x-1p1d").roles[role])
    else:
        role, args = "engine", list(recipes.render_args(where))
    assert recipe_facts.violations(args, role) == []
    assert recipe_facts.violations(_set(args, flag, new), role), (where, flag, new)


def test_router_facts_catch_a_planted_break():
    r = pd.recipe("mi355x-1p1d")
    router = pd.router_args("mi355x-1p1d", *PD_URLS)
    decode = list(r.roles["decode"])
    assert recipe_facts.router_violations([a for a in router if a != "--dp-aware"], decode)
    assert recipe_facts.router_violations(router[1:], decode)  # no --pd-disaggregation


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_shell_recipe_execs_the_data_flags(name, tmp_path):
    fake = tmp_path / "sglang-mx"
    fake.write_text(FAKE_CLI.format(python=sys.executable))
    fake.chmod(0o755)
    # The router line is not run: it waits a while, so the script's exit trap (which kills the
    # backgrounded engines) cannot cut a fake engine off before it printed its flags.
    fake_router = tmp_path / "smg"
    fake_router.write_text(SLOW_ROUTER)
    fake_router.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "MODEL": "/ckpt"}
    script = ROOT / "scripts" / "launch" / SCRIPTS[name]
    out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    served = [block.split("\n") for block in out.stdout.split("SERVE\n")[1:]]
    assert served, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    for argv in served:
        argv = [a for a in argv if a]
        assert argv[:2] == ["--model-path", "/ckpt"], argv
        i = argv.index("--port") + 2
        assert argv[i:] == recipes.render_args(name)
    assert len(served) == recipes.recipe(name).engines


def test_cpu_scaling_names_each_substitution():
    for name in recipes.names():
        node, (cpu, subs) = recipes.render_args(name), recipes.cpu_args(name)
        changed = {s.flag for s in subs}
        # HiCache is kept (seam/hicache_cpu.py): the CPU run carries the flag as the node does.
        assert "--enable-hierarchical-cache" not in changed and "--enable-hierarchical-cache" in cpu
        assert all(s.why for s in subs)
        # Flags not substituted are passed exactly as the recipe has them.
        kept = [a for a in node if a.startswith("--") and a not in changed]
        for flag in kept:
            i, j = node.index(flag), cpu.index(flag)
            assert node[i + 1 : i + 2] == cpu[j + 1 : j + 2] or node[i + 1].startswith("--")
        assert cpu[cpu.index("--tp-size") + 1] == "2"


@contextlib.contextmanager
def _recipe_file(monkeypatch, tmp_path, data: dict):
    """The recipes read from `data` instead of mi355x.json, for one block."""
    bad = tmp_path / "recipes.json"
    bad.write_text(json.dumps(data))
    monkeypatch.setattr(book, "DATA", bad)
    book.load.cache_clear()
    try:
        yield
    finally:
        monkeypatch.undo()
        book.load.cache_clear()


def test_a_flag_set_twice_is_refused(monkeypatch, tmp_path):
    data = json.loads(recipes.DATA.read_text())
    data["recipes"]["mi355x-tp8"]["args"] += ["--tp-size", "4"]
    with _recipe_file(monkeypatch, tmp_path, data):
        with pytest.raises(ValueError, match="--tp-size more than once"):
            recipes.recipe("mi355x-tp8")
    with pytest.raises(KeyError, match="no launch recipe 'nope'"):
        recipes.recipe("nope")


# --- every flag is one the real parsers take (recipes.check) ---------------------------------

# Flags SGLang 0.5.23 still takes but has retired (its Deprecated* actions): a new one here means
# a recipe should move off it. `--enable-dp-attention`: use `--attn-dp-size N` (SGLang's warning).
KNOWN_DEPRECATED = {"mi355x-tp8-dpattn": ["--enable-dp-attention"],
                    "mi355x-1p1d:decode": ["--enable-dp-attention"]}  # fmt: skip
PD_URLS = ("http://prefill-node:30000", "http://decode-node:30000")


def _engine_flag_sets() -> dict[str, list[str]]:
    out = {name: recipes.render_args(name) for name in recipes.names()}
    for name in pd.names():
        for role in pd.ROLES:
            for transfer in pd.recipe(name).transfers:  # the IB device the scripts append
                args = [*pd.role_args(name, role, transfer), pd.IB_DEVICE, "rdma0,rdma1"]
                out[f"{name}:{role}" + ("" if transfer == "mori" else f":{transfer}")] = args
    return out


def test_every_engine_flag_is_sglangs():
    for what, args in _engine_flag_sets().items():
        assert check.server_flag_error(args) is None, what
        name = what.removesuffix(":mooncake")
        assert check.deprecated_flags(args) == KNOWN_DEPRECATED.get(name, []), what


def test_every_router_flag_is_smgs():
    for name in recipes.names():
        router = list(recipes.recipe(name).router)
        urls = ["--worker-urls", "http://a:30001", "http://a:30002"] if router else []
        assert check.router_flag_error([*router, *urls]) is None, name
    for name in pd.names():
        argv = ["--host", "0.0.0.0", "--port", "8000", *pd.router_args(name, *PD_URLS)]
        assert check.router_flag_error(argv) is None, name


@pytest.mark.parametrize(
    "args,said",
    [
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--dp", "8"], "unrecognized arguments: --dp"),  # an abbreviation of --dp-size
        (["--disaggregation-transfer-backend", "mooncak"], "invalid choice: 'mooncak'"),
        (["--disaggregation-mode", "both"], "invalid choice: 'both'"),
        (["--tp-size"], "expected one argument"),
        (["--attention-backend", "mx_dsaa"], "invalid choice: 'mx_dsaa'"),
    ],
)
def test_the_flag_check_refuses_what_sglang_would(args, said):
    assert said in (check.server_flag_error(args) or "")


@pytest.mark.parametrize(
    "args,said",
    [
        (["--dp-awarre"], "unrecognized arguments: --dp-awarre"),
        (["--policy", "cache-aware"], "invalid choice: 'cache-aware'"),  # it is cache_aware
        (["--decode-policy", "bucket"], "invalid choice: 'bucket'"),
        (["--pd-disaggregation", "--prefill", "http://p:30000", "port"], "Invalid bootstrap port"),
    ],
)
def test_the_router_check_refuses_what_the_router_would(args, said):
    assert said in (check.router_flag_error(args) or "")


# --- the 1P1D recipe: roles, transfer backends, router -----------------------------------------


def _value(args: list[str], flag: str) -> str | None:
    """The value of `flag` in `args`, the flag itself for a switch, None when absent."""
    if flag not in args:
        return None
    i = args.index(flag)
    return args[i + 1] if book.takes_value(args, i) else flag


# What must agree across the KV handoff, and the public GLM-5.x MXFP4 flags, on both roles.
AGREE = ("--kv-cache-dtype", "--attention-backend", "--disaggregation-transfer-backend",
         "--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
         "--speculative-num-draft-tokens", "--tool-call-parser", "--reasoning-parser")  # fmt: skip


def test_1p1d_roles_are_the_public_layout():
    r = pd.recipe("mi355x-1p1d")
    prefill, decode = (list(r.roles[role]) for role in pd.ROLES)
    assert r.transfers == ("mori", "mooncake") and r.gpus_per_node == 8
    assert _value(prefill, "--disaggregation-mode") == "prefill" and r.bootstrap_port == 8998
    assert _value(decode, "--disaggregation-mode") == "decode"
    assert _value(prefill, "--tp-size") == _value(decode, "--tp-size") == "8"
    assert _value(decode, "--dp-size") == "8" and "--enable-dp-attention" in decode
    assert "--enable-dp-attention" not in prefill and "--dp-size" not in prefill
    # The decode runs mi355x-tp8-dpattn as it is, less HiCache (prefill only, as InferenceX).
    dpattn = recipes.render_args("mi355x-tp8-dpattn")
    hicache = {"--enable-hierarchical-cache", "--hicache-ratio"}
    for flag in (a for a in dpattn if a.startswith("--") and a not in hicache):
        assert _value(decode, flag) == _value(dpattn, flag), flag
    assert not hicache & set(decode) and hicache <= set(prefill)
    for flag in AGREE:
        assert _value(prefill, flag) == _value(decode, flag) is not None, flag
    assert _value(prefill, "--kv-cache-dtype") == "fp8_e4m3"


def test_1p1d_transfer_backend_and_router():
    mooncake = pd.role_args("mi355x-1p1d", "decode", "mooncake")
    assert _value(mooncake, "--disaggregation-transfer-backend") == "mooncake"
    with pytest.raises(ValueError, match="moves KV with mori, mooncake, not 'nixl'"):
        pd.role_args("mi355x-1p1d", "prefill", "nixl")
    router = pd.router_args("mi355x-1p1d", *PD_URLS)
    assert router[:2] == ["--pd-disaggregation", "--dp-aware"]
    assert router[-5:] == ["--prefill", PD_URLS[0], "8998", "--decode", PD_URLS[1]]
    assert _value(router, "--prefill-policy") == "cache_aware"
    assert _value(router, "--decode-policy") == "round_robin"


@pytest.mark.parametrize(
    "role,flag,value,said",
    [
        ("decode", "--disaggregation-mode", "prefill", "must set --disaggregation-mode decode"),
        ("prefill", "--disaggregation-transfer-backend", "mooncake", "same backend"),
    ],
)
def test_a_1p1d_role_that_contradicts_itself_is_refused(monkeypatch, tmp_path, role, flag,
                                                         value, said):  # fmt: skip
    data = json.loads(recipes.DATA.read_text())
    args = data["disaggregated"]["mi355x-1p1d"]["roles"][role]["args"]
    args[args.index(flag) + 1] = value
    with _recipe_file(monkeypatch, tmp_path, data):
        with pytest.raises(ValueError, match=said):
            pd.recipe("mi355x-1p1d")


# A stand-in for `smg` on PATH: `smg launch ARGS` prints ROUTER and its ARGS, one per line.
FAKE_ROUTER = """#!/bin/sh
[ "$1" = launch ] || exit 3
shift; echo ROUTER; for a in "$@"; do echo "$a"; done; exit 0
"""


def _run_1p1d(tmp_path, *argv: str, **env: str) -> list[str]:
    for name, text in (("sglang-mx", FAKE_CLI), ("smg", FAKE_ROUTER)):
        (tmp_path / name).write_text(text.format(python=sys.executable))
        (tmp_path / name).chmod(0o755)
    full = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", **env}
    for key in ("ROLE", "TRANSFER", "IB_DEVICE", "PORT", "HOST"):
        if key not in env:
            full.pop(key, None)
    script = ROOT / "scripts" / "launch" / PD_SCRIPTS["mi355x-1p1d"]
    out = subprocess.run(["bash", str(script), *argv], env=full, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return [a for a in out.stdout.split("\n") if a]


def test_the_1p1d_script_execs_each_role(tmp_path):
    head = ["SERVE", "--model-path", "/ckpt", "--host", "0.0.0.0", "--port", "30000"]
    got = _run_1p1d(tmp_path, "prefill", MODEL="/ckpt")
    assert got == [*head, *pd.role_args("mi355x-1p1d", "prefill")]
    got = _run_1p1d(tmp_path, MODEL="/ckpt", ROLE="decode", TRANSFER="mooncake",
                    IB_DEVICE="rdma0,rdma1")  # fmt: skip
    want = [*pd.role_args("mi355x-1p1d", "decode", "mooncake"), pd.IB_DEVICE, "rdma0,rdma1"]
    assert got == [*head, *want]
    got = _run_1p1d(tmp_path, "router", PREFILL_URL=PD_URLS[0], DECODE_URL=PD_URLS[1])
    router = pd.router_args("mi355x-1p1d", *PD_URLS)
    assert got == ["ROUTER", "--host", "0.0.0.0", "--port", "8000", *router]
    assert check.router_flag_error(got[1:]) is None
