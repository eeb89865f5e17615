"""Build the Python packages the H200 serving check carries (scripts/gpu_serve_check.sh).

The H200 image (Python 3.12.3, torch 2.11 cu130, triton 3.6.0, transformers 5.17; no network)
lacks SGLang and about fifty packages SGLang's server imports. The repository may travel with
at most 64 MiB in all, and its tracked files are already ~49 MiB, so what is carried is one
solid archive: the wheels listed in scripts/gpu_serve_wheels.txt (downloaded here for CPython
3.12 x86-64 into .whl/src/), installed with pip into a staging folder, trimmed (SGLang's Rust
extensions, multimodal_gen, tests, benchmarks and JIT CUDA sources: nothing the mx_cuda
platform runs), and compressed with xz into .whl/gpu-site.tar.xz. .whl/ is git-ignored.

  python scripts/gpu_serve_assets.py build     # download, stage, trim, compress; rewrite sizes
  python scripts/gpu_serve_assets.py check     # tracked files + archive <= the 64 MiB cap

The list's `stand-in` rows are imported by SGLang but never called when serving text (IPython's
notebook display helpers, soundfile's WAV writer); they are not carried, and
sglang_mx/_cpu_shims supplies stand-ins (gpu_serve_check.sh puts them on PYTHONPATH). Its
`skipped` rows are optional speed-ups the server runs without (uvicorn's httptools parser: it
falls back to h11, which the image has).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIST = ROOT / "scripts" / "gpu_serve_wheels.txt"
WHL = ROOT / ".whl"
SRC = WHL / "src"
ARCHIVE = WHL / "gpu-site.tar.xz"
CAP_BYTES = 64 * 2**20
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (17, 24, 26, 27, 28, 31, 34)]
PLATFORMS += ["manylinux2014_x86_64", "manylinux1_x86_64", "manylinux_2_5_x86_64"]
# Never run on the mx_cuda platform (see the module docstring): SGLang's multimodal generator,
# tests and benchmarks, tvm_ffi's C++ headers and test library (JIT builds only).
TRIM_DIRS = (
    "sglang/multimodal_gen",
    "sglang/test",
    "sglang/benchmark",
    "tvm_ffi/include",
    "tvm_ffi/cmake",
    "tvm_ffi/lib/libtvm_ffi_testing.so",
    "jsonschema/tests",
)
# Inside sglang: no compiled module is needed (its radix tree runs in Python), no JIT source.
TRIM_SUFFIXES = (".so", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".hip", ".md", ".pyc")


@dataclass(frozen=True)
class Row:
    name: str
    version: str
    role: str  # "carried", "stand-in" or "skipped" (optional; SGLang runs without it)
    wheel_bytes: int
    why: str

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


def read_list(path: Path = LIST) -> list[Row]:
    """Rows of `name==version role bytes # why`; blank lines and `#` lines are comments."""
    rows = []
    for line in path.read_text().splitlines():
        body, _, why = line.partition("#")
        if not body.strip():
            continue
        spec, role, size = body.split()
        name, _, version = spec.partition("==")
        if role not in ("carried", "stand-in", "skipped") or not version:
            raise ValueError(f"{path}: bad row {line!r}")
        rows.append(Row(name, version, role, int(size), why.strip()))
    return rows


def write_sizes(rows: list[Row], sizes: dict[str, int], path: Path = LIST) -> None:
    """Rewrite each row's wheel size in place, keeping comments and order."""
    out = []
    for line in path.read_text().splitlines():
        body, sep, why = line.partition("#")
        if body.strip():
            spec, role, _ = body.split()
            name = spec.partition("==")[0]
            line = f"{spec:42} {role:9} {sizes.get(name, 0):>9}  {sep}{why}".rstrip()
        out.append(line)
    path.write_text("\n".join(out) + "\n")


def download(rows: list[Row]) -> dict[str, Path]:
    if SRC.exists():
        shutil.rmtree(SRC)  # one wheel per row: an older download may carry other tags
    SRC.mkdir(parents=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", "3.12", "--implementation", "cp", "-d", str(SRC)]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + [r.spec for r in rows], check=True)
    found = {}
    for r in rows:
        stem = r.name.replace("-", "_").lower() + "-" + r.version + "-"
        hits = [w for w in SRC.glob("*.whl") if w.name.lower().startswith(stem)]
        if len(hits) != 1:
            raise RuntimeError(f"expected one wheel for {r.spec} in {SRC}, found {hits}")
        found[r.name] = hits[0]
    return found


def stage(wheels: list[Path], target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile"]
    cmd += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run(cmd + ["--target", str(target), *map(str, wheels)], check=True)


def trim(target: Path) -> int:
    """Remove what the mx_cuda platform never runs; returns bytes removed."""
    removed = 0
    for rel in TRIM_DIRS:
        d = target / rel
        if d.is_file():
            removed += d.stat().st_size
            d.unlink()
        elif d.exists():
            removed += sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
            shutil.rmtree(d)
    for f in list((target / "sglang").rglob("*")):
        if f.is_file() and f.suffix in TRIM_SUFFIXES:
            removed += f.stat().st_size
            f.unlink()
    for f in list(target.rglob("*.pyi")):  # type stubs: never imported
        removed += f.stat().st_size
        f.unlink()
    for d in (target / "bin",):
        if d.exists():
            shutil.rmtree(d)
    return removed


def compress(target: Path, archive: Path) -> None:
    archive.unlink(missing_ok=True)
    tmp = archive.with_suffix(".tmp")
    with tarfile.open(tmp, "w:xz", preset=9) as tf:
        for p in sorted(target.iterdir()):
            tf.add(p, arcname=p.name)
    tmp.rename(archive)


def tracked_bytes() -> int:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    paths = [ROOT / f.decode() for f in out if f]
    return sum(p.stat().st_size for p in paths if p.is_file())


def archive_problems(archive: Path = ARCHIVE, rows: list[Row] | None = None) -> list[str]:
    """What the archive lacks or should not hold: a dist-info per carried row, SGLang's server
    entry module, and no compiled SGLang module (the trim)."""
    with tarfile.open(archive, "r:xz") as tf:
        names = tf.getnames()
    tops = {n.split("/")[0].lower() for n in names}
    problems = []
    for r in rows or read_list():
        info = f"{r.name.replace('-', '_').lower()}-{r.version}.dist-info"
        if (info in tops) != (r.role == "carried"):
            problems.append(
                f"{r.spec} ({r.role}): dist-info {'missing' if r.role == 'carried' else 'present'}"
            )
    if "sglang/srt/entrypoints/http_server.py" not in names:
        problems.append("sglang/srt/entrypoints/http_server.py missing")
    problems += [f"untrimmed {n}" for n in names if n.startswith("sglang/") and n.endswith(".so")]
    return problems


def check() -> int:
    tracked = tracked_bytes()
    carried = ARCHIVE.stat().st_size if ARCHIVE.exists() else 0
    total = tracked + carried
    print(
        f"tracked {tracked / 2**20:.2f} MiB + {ARCHIVE.name} {carried / 2**20:.2f} MiB = "
        f"{total / 2**20:.2f} MiB of {CAP_BYTES / 2**20:.0f} MiB"
    )
    if not carried:
        print(f"{ARCHIVE} missing: run `python scripts/gpu_serve_assets.py build`")
        return 1
    problems = archive_problems()
    for p in problems:
        print(f"archive: {p}")
    return 0 if total <= CAP_BYTES and not problems else 1


def build() -> int:
    rows = read_list()
    carried = [r for r in rows if r.role == "carried"]
    wheels = download(rows)
    staging = WHL / "staging"
    stage([wheels[r.name] for r in carried], staging)
    removed = trim(staging)
    compress(staging, ARCHIVE)
    shutil.rmtree(staging)
    write_sizes(rows, {n: w.stat().st_size for n, w in wheels.items()})
    digest = hashlib.sha256(ARCHIVE.read_bytes()).hexdigest()
    print(
        f"{len(carried)} wheels carried, {len(rows) - len(carried)} not carried; trimmed "
        f"{removed / 2**20:.1f} MiB; {ARCHIVE} {ARCHIVE.stat().st_size} bytes sha256 {digest}"
    )
    return check()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("build", "check"))
    args = p.parse_args(argv)
    return build() if args.action == "build" else check()


if __name__ == "__main__":
    raise SystemExit(main())
