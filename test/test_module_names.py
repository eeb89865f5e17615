"""Issue 60: one name, one job. No two modules of sglang_mx share a file name unless they do the
same job for sibling packages (the allow-list below, each entry with that job stated and
checked), and no two public classes share a name, so a name in a traceback or a review points to
one place."""

from __future__ import annotations

import ast
import importlib
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "sglang_mx"

# file name -> the one job every module of that name does
SAME_JOB = {
    "__init__.py": "a package",
    "cli.py": "a package's `sglang-mx` subcommand (register(subparsers), named in cli/main.py)",
}


def duplicate_basenames(paths: list[Path], allowed: dict[str, str]) -> list[str]:
    """`name: path, path, ...` for each file name that two or more of `paths` share outside
    `allowed`."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        by_name[path.name].append(str(path))
    return sorted(
        f"{name}: {', '.join(sorted(where))}"
        for name, where in by_name.items()
        if len(where) > 1 and name not in allowed
    )


def duplicate_public_classes(paths: list[Path]) -> list[str]:
    """`Class: path, path, ...` for each public top-level class name defined in two or more of
    `paths`."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                by_name[node.name].append(str(path))
    return sorted(
        f"{name}: {', '.join(sorted(where))}" for name, where in by_name.items() if len(where) > 1
    )


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_no_two_modules_share_a_name_unless_they_share_a_job():
    found = duplicate_basenames(_sources(), SAME_JOB)
    assert not found, "modules sharing a name, not a job:\n  " + "\n  ".join(found)


def test_every_cli_module_is_a_subcommand():
    """The allow-list's cli.py is honest: each one is a subcommand the `sglang-mx` parser names."""
    subcommands = set(importlib.import_module("sglang_mx.cli.main").SUBCOMMANDS.values())
    for path in PACKAGE.rglob("cli.py"):
        dotted = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        assert dotted in subcommands, f"{dotted}: a cli.py that is no `sglang-mx` subcommand"


def test_no_two_public_classes_share_a_name():
    found = duplicate_public_classes(_sources())
    assert not found, "public classes sharing a name:\n  " + "\n  ".join(found)


def test_the_name_checks_see_planted_duplicates(tmp_path):
    """The checks above cannot pass by reading nothing: a planted second report.py, a second
    Verdict class, and a second cli.py (allowed) among the real sources."""
    real = _sources()
    assert duplicate_basenames(real, SAME_JOB) == []
    planted = tmp_path / "sglang_mx" / "tool"
    planted.mkdir(parents=True)
    (planted / "report.py").write_text("class Verdict:\n    pass\n")
    (planted / "cli.py").write_text("class _Private:\n    pass\n")
    extra = [planted / "report.py", planted / "cli.py"]
    found = duplicate_basenames([*real, *extra], SAME_JOB)
    both = sorted([str(PACKAGE / "plan" / "report.py"), str(planted / "report.py")])
    assert found == [f"report.py: {', '.join(both)}"]
    assert [f.split(":")[0] for f in duplicate_public_classes([*real, *extra])] == ["Verdict"]
