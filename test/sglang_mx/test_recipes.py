"""Launch recipes as data (sglang_mx.recipes, python/sglang_mx/recipes/mi355x.json): the shell
recipes exec exactly the data's flags, the CPU scaling names every substitution, and a recipe that
sets a flag twice is refused. Starting each recipe's CPU flag set: test_layouts.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_mx import recipes

ROOT = Path(__file__).parents[2]
SCRIPTS = {
    "mi355x-tp8": "mi355x-tp8.sh",
    "mi355x-tp8-dpattn": "mi355x-tp8-dpattn.sh",
    "mi355x-tp4x2-router": "mi355x-tp4x2-router.sh",
}
# A stand-in for `sglang-mx` on PATH: `recipe` goes to the real CLI, `serve` prints its argv
# (one per line) and exits; the router launch is skipped the same way.
FAKE_CLI = """#!{python}
import sys
if sys.argv[1] == "serve":
    print("SERVE", *sys.argv[2:], sep="\\n")
    sys.exit(0)
from sglang_mx.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_every_recipe_has_a_script_and_the_public_flags():
    assert set(recipes.names()) == set(SCRIPTS)
    for name in recipes.names():
        args = recipes.render_args(name)
        # What every public GLM-5.x MXFP4 recipe runs (CONTEXT section 14).
        assert args[args.index("--kv-cache-dtype") + 1] == "fp8_e4m3", name
        assert "--speculative-algorithm" in args and "--disable-custom-all-reduce" in args
        assert args[args.index("--tool-call-parser") + 1] == "glm47"
        assert args[args.index("--reasoning-parser") + 1] == "glm45"
    eagle = recipes.render_args("mi355x-tp4x2-router")
    got = [eagle[eagle.index(f) + 1] for f in ("--speculative-num-steps",
           "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--tp-size",
           "--ep-size")]  # fmt: skip
    assert got == ["5", "1", "6", "4", "4"] and recipes.recipe("mi355x-tp4x2-router").engines == 2


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_the_shell_recipe_execs_the_data_flags(name, tmp_path):
    fake = tmp_path / "sglang-mx"
    fake.write_text(FAKE_CLI.format(python=sys.executable))
    fake.chmod(0o755)
    (tmp_path / "python").symlink_to(sys.executable)  # the router line, if reached, is not run
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "MODEL": "/ckpt"}
    script = ROOT / "scripts" / "launch" / SCRIPTS[name]
    out = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    served = [block.split("\n") for block in out.stdout.split("SERVE\n")[1:]]
    assert served, out.stderr
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
        assert "--enable-hierarchical-cache" in changed and "--enable-hierarchical-cache" not in cpu
        assert all(s.why for s in subs)
        # Flags not substituted are passed exactly as the recipe has them.
        kept = [a for a in node if a.startswith("--") and a not in changed]
        for flag in kept:
            i, j = node.index(flag), cpu.index(flag)
            assert node[i + 1 : i + 2] == cpu[j + 1 : j + 2] or node[i + 1].startswith("--")
        assert cpu[cpu.index("--tp-size") + 1] == "2"


def test_a_flag_set_twice_is_refused(monkeypatch, tmp_path):
    data = json.loads(recipes.DATA.read_text())
    data["recipes"]["mi355x-tp8"]["args"] += ["--tp-size", "4"]
    bad = tmp_path / "recipes.json"
    bad.write_text(json.dumps(data))
    monkeypatch.setattr(recipes, "DATA", bad)
    recipes._data.cache_clear()
    try:
        with pytest.raises(ValueError, match="--tp-size more than once"):
            recipes.recipe("mi355x-tp8")
    finally:
        recipes._data.cache_clear()
    with pytest.raises(KeyError, match="no launch recipe 'nope'"):
        recipes.recipe("nope")
