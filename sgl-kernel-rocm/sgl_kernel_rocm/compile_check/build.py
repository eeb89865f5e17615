"""Compile one Case with `triton.compile` for its arch (no GPU needed) and read its facts;
run a whole matrix in a process pool with a result cache keyed by kernel source and Triton
version, so a rerun on unchanged kernels costs nothing."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import multiprocessing
import multiprocessing.util
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from sgl_kernel_rocm.compile_check import converts, isa
from sgl_kernel_rocm.compile_check.archs import gpu_target, is_amd
from sgl_kernel_rocm.compile_check.cases import PKG, Case

# Sources every kernel may inline (shared @triton.jit helpers) and the checker itself.
_SHARED_SOURCES = (
    "_mx_triton.py",
    "attention/split_kv.py",
    "attention/fp8_bits.py",
    "moe/_upcast.py",
    "moe/_split_k.py",
    "compile_check/isa.py",
    "compile_check/converts.py",
    "compile_check/build.py",
)


def triton_version(triton_dir: Path | None = None) -> str:
    """Version of the Triton in use, or of the one installed under `triton_dir` (pip --target)."""
    if triton_dir is None:
        import triton

        return triton.__version__
    text = (Path(triton_dir) / "triton" / "__init__.py").read_text()
    m = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", text)
    if not m:
        raise RuntimeError(f"{triton_dir}: no triton/__init__.py with a __version__")
    return m.group(1)


def default_cache_dir() -> Path:
    root = os.environ.get("SGLANG_MX_COMPILE_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sglang-mx-compile"


def _module_file(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ImportError(f"no module {module}")
    return Path(spec.origin)


def source_files(case: Case) -> list[Path]:
    return [_module_file(case.module)] + [PKG / p for p in _SHARED_SOURCES]


def cache_key(case: Case, version: str) -> str:
    h = hashlib.sha256()
    h.update(version.encode())
    h.update(case.key.encode())
    h.update(json.dumps([case.pointers, case.ints, case.constexprs], default=str).encode())
    for path in source_files(case):
        h.update(path.read_bytes())
    return h.hexdigest()[:32]


def _dtype(value: Any):
    import triton.language as tl

    if isinstance(value, str) and value.startswith("tl."):  # a dtype constexpr, e.g. "tl.bfloat16"
        return getattr(tl, value[3:])
    return value


def _ast_source(case: Case):
    from triton.compiler import ASTSource

    module = importlib.import_module(case.module)
    fn = getattr(module, case.fn)
    pointers = dict(case.pointers)
    ints = dict(case.ints)
    consts = {k: _dtype(v) for k, v in case.constexprs}
    signature: dict[str, str] = {}
    attrs: dict[tuple[int, ...], list] = {}
    for idx, name in enumerate(fn.arg_names):
        if name in consts:
            signature[name] = "constexpr"
        elif name in pointers:
            signature[name] = pointers[name]
            attrs[(idx,)] = [["tt.divisibility", 16]]
        elif name in case.floats:
            signature[name] = "fp32"
        elif name in ints:
            value = ints[name]
            if value == 1:  # the JIT turns an int equal to 1 into a constant
                signature[name] = "constexpr"
                consts[name] = 1
            else:
                signature[name] = "i64" if abs(value) >= 2**31 else "i32"
                if value % 16 == 0:
                    attrs[(idx,)] = [["tt.divisibility", 16]]
        else:
            raise KeyError(
                f"{case.kernel}: argument {name!r} of {case.fn} has no value in the case"
            )
    missing = set(consts) - set(fn.arg_names)
    if missing:
        raise KeyError(f"{case.kernel}: {sorted(missing)} are not arguments of {case.fn}")
    return ASTSource(fn, signature, consts, attrs)


def compile_case(case: Case) -> dict[str, Any]:
    """Compile and inspect one case; never raises (a failure is a result)."""
    import triton

    t0 = time.time()
    rec: dict[str, Any] = {"key": case.key, "ok": False, "triton": triton_version()}
    try:
        kernel = triton.compile(
            _ast_source(case),
            target=gpu_target(case.arch),
            options={"num_warps": case.num_warps, "num_stages": case.num_stages},
        )
    except Exception as exc:  # the compiler's own message is the result
        msg = f"{type(exc).__name__}: {exc}"
        cause = exc.__cause__ or exc.__context__
        if cause is not None:  # the frontend's reason (e.g. a type mismatch) travels here
            msg += f"\ncaused by {type(cause).__name__}: {cause}"
        rec["error"] = msg[-4000:]
        rec["seconds"] = round(time.time() - t0, 2)
        return rec
    try:
        rec.update(_inspect(case, kernel))
        rec["ok"] = True
    except Exception:
        rec["error"] = "inspecting the compiled kernel failed:\n" + traceback.format_exc()[-3000:]
    rec["seconds"] = round(time.time() - t0, 2)
    return rec


def _inspect(case: Case, kernel) -> dict[str, Any]:
    streams = isa.stream_lines(source_files(case))
    out: dict[str, Any] = {
        "shared_bytes": int(kernel.metadata.shared),
        "ttgir_loads": isa.ttgir_stream_loads(kernel.asm["ttgir"], streams),
        "ttgir_converts": converts.ttgir_stream_converts(kernel.asm["ttgir"], streams),
        "warp_redundancy": isa.warp_redundancy(kernel.asm["ttgir"]),
    }
    if is_amd(case.arch):
        listing, meta = isa.parse_amdgcn(kernel.asm["amdgcn"])
        out["regs"] = {
            "vgpr": meta.get("vgpr_count", meta.get("NumVgprs", -1)),
            "agpr": meta.get("agpr_count", meta.get("NumAgprs", 0)),
            "sgpr": meta.get("sgpr_count", -1),
            "occupancy": meta.get("Occupancy", -1),
        }
        out["spills"] = {
            "vgpr": meta.get("vgpr_spill_count", 0),
            "sgpr": meta.get("sgpr_spill_count", 0),
            "scratch_bytes": max(
                meta.get("ScratchSize", 0), meta.get("private_segment_fixed_size", 0)
            ),
        }
        out["isa"] = isa.facts(listing, True, streams)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            sass, res = isa.nvidia_sass_and_resources(kernel.asm["cubin"], Path(tmp))
        out["regs"] = {"reg": res["REG"]}
        out["spills"] = {"stack_bytes": res["STACK"], "local_bytes": res["LOCAL"]}
        out["isa"] = isa.facts(isa.parse_sass(sass), False, streams)
    return out


def _init_worker(triton_dir: str | None) -> None:
    # Real compiles need real @triton.jit functions: a test session sets TRITON_INTERPRET=1,
    # so workers are fresh (spawned) interpreters that import the kernels with it off.
    os.environ["TRITON_INTERPRET"] = "0"
    # A private Triton kernel cache per worker: Triton's cache key covers a function's source
    # text but not where it sits in the file, so a cached binary compiled before lines above it
    # moved carries stale line info, and the `# stream:` attribution (main loop, ceiling, load
    # widths) silently reads the wrong lines. Our own result cache already skips unchanged work.
    tmp = tempfile.mkdtemp(prefix="sglang-mx-triton-")
    os.environ["TRITON_CACHE_DIR"] = tmp
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(tmp, True), exitpriority=0)
    if triton_dir:  # another Triton for this matrix: first on the path, before any import
        sys.path.insert(0, triton_dir)


def _worker(case: Case) -> dict[str, Any]:
    return compile_case(case)


def run_matrix(
    cases: list[Case],
    jobs: int | None = None,
    cache_dir: Path | None = None,
    progress=None,
    triton_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Results in the order of `cases`; cached results are reused, new ones cached. With
    `triton_dir` the workers compile with the Triton installed there instead of ours."""
    version = triton_version(triton_dir)
    cache = (cache_dir or default_cache_dir()) / version
    cache.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any] | None] = [None] * len(cases)
    todo = []
    for i, case in enumerate(cases):
        path = cache / f"{cache_key(case, version)}.json"
        if path.exists():
            results[i] = json.loads(path.read_text()) | {"cached": True}
        else:
            todo.append((i, case, path))
    jobs = jobs or max(1, os.cpu_count() or 1)
    # One pool per arch: a Triton process that has built for one target can carry state into
    # the next (seen: Triton 3.6 lowering gfx942 FP8 converts with gfx950 instructions after a
    # gfx950 build in the same process), so no worker ever builds for two archs.
    done = 0
    for arch in dict.fromkeys(case.arch for _, case, _ in todo):
        mine = sorted((t for t in todo if t[1].arch == arch), key=lambda t: -_weight(t[1]))
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(str(Path(triton_dir).resolve()) if triton_dir else None,),
        ) as pool:
            futures = [(i, path, pool.submit(_worker, case)) for i, case, path in mine]
            for i, path, fut in futures:
                rec = fut.result()
                path.write_text(json.dumps(rec))
                results[i] = rec | {"cached": False}
                done += 1
                if progress:
                    progress(done, len(todo), cases[i], rec)
    return [r for r in results if r is not None]


def _weight(case: Case) -> int:
    c = dict(case.constexprs)
    return int(c.get("BLOCK_M", 1)) * int(c.get("BLOCK_N", 1)) * int(c.get("BLOCK_K", 1))
