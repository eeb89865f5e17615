"""GPU figures quoted in the docs are tied to the code they measured.

Every GPU result JSON under docs/results/ carries the `commit` its run stood on. A doc that quotes
such figures says so with a marker (an HTML comment, invisible when rendered) before them:

    <!-- gpu-figures: results/gpu-check-sm90.json kinds=moe,moe_bf16 -->
    <!-- gpu-figures: results/gpu-check-sm90.json kinds=indexer stale -->

A marker covers its line and what follows up to the next marker or heading. This test fails when
a kernel whose figures a marker quotes has changed since the run's commit (its source files,
launcher or shipped table differ: benchmark/gpu_check/provenance.py), unless the marker says
`stale` and the covered text says so in words; it also fails on a `stale` mark whose kernels
have not changed (a claim that is current must not be called stale), on a GPU result without a
commit, and on a line quoting H200 figures that no marker covers.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "gpu_check_provenance", ROOT / "benchmark" / "gpu_check" / "provenance.py"
)
PV = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(PV)

GPU_ARCHS = {"gfx950", "gfx942", "sm90", "sm100"}
MARKER = re.compile(r"<!--\s*gpu-figures:\s*(\S+)\s+kinds=([\w,]+)(\s+stale)?\s*-->")
# A measured figure: a percentage, a time in us, a bandwidth, or a (0.xx) fraction of copy.
FIGURE = re.compile(r"\d(?:[.,]\d+)?\s?(?:%|us\b|GB/s|TB/s)|\(0\.\d+\)|\b0\.\d\d\b")


@dataclass(frozen=True)
class Marker:
    doc: str
    line: int
    result: str  # path under docs/
    kinds: tuple[str, ...]
    stale: bool
    text: str  # the covered lines, marker comments removed


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def _docs() -> list[Path]:
    docs = sorted((ROOT / "docs").glob("*.md"))
    return [ROOT / "README.md", *[d for d in docs if d.name != "kernels-compile.md"]]


def gpu_results() -> dict[str, dict]:
    """docs/results/*.json written by a GPU run (an arch id, not a dry run), by path."""
    out = {}
    for path in sorted((ROOT / "docs" / "results").glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("arch") in GPU_ARCHS and not data.get("dry_run"):
            out[str(path.relative_to(ROOT / "docs"))] = data
    return out


def result_kinds(data: dict) -> set[str]:
    kinds = {r["kind"] for r in data.get("rows", []) if "kind" in r}
    return kinds or {data["kind"]}


def markers(path: Path) -> tuple[list[Marker], list[tuple[int, str]]]:
    """(markers with the text each covers, figure lines no marker covers) of one doc."""
    lines = path.read_text().splitlines()
    found: list[Marker] = []
    uncovered: list[tuple[int, str]] = []
    open_marker: dict | None = None
    title = next((ln for ln in lines if ln.startswith("# ")), "")
    heading = ""
    quotes_all = "GPU check results" in title  # the generated results page quotes throughout

    def close():
        if open_marker is not None:
            body = open_marker.pop("body")
            found.append(Marker(**open_marker, text="\n".join(body)))

    for no, line in enumerate(lines, 1):
        if line.startswith("#"):
            heading = line
            close()
            open_marker = None
        m = MARKER.search(line)
        if m:
            close()
            open_marker = {"doc": path.name, "line": no, "result": m[1],
                           "kinds": tuple(m[2].split(",")), "stale": bool(m[3]),
                           "body": []}  # fmt: skip
        if open_marker is not None:
            open_marker["body"].append(MARKER.sub("", line))
            continue
        gpu_context = quotes_all or "H200" in line or "H200" in heading
        if gpu_context and FIGURE.search(line):
            uncovered.append((no, line.strip()))
    close()
    return found, uncovered


def all_markers() -> list[Marker]:
    return [m for doc in _docs() for m in markers(doc)[0]]


def _history_or_skip(commit: str) -> None:
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode == 0:
        return
    shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip()
    if shallow == "true" or _git("rev-parse", "HEAD").returncode != 0:
        pytest.skip(
            f"commit {commit[:12]} is not in this clone (shallow or no git history): "
            "fetch the full history (git fetch --unshallow) to check GPU figures"
        )
    pytest.fail(f"commit {commit} of a GPU result is not in the repository's history")


def _meaning(path: str, text: str | None):
    """What a source file means, formatting aside: Python's AST (comments and layout dropped,
    docstrings kept), a JSON file's data; None when the file does not exist."""
    if text is None:
        return None
    if path.endswith(".py"):
        return ast.dump(ast.parse(text))
    if path.endswith(".json"):
        return json.loads(text)
    return text


def changed_since(commit: str, paths: list[str]) -> list[str]:
    """Source files (of `paths`) whose meaning differs between `commit` and the checkout (a
    reformat does not count), each with the commits that touched it."""
    diff = _git("diff", "--name-only", commit, "--", *paths)
    assert diff.returncode == 0, diff.stderr
    out = []
    for name in diff.stdout.split():
        old = _git("show", f"{commit}:{name}")
        now = ROOT / name
        if _meaning(name, old.stdout if old.returncode == 0 else None) == _meaning(
            name, now.read_text() if now.exists() else None
        ):
            continue
        log = _git("log", "--format=%h %s", f"{commit}..HEAD", "--", name).stdout.splitlines()
        out.append(f"{name} ({'; '.join(c[:90] for c in log) or 'uncommitted edit'})")
    return out


def test_gpu_results_carry_their_commit():
    results = gpu_results()
    assert results, "no GPU results under docs/results/: the scan is broken"
    for path, data in results.items():
        commit = data.get("commit")
        assert commit and re.fullmatch(r"[0-9a-f]{7,40}", commit), (
            f"docs/{path} carries no commit: GPU figures must name the code they measured "
            "(GPU_CHECK_COMMIT=$(git rev-parse HEAD) when the device copy has no .git)"
        )
        for kind in result_kinds(data):
            assert kind in PV.KERNEL_SOURCES, f"docs/{path}: no kernel sources for kind {kind}"


def test_every_quoted_h200_figure_is_marked():
    bad = [f"{doc.name}:{no}: {text[:120]}" for doc in _docs() for no, text in markers(doc)[1]]
    assert not bad, (
        "lines quote GPU figures without a `<!-- gpu-figures: results/FILE kinds=K -->` marker "
        "naming the run they come from:\n" + "\n".join(bad)
    )
    assert all_markers(), "no doc marks its GPU figures: the scan is broken"


def test_quoted_gpu_figures_are_current_or_marked_stale():
    results = gpu_results()
    problems = []
    for m in all_markers():
        where = f"{m.doc}:{m.line} ({m.result} kinds={','.join(m.kinds)})"
        data = results.get(m.result)
        assert data is not None, f"{where}: no GPU result docs/{m.result}"
        unknown = set(m.kinds) - result_kinds(data)
        assert not unknown, f"{where}: {m.result} holds no rows of kind {sorted(unknown)}"
        _history_or_skip(data["commit"])
        paths = sorted({p for k in m.kinds for p in PV.sources(k, data["arch"])})
        changed = changed_since(data["commit"], paths)
        if changed and not m.stale:
            problems.append(
                f"{where}: measured at {data['commit'][:12]}, since changed: "
                f"{', '.join(changed)}. Re-measure, or mark the figure stale (marker + words)"
            )
        elif m.stale and not changed:
            problems.append(f"{where}: marked stale, but none of its kernel sources changed "
                            f"since {data['commit'][:12]}: drop the mark")  # fmt: skip
        elif m.stale and "stale" not in m.text.lower():
            problems.append(f"{where}: marked stale only in the comment; say it in the text")
    assert not problems, "\n".join(problems)


def test_the_generated_results_page_marks_every_figure(tmp_path):
    """benchmark/gpu_check/run.py writes docs/gpu-check-results.md with a marker per section, so a
    fresh page passes the coverage check above without hand edits."""
    here = str(ROOT / "benchmark" / "gpu_check")
    spec = importlib.util.spec_from_file_location("gpu_check_run", Path(here) / "run.py")
    run = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(run)
    finally:
        while here in sys.path:  # run.py puts its folder first for its sibling modules
            sys.path.remove(here)
    report = json.loads((ROOT / "docs" / "results" / "gpu-check-sm90.json").read_text())
    page = tmp_path / "gpu-check-results.md"
    page.write_text(run.markdown(report))
    found, uncovered = markers(page)
    assert not uncovered, uncovered
    assert {k for m in found for k in m.kinds} == result_kinds(report)
    assert {m.result for m in found} == {"results/gpu-check-sm90.json"}
