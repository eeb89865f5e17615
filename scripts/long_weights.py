"""Keep the long-context trainer's weights between sessions without carrying them (issue 59).

A fresh checkout holds only what git holds: `build/` (where the trainer writes) is gone, and the
tracked tree may not grow past the device tool's 64 MiB travel cap (scripts/gpu_serve_assets.py),
so a second 14 MB model cannot sit in it. `stash` commits a weights directory's files under
`lab/long-weights/` and removes them in the next commit: the weights live in main's history
(recoverable by commit) and never in the tree that travels. `restore` writes them back.

  python scripts/long_weights.py stash build/long-c "sitting C: sparse 4k/8k with answer weight"
  python scripts/long_weights.py restore <commit> build/long-c
  python scripts/long_weights.py list
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STASH = "lab/long-weights"
FILES = ("model.safetensors", "config.json", "long-training.json")
TOKENIZER = ROOT / "python" / "sglang_mx" / "assets" / "tiny-glm5-bf16"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def git(*args: str, root: Path = ROOT, binary: bool = False):
    out = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    return out.stdout if binary else out.stdout.decode().strip()


def stash(src: Path, label: str, root: Path = ROOT) -> str:
    """Commit `src`'s weights, then their removal; the first commit's id (what restore takes)."""
    missing = [name for name in FILES if not (src / name).is_file()]
    if missing:
        raise SystemExit(f"{src} lacks {', '.join(missing)}: not a trainer output directory")
    if git("diff", "--cached", "--name-only", root=root):
        raise SystemExit("the index holds staged changes: commit or unstage them first")
    dest = root / STASH
    dest.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copy2(src / name, dest / name)
    git("add", "-f", STASH, root=root)
    git("commit", "-q", "-m", f"weights (issue 59): {label}", root=root)
    sha = git("rev-parse", "HEAD", root=root)
    git("rm", "-q", "-r", STASH, root=root)
    git("commit", "-q", "-m", f"weights {sha[:12]} kept in history only (scripts/long_weights.py "
        f"restore {sha[:12]} DIR)", root=root)  # fmt: skip
    return sha


def restore(sha: str, out: Path, root: Path = ROOT) -> None:
    """Write the weights stashed at `sha` to `out`, with the bundled model's tokenizer."""
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (out / name).write_bytes(git("show", f"{sha}:{STASH}/{name}", root=root, binary=True))
    for name in TOKENIZER_FILES:
        shutil.copy2(TOKENIZER / name, out / name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stash")
    s.add_argument("src", type=Path)
    s.add_argument("label")
    r = sub.add_parser("restore")
    r.add_argument("sha")
    r.add_argument("out", type=Path)
    sub.add_parser("list")
    args = ap.parse_args()
    if args.cmd == "stash":
        print(stash(args.src, args.label))
    elif args.cmd == "restore":
        restore(args.sha, args.out)
        print(f"restored {args.sha} to {args.out}")
    else:
        print(git("log", "--diff-filter=A", "--format=%H %cI %s", "--", f"{STASH}/{FILES[0]}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
