"""Make our CPU stand-ins (`_cpu_shims`) visible to every Python process of a venv, not only the
ones our plugin prepares, so SGLang's other entry points (`python -m sglang.benchmark.serving`,
`sglang.bench_one_batch_server`, ...) import on a CPU box.

`python -m sglang_mx.seam.venv_shims [SITE_DIR]` writes one `.pth` file into the venv's
site-packages (`scripts/setup.sh` does). Python runs its one line at start-up: it appends a
stand-in's folder to `sys.path` only when the real package cannot be found, so a real
`torchvision` or `sgl_kernel` (a GPU image) always wins, and appending keeps anything installed
later ahead of the stand-in.
"""

from __future__ import annotations

import argparse
import sysconfig
from pathlib import Path

from sglang_mx.seam.cpu_setup import SHIMS

PTH_NAME = "sglang_mx_cpu_shims.pth"


def pth_line() -> str:
    """The `.pth` line: no sglang_mx import, no torch, one `find_spec` per stand-in."""
    pairs = ", ".join(f"({name!r}, {str(folder)!r})" for name, folder in sorted(SHIMS.items()))
    # site.py exec()s the line inside a function: the generator sees only builtins and site's
    # globals, hence __import__ rather than names bound on the line.
    return (
        "import sys; "
        f"sys.path.extend(d for n, d in ({pairs},) "
        "if __import__('importlib.util').util.find_spec(n) is None "
        "and d not in __import__('sys').path)\n"
    )


def install(site_dir: str | Path | None = None) -> Path:
    target = Path(site_dir or sysconfig.get_paths()["purelib"]) / PTH_NAME
    target.write_text(pth_line())
    return target


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("site_dir", nargs="?", help="site-packages to write into (default: this venv)")
    args = p.parse_args(argv)
    print(install(args.site_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
