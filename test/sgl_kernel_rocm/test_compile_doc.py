"""docs/kernels-compile.md is generated from docs/compile/triton-<version>.json, and CI fails when
regenerating them changes either (.ci/run: `git diff --exit-code`). So the committed page must
be exactly what the committed JSON renders to, and a rerun on unchanged kernels (a clean clone:
no result cache, another day, other compile times) must rewrite both byte for byte."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from sgl_kernel_rocm.compile_check.doc import VOLATILE, render, write_doc

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_committed_page_is_what_the_committed_json_renders():
    assert (DOCS / "kernels-compile.md").read_text() == render(DOCS / "compile"), (
        "docs/kernels-compile.md differs from its JSON: regenerate with make compile-check "
        "(both Tritons) instead of editing it"
    )


def _rerun_payload(path: Path, date: str = "2031-01-02") -> dict:
    """What a later run on the same kernels hands write_doc: same facts, fresh volatile fields."""
    data = json.loads(path.read_text())
    for n, row in enumerate(data["rows"]):
        row["result"].update(seconds=1.5 + n, cached=bool(n % 2))
    data["stamp"] = {**data["stamp"], "date": date, "host": "another box, Python 3.99"}
    return data


def test_rerun_on_unchanged_kernels_rewrites_the_same_bytes(tmp_path):
    shutil.copytree(DOCS / "compile", tmp_path / "compile")
    doc = tmp_path / "kernels-compile.md"
    for path in sorted((DOCS / "compile").glob("triton-*.json")):
        stored = json.loads(path.read_text())
        assert not any(k in r["result"] for r in stored["rows"] for k in VOLATILE), path
        write_doc(doc, _rerun_payload(path))
        assert (tmp_path / "compile" / path.name).read_bytes() == path.read_bytes(), path.name
    assert doc.read_bytes() == (DOCS / "kernels-compile.md").read_bytes()


def test_changed_results_change_the_files(tmp_path):
    """The other side: a changed kernel fact shows in the diff (new date, new figures)."""
    shutil.copytree(DOCS / "compile", tmp_path / "compile")
    doc = tmp_path / "kernels-compile.md"
    path = sorted((DOCS / "compile").glob("triton-*.json"))[0]
    payload = _rerun_payload(path)
    row = next(r for r in payload["rows"] if r["result"].get("ok"))
    row["result"]["shared_bytes"] += 4096
    write_doc(doc, payload)
    stored = json.loads((tmp_path / "compile" / path.name).read_text())
    assert stored["stamp"]["date"] == "2031-01-02"
    assert doc.read_text() != (DOCS / "kernels-compile.md").read_text()
    assert f"## Triton {stored['stamp']['triton']} (2031-01-02)" in doc.read_text()


def test_ci_checks_the_regenerated_page():
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [ln for ln in lines if ln.startswith(("make ", "if ! git diff"))]
    assert steps[:3] == ["make compile-check TRITON=3.6.0", "make compile-check",
                         "if ! git diff --exit-code --stat docs/kernels-compile.md docs/compile/; then"]  # fmt: skip  # noqa: E501
    assert steps[-1] == "make test"
