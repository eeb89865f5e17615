"""Build the Python packages the H200 serving check carries (scripts/gpu_serve_check.sh).

The H200 image (Python 3.12.3, torch 2.11 cu130, triton 3.6.0, transformers 5.17; no network)
lacks SGLang and about fifty packages SGLang's server imports. The repository may travel with
at most 64 MiB in all, and its tracked files are already ~46 MiB, so what is carried is one
solid archive: the wheels listed in scripts/gpu_serve_wheels.txt (downloaded here for CPython
3.12 x86-64 into .whl/src/), installed with pip into a staging folder, trimmed (SGLang's Rust
extensions, multimodal_gen, tests, benchmarks, JIT CUDA and C++ sources, wheel RECORDs, the
subtrees scripts/gpu_serve_trim.txt prunes: nothing the mx_cuda platform runs), and compressed
with xz -9e into .whl/gpu-site.tar.xz. .whl/ is git-ignored; the archive's bytes and sha256 are
recorded in the list's `archive` row, so the travel-size check runs from a clean clone too.

  python scripts/gpu_serve_assets.py build     # download, stage, trim, compress; rewrite sizes
  python scripts/gpu_serve_assets.py check     # tracked + archive <= 64 MiB less MARGIN_BYTES

The list's `stand-in` rows are imported by SGLang but never called when serving text (IPython's
notebook display helpers, soundfile's WAV writer); they are not carried, and
sglang_mx/_cpu_shims supplies stand-ins (gpu_serve_check.sh puts them on PYTHONPATH). Its
`skipped` rows are optional speed-ups the server runs without (uvicorn's httptools parser: it
falls back to h11, which the image has).
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
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
PRUNE = ROOT / "scripts" / "gpu_serve_trim.txt"
CAP_BYTES = 64 * 2**20  # the device tool's cap on what travels (working tree + carried paths)
MARGIN_BYTES = 3 * 2**19  # 1.5 MiB: room for a few commits between a build and a device run
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
    "tvm_ffi/3rdparty",  # dlpack headers, libbacktrace C sources: JIT builds only
    "tvm_ffi/src",  # C++ sources: JIT builds only
    "jsonschema/tests",
    "jsonschema/benchmarks",
    "referencing/tests",
    "dill/tests",
    "gguf/scripts",  # gguf's command-line tools
    "pydantic/mypy.py",  # the mypy plugin
    "tvm_ffi/stub",  # stub generator (a developer tool)
    "sglang/kernels/jit/benchmark",
    # Read only by compressed-tensors' Hadamard transforms (transform_config checkpoints); no
    # SGLang module imports compressed_tensors.transform, and our models are Quark or MXFP4.
    "compressed_tensors/transform/utils/hadamards.safetensors",
)
# In every *.dist-info: pip's install record and SBOMs (nothing at run time reads them; METADATA,
# entry_points.txt and licenses stay, METADATA without its long description: the body after the
# headers, a package's README / changelog, which importlib.metadata never parses).
TRIM_DIST_INFO = ("RECORD", "sboms")
# Inside sglang: no compiled module is needed (its radix tree runs in Python), no JIT source.
# .co / .s: AMD GPU code objects and assembly.
TRIM_SUFFIXES = (".so", ".cu", ".cuh", ".h", ".hpp", ".cpp", ".hip", ".md", ".pyc", ".co", ".s")
# SGLang's tuned kernel configs are files named for the GPU they were tuned on; the H200 reads only
# its own (the name is built from torch.cuda.get_device_name), so other GPUs' files go.
KEEP_DEVICE = "device_name=NVIDIA_H200"
JIT_DIRS = ("sglang/kernels/jit/include", "sglang/kernels/jit/csrc")


@dataclass(frozen=True)
class Archive:
    """The list's `archive <bytes> <sha256>` row: what `build` made, what `check` counts."""

    size: int
    sha256: str


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
        if not body.strip() or body.split()[0] == "archive":
            continue
        spec, role, size = body.split()
        name, _, version = spec.partition("==")
        if role not in ("carried", "stand-in", "skipped") or not version:
            raise ValueError(f"{path}: bad row {line!r}")
        rows.append(Row(name, version, role, int(size), why.strip()))
    return rows


def read_archive(path: Path = LIST) -> Archive:
    rows = [line.split() for line in path.read_text().splitlines() if line.startswith("archive ")]
    if len(rows) != 1 or len(rows[0]) != 3 or not rows[0][1].isdigit():
        raise ValueError(f"{path}: want one row `archive <bytes> <sha256>`, found {rows}")
    return Archive(int(rows[0][1]), rows[0][2])


def write_sizes(
    rows: list[Row], sizes: dict[str, int], archive: Archive, path: Path = LIST
) -> None:
    """Rewrite each row's wheel size and the archive row in place, keeping comments and order."""
    out = []
    for line in path.read_text().splitlines():
        body, sep, why = line.partition("#")
        if line.startswith("archive "):
            line = f"archive {archive.size} {archive.sha256}"
        elif body.strip():
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


PRUNE_KINDS = ("prune", "prune-flat", "keep")


def read_prune(path: Path = PRUNE) -> dict[str, list[str]]:
    """scripts/gpu_serve_trim.txt's rows by kind: `prune <module prefix>` (a package and its
    subpackages, or one module), `prune-flat <package>` (the package's own module files, not its
    subpackages), `keep <module>`."""
    rows: dict[str, list[str]] = {k: [] for k in PRUNE_KINDS}
    for line in path.read_text().splitlines():
        body = line.partition("#")[0].split()
        if not body:
            continue
        if len(body) != 2 or body[0] not in PRUNE_KINDS:
            raise ValueError(f"{path}: bad row {line!r}")
        rows[body[0]].append(body[1])
    return rows


def module_name(rel: Path) -> str:
    """sglang/srt/lora/__init__.py -> sglang.srt.lora; sglang/srt/lora/x.py -> sglang.srt.lora.x"""
    parts = rel.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def prune_modules(target: Path, path: Path = PRUNE) -> int:
    """Remove each module file under a `prune` prefix or directly in a `prune-flat` package that
    is not a `keep` module (nor a package of one); returns bytes removed."""
    rows = read_prune(path)
    keep = set(rows["keep"])
    needed = keep | {m.rsplit(".", i)[0] for m in keep for i in range(1, m.count(".") + 1)}
    removed = 0
    for kind in ("prune", "prune-flat"):
        for prefix in rows[kind]:
            base = target.joinpath(*prefix.split("."))
            if not base.is_dir():
                files = [f for f in [base.with_suffix(".py")] if f.is_file()]
            else:
                files = list(base.rglob("*.py") if kind == "prune" else base.glob("*.py"))
            removed += _remove_unneeded(target, files, needed)
    return removed


def _remove_unneeded(target: Path, files: list[Path], needed: set[str]) -> int:
    removed = 0
    for f in files:
        if module_name(f.relative_to(target)) not in needed:
            removed += f.stat().st_size
            f.unlink()
    return removed


def remove(path: Path) -> int:
    """Delete a file or a folder if present; returns the bytes it held."""
    if path.is_file():
        size = path.stat().st_size
        path.unlink()
        return size
    if path.is_dir():
        size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
        shutil.rmtree(path)
        return size
    return 0


def trim(target: Path) -> int:
    """Remove what the mx_cuda platform never runs; returns bytes removed."""
    removed = prune_modules(target)
    removed += sum(remove(target / rel) for rel in TRIM_DIRS)
    for f in list((target / "sglang").rglob("*")):
        other_gpu = "device_name=" in f.name and KEEP_DEVICE not in f.name
        if f.is_file() and (f.suffix in TRIM_SUFFIXES or other_gpu):
            removed += f.stat().st_size
            f.unlink()
    for f in list(target.rglob("*.pyi")):  # type stubs: never imported
        removed += f.stat().st_size
        f.unlink()
    for info in target.glob("*.dist-info"):
        meta = info / "METADATA"
        if meta.is_file():
            text = meta.read_bytes()
            headers = text.split(b"\n\n", 1)[0] + b"\n"
            removed += len(text) - len(headers)
            meta.write_bytes(headers)
        removed += sum(remove(info / name) for name in TRIM_DIST_INFO)
    return removed + remove(target / "bin")


def compress(target: Path, archive: Path) -> None:
    archive.unlink(missing_ok=True)
    tmp = archive.with_suffix(".tmp")
    # Files of one kind side by side (by suffix, then path): xz's window then finds more matches.
    # Folders too, empty ones included: SGLang's JIT loader wants sglang/kernels/jit/include and
    # csrc to exist (their sources are trimmed) when its module is imported.
    files = sorted(
        target.rglob("*"), key=lambda p: (not p.is_dir(), p.suffix, str(p.relative_to(target)))
    )
    with tarfile.open(tmp, "w:xz", preset=9 | lzma.PRESET_EXTREME) as tf:
        for p in files:
            tf.add(p, arcname=str(p.relative_to(target)), recursive=False)
    tmp.rename(archive)


def tracked_bytes() -> int:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    paths = [ROOT / f.decode() for f in out if f]
    # A link travels as a link (its target, inside the tree, is counted once as its own file).
    return sum(p.lstat().st_size for p in paths if p.is_symlink() or p.is_file())


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
    # The server entry module, and the JIT folders SGLang's loader looks for at import time.
    for need in ("sglang/srt/entrypoints/http_server.py", *JIT_DIRS):
        if need not in names:
            problems.append(f"{need} missing")
    problems += [f"untrimmed {n}" for n in names if n.startswith("sglang/") and n.endswith(".so")]
    return problems


def travel_problems(tracked: int, archive: Archive) -> list[str]:
    """Over the cap less the margin? (Tracked files and the recorded archive size travel.)"""
    total, limit = tracked + archive.size, CAP_BYTES - MARGIN_BYTES
    if total <= limit:
        return []
    return [
        f"travel set {total / 2**20:.2f} MiB (tracked {tracked / 2**20:.2f} + archive "
        f"{archive.size / 2**20:.2f}) is over {limit / 2**20:.2f} MiB (the device tool's "
        f"{CAP_BYTES / 2**20:.0f} MiB cap less a {MARGIN_BYTES / 2**20:.1f} MiB margin)"
    ]


def check() -> int:
    tracked, recorded = tracked_bytes(), read_archive()
    print(
        f"tracked {tracked / 2**20:.2f} MiB + {ARCHIVE.name} {recorded.size / 2**20:.2f} MiB "
        f"(recorded) = {(tracked + recorded.size) / 2**20:.2f} MiB of "
        f"{CAP_BYTES / 2**20:.0f} MiB (limit {(CAP_BYTES - MARGIN_BYTES) / 2**20:.2f} MiB)"
    )
    problems = travel_problems(tracked, recorded)
    if not ARCHIVE.exists():
        print(f"{ARCHIVE} missing: run `python scripts/gpu_serve_assets.py build`")
        problems.append("archive missing")
    else:
        data = ARCHIVE.read_bytes()
        if (len(data), hashlib.sha256(data).hexdigest()) != (recorded.size, recorded.sha256):
            problems.append(f"{ARCHIVE} is not the recorded one: rebuild it (`build`)")
        problems += [f"archive: {p}" for p in archive_problems()]
    for p in problems:
        print(p)
    return 1 if problems else 0


def build() -> int:
    rows = read_list()
    carried = [r for r in rows if r.role == "carried"]
    wheels = download(rows)
    staging = WHL / "staging"
    stage([wheels[r.name] for r in carried], staging)
    removed = trim(staging)
    compress(staging, ARCHIVE)
    shutil.rmtree(staging)
    digest = hashlib.sha256(ARCHIVE.read_bytes()).hexdigest()
    archive = Archive(ARCHIVE.stat().st_size, digest)
    write_sizes(rows, {n: w.stat().st_size for n, w in wheels.items()}, archive)
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
