"""The import graph of our two packages: no circles, at any floor, no module importing a
package it sits inside, and the rooms kept in order (capacity, then measure, under bench and plan;
plan never imports bench; bench's own rooms load < agents < run < claims < report < cli). Read
from the source (ast), every import counted, lazy ones inside functions included: a lazy import
is still a dependency, only a later one."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "sglang_mx": ROOT / "python",
    "sgl_kernel_rocm": ROOT / "sgl-kernel-rocm",
    "sglang_mx_lab": ROOT / "lab",
}
PRODUCT = ("sglang_mx", "sgl_kernel_rocm")  # what serving nodes install; the lab sits above it


def modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py of `package` (a package is its __init__)."""
    base = PACKAGES[package]
    out = {}
    for path in sorted((base / package).rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module `name` starts with (an imported function resolves to its
    module), or None for a module of someone else."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return None


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = mod.split(".")
                    anchor = anchor[: len(anchor) - node.level + (1 if is_pkg else 0)]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = _resolve(name, known)
                if target is not None and target != mod:
                    graph[mod].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(graph) | {w for ws in graph.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def floor_graph(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """Imports between the direct children of `package` (each child stands for everything
    below it); imports inside one child are that child's own floor."""
    prefix = package + "."

    def child(mod: str) -> str | None:
        if not mod.startswith(prefix):
            return None
        return prefix + mod[len(prefix) :].split(".")[0]

    out: dict[str, set[str]] = defaultdict(set)
    for src, targets in graph.items():
        for dst in targets:
            a, b = child(src), child(dst)
            if a and b and a != b:
                out[a].add(b)
    return out


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_circles_at_any_floor(package):
    known = modules(package)
    graph = import_graph(known)
    found = [("modules", c) for c in cycles(graph)]
    for pkg, path in known.items():
        if path.name == "__init__.py":
            found += [(pkg, c) for c in cycles(floor_graph(graph, pkg))]
    assert not found, "import circles:\n" + "\n".join(f"  {f}: {' <-> '.join(c)}" for f, c in found)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_climbs_back_up(package):
    """A module never imports a package it belongs to: a package's __init__ may use its
    modules, never the other way round."""
    known = modules(package)
    graph = import_graph(known)
    up = sorted(
        f"{src} -> {dst}"
        for src, targets in graph.items()
        for dst in targets
        if src.startswith(dst + ".") and known[dst].name == "__init__.py"
    )
    assert not up, "imports climbing up:\n  " + "\n  ".join(up)


def test_the_checker_sees_a_planted_circle(tmp_path, monkeypatch):
    """The checks above cannot pass by reading nothing: a planted circle is found."""
    pkg = tmp_path / "planted"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from planted import a\n")
    (pkg / "a.py").write_text("def f():\n    from planted.b import g\n")
    (pkg / "b.py").write_text("from . import a\n")
    monkeypatch.setitem(PACKAGES, "planted", tmp_path)
    known = modules("planted")
    graph = import_graph(known)
    assert cycles(graph) == [["planted.a", "planted.b"]]
    assert graph["planted.sub"] == {"planted.a"}
    with pytest.raises(AssertionError, match="planted.a <-> planted.b"):
        test_no_import_circles_at_any_floor("planted")
    with pytest.raises(AssertionError, match="planted.sub.x -> planted"):
        (pkg / "sub" / "x.py").write_text("import planted\n")
        test_no_import_climbs_back_up("planted")


def lab_imports(package: str) -> list[str]:
    """`module -> sglang_mx_lab...` for each import of the lab in a product package."""
    own = modules(package)
    graph = import_graph({**modules("sglang_mx_lab"), **own})
    return sorted(
        f"{mod} -> {target}"
        for mod in own
        for target in graph.get(mod, ())
        if target.split(".")[0] == "sglang_mx_lab"
    )


@pytest.mark.parametrize("package", PRODUCT)
def test_the_product_never_imports_the_lab(package):
    """Issue 43: test support and the planner's validation lab live in sglang_mx_lab (lab/); no
    module of a product package imports it, lazily or not."""
    found = lab_imports(package)
    assert not found, "product modules importing the lab:\n  " + "\n  ".join(found)


def test_the_lab_check_sees_a_planted_import(tmp_path, monkeypatch):
    pkg = tmp_path / "planted"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ok.py").write_text("import sglang_mx.plan\n")
    (pkg / "bad.py").write_text("def f():\n    from sglang_mx_lab.testing import server\n")
    monkeypatch.setitem(PACKAGES, "planted", tmp_path)
    assert lab_imports("planted") == ["planted.bad -> sglang_mx_lab.testing.server"]


def test_the_capacity_model_stands_below_bench_and_plan():
    """Issue 43: sglang_mx.capacity imports nothing of ours outside itself, and plan imports
    no module of bench that capacity now holds (there are none left there to import)."""
    known = modules("sglang_mx")
    graph = import_graph(known)
    up = sorted(
        f"{src} -> {dst}"
        for src, targets in graph.items()
        if src.startswith("sglang_mx.capacity")
        for dst in targets
        if not dst.startswith("sglang_mx.capacity")
    )
    assert not up, "capacity importing above it:\n  " + "\n  ".join(up)
    assert {"hardware", "modelspec", "layout", "roofline", "cost", "tables", "workload"} & {
        m.split(".")[-1] for m in known if m.startswith("sglang_mx.bench.")
    } == set()


# Issue 60: the rooms of the measuring side, each importing only what sits below it. measure
# (SLOs, request results, traces, summaries, sweeps, stamps) is under both bench and plan, and
# plan, a simulation of a deployment, never reaches into bench, the harness that measures one.
BELOW = {
    "sglang_mx.plan": ("sglang_mx.bench",),
    "sglang_mx.measure": ("sglang_mx.bench", "sglang_mx.plan"),
}


def forbidden_imports(package: str, below: dict[str, tuple[str, ...]]) -> list[str]:
    """`src -> dst` for each import, lazy ones included, from a module under a key of `below`
    into a package that key's entry says sits above it."""
    graph = import_graph(modules(package))

    def under(mod: str, pkg: str) -> bool:
        return mod == pkg or mod.startswith(pkg + ".")

    return sorted(
        f"{src} -> {dst}"
        for src, targets in graph.items()
        for room, above in below.items()
        if under(src, room)
        for dst in targets
        if any(under(dst, a) for a in above)
    )


def test_plan_never_imports_bench_and_measure_stands_below_both():
    """Issue 60: plan imports nothing from bench; what both need lives in measure, which imports
    neither."""
    found = forbidden_imports("sglang_mx", BELOW)
    assert not found, "imports climbing over a room:\n  " + "\n  ".join(found)
    known = modules("sglang_mx")
    assert {"metrics", "summary", "tracegen", "sweep", "stamp", "compare"} & {
        m.split(".")[-1] for m in known if m.startswith("sglang_mx.bench.")
    } == set(), "a module of measure is back in bench"


def test_the_room_check_sees_a_planted_plan_to_bench_import(tmp_path, monkeypatch):
    pkg = tmp_path / "planted"
    for room in ("bench", "plan", "measure"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "bench" / "runner.py").write_text("from planted.measure.metrics import Slo\n")
    (pkg / "measure" / "metrics.py").write_text("Slo = None\n")
    (pkg / "plan" / "ok.py").write_text("from planted.measure import metrics\n")
    (pkg / "plan" / "bad.py").write_text("def f():\n    from planted.bench.runner import run\n")
    (pkg / "measure" / "bad.py").write_text("import planted.plan.ok\n")
    monkeypatch.setitem(PACKAGES, "planted", tmp_path)
    rooms = {
        "planted.plan": ("planted.bench",),
        "planted.measure": ("planted.bench", "planted.plan"),
    }
    assert forbidden_imports("planted", rooms) == [
        "planted.measure.bad -> planted.plan.ok",
        "planted.plan.bad -> planted.bench.runner",
    ]
    monkeypatch.setitem(BELOW, "sglang_mx.plan", ("sglang_mx.measure",))
    with pytest.raises(AssertionError, match="sglang_mx.plan.sim -> sglang_mx.measure"):
        test_plan_never_imports_bench_and_measure_stands_below_both()


# Issue 60: bench's rooms by job, lowest first. A room imports only rooms before it in this order
# (measure and capacity sit below all of them); every module of bench lives in one of them.
BENCH_FLOORS = ("load", "agents", "run", "claims", "report", "cli")


def room_climbs(package: str, floors: tuple[str, ...]) -> list[str]:
    """`src -> dst` for each import, lazy ones included, from one room (a direct child of
    `package`) into a room above it in `floors`, and `loose: child` for each child of `package`
    that is in no room."""
    known = modules(package.split(".")[0])
    graph = import_graph(known)
    rank = {f"{package}.{room}": i for i, room in enumerate(floors)}
    prefix = package + "."
    found = [
        f"loose: {child}"
        for child in sorted(known)
        if child.startswith(prefix)
        and child.count(".") == package.count(".") + 1
        and child not in rank
    ]
    for src, targets in sorted(floor_graph(graph, package).items()):
        for dst in sorted(targets):
            if src not in rank or dst not in rank or rank[dst] >= rank[src]:
                found.append(f"{src} -> {dst}")
    return found


def test_bench_rooms_stand_in_floors():
    """Issue 60: load < agents < run < claims < report < cli; no import between bench's rooms goes
    up, so there is no circle between them either, and no module sits loose at bench's top."""
    found = room_climbs("sglang_mx.bench", BENCH_FLOORS)
    assert not found, "bench rooms out of order:\n  " + "\n  ".join(found)


def test_the_floor_check_sees_a_planted_climb_and_a_loose_module(tmp_path, monkeypatch):
    pkg = tmp_path / "planted"
    for room in ("low", "mid", "top"):
        (pkg / "tool" / room).mkdir(parents=True)
        (pkg / "tool" / room / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "tool" / "__init__.py").write_text("")
    (pkg / "tool" / "low" / "base.py").write_text("X = 1\n")
    (pkg / "tool" / "mid" / "use.py").write_text("from planted.tool.low.base import X\n")
    (pkg / "tool" / "top" / "cmd.py").write_text("from planted.tool.mid import use\n")
    monkeypatch.setitem(PACKAGES, "planted", tmp_path)
    floors = ("low", "mid", "top")
    assert room_climbs("planted.tool", floors) == []
    (pkg / "tool" / "low" / "bad.py").write_text("def f():\n    from planted.tool.top import cmd\n")
    (pkg / "tool" / "stray.py").write_text("")
    assert room_climbs("planted.tool", floors) == [
        "loose: planted.tool.stray",
        "planted.tool.low -> planted.tool.top",
    ]
    with pytest.raises(AssertionError, match="sglang_mx.bench.cli -> sglang_mx.bench.report"):
        monkeypatch.setitem(
            globals(), "BENCH_FLOORS", ("load", "agents", "run", "claims", "cli", "report")
        )
        test_bench_rooms_stand_in_floors()


def private_imports(package: str) -> list[str]:
    """`from M import _name` where `_name` is private to a module the importer does not share a
    package with. A package's private modules (`_common`, a wrapper's `_<op>_kernels` body) are
    its own: its modules may import them and their names; nothing outside it may."""
    known = modules(package)
    found = []
    for mod, path in known.items():
        is_pkg = path.name == "__init__.py"
        own_pkg = mod if is_pkg else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                anchor = mod.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_pkg else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if not alias.name.startswith("_") or alias.name.startswith("__"):
                    continue
                target = f"{base}.{alias.name}"
                # the private module itself, or a name defined in a private module
                owner = (
                    base
                    if target in known
                    else base.rpartition(".")[0]
                    if base.rpartition(".")[2].startswith("_")
                    else None
                )
                if owner is None or not (own_pkg == owner or own_pkg.startswith(owner + ".")):
                    found.append(f"{mod}: from {base} import {alias.name}")
    return sorted(found)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_private_name_crosses_a_module(package):
    """Issue 43: no module imports another module's private name; only a package's own modules
    import its private modules (moe/_kernels, attention/_<op>_kernels, attention/_common)."""
    found = private_imports(package)
    assert not found, "private names imported across modules:\n  " + "\n  ".join(found)


def test_the_private_check_sees_planted_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "planted"
    (pkg / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "sub/__init__.py", "sub/_body.py", "sub/ok.py"):
        (pkg / name).write_text("")
    (pkg / "sub" / "ok.py").write_text("from planted.sub._body import _kernel\n")
    (pkg / "b.py").write_text("from planted.a import _helper\nfrom planted.sub import _body\n")
    monkeypatch.setitem(PACKAGES, "planted", tmp_path)
    assert private_imports("planted") == [
        "planted.b: from planted.a import _helper",
        "planted.b: from planted.sub import _body",
    ]
