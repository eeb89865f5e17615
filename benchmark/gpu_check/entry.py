"""What every GPU-check entry point (run.py, sweep_moe.py) takes: a time budget, an output
folder and --dry-run, which must select the Triton interpreter before torch or triton import."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path


def parse(
    doc: str,
    budget_s: float,
    argv: list[str] | None,
    more: Callable[[argparse.ArgumentParser], None],
) -> argparse.Namespace:
    """Parse the shared flags plus those `more` adds; --dry-run sets TRITON_INTERPRET=1."""
    p = argparse.ArgumentParser(description=doc.split("\n")[0])
    p.add_argument("--budget-s", type=float, default=budget_s)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dry-run", action="store_true", help="CPU, Triton interpreter, tiny shapes")
    more(p)
    args = p.parse_args(argv)
    if args.dry_run:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return args
