"""What every compile-matrix family shares: the Case (what `triton.compile` needs plus what the
gate and the cost model need), the one case builder, the Kernel a family declares once (its cases
built by Kernel.case), the shipped-table readers, the KV dtype per arch and deduplication."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PKG = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    kernel: str  # short name, e.g. "moe.gate_up"
    module: str  # import path of the module holding the @triton.jit function
    fn: str
    arch: str
    label: str  # what varies: path, dtype, shape, config
    pointers: tuple[tuple[str, str], ...]  # (arg, "*bf16" ...)
    ints: tuple[tuple[str, int], ...]  # (arg, a realistic value) -> i32/i64, div-16, ==1
    floats: tuple[str, ...]  # fp32 scalar args
    constexprs: tuple[tuple[str, Any], ...]  # dtypes as strings "tl.bfloat16"
    num_warps: int
    num_stages: int
    stream: str  # the `# stream:` marker of the main loop's big load ("weights", "kv")
    stream_bytes_per_iter: int  # bytes of that stream one program loads per loop iteration
    # What the gate demands beyond building cleanly (gate.py): "wide_stream" (16-byte loads of
    # the stream), "whole_warps" (no warp repeats another's tile), "mfma_scale", "cvt_scalef32",
    # "convert_once" (no loaded tile converted twice in an iteration, converts.py).
    expect: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        tiles = ",".join(f"{k}={v}" for k, v in self.constexprs if k.startswith("BLOCK"))
        return f"{self.kernel}|{self.arch}|{self.label}|{tiles}|w{self.num_warps}s{self.num_stages}"

    def specialization(self) -> tuple[tuple[str, str], ...]:
        """How Triton's JIT would specialize the integer args: ==1 becomes a constant, multiples
        of 16 get tt.divisibility 16, values past int32 are i64."""
        out = []
        for name, v in self.ints:
            tag = "one" if v == 1 else "d16" if v % 16 == 0 else "i64" if abs(v) >= 2**31 else ""
            out.append((name, tag))
        return tuple(out)

    def config(self) -> dict[str, Any]:
        return {k: v for k, v in self.constexprs if k.startswith("BLOCK")} | {
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
        }


def build(
    kernel: str, module: str, fn: str, arch: str, label: str, cfg: dict[str, Any], **fields: Any
) -> Case:
    """The one case builder: warps and stages come from the launch config `cfg`; `fields` are
    Case's others by name (pointers, ints, constexprs; floats, stream, stream_bytes_per_iter
    and expect where a kernel has them)."""
    fields.setdefault("floats", ())
    fields.setdefault("stream", "")
    fields.setdefault("stream_bytes_per_iter", 0)
    warps, stages = int(cfg["num_warps"]), int(cfg["num_stages"])
    return Case(kernel, module, fn, arch, label, num_warps=warps, num_stages=stages, **fields)


@dataclass(frozen=True)
class Kernel:
    """What every case of one kernel shares, declared once by its family: its short name, the
    @triton.jit function's qualified name (module.function), its pointer arguments in order as
    `name:type` words (Triton's types, e.g. "Q:*bf16"; the type "kv" stands for the case's KV
    element type), the stream its main loop reads and what the gate demands of it
    (Case.expect)."""

    name: str
    qualname: str
    signature: str
    stream: str = ""
    expect: tuple[str, ...] = ()

    def pointers(self, kv: str = "") -> tuple[tuple[str, str], ...]:
        """(arg, type) of each pointer; `kv` is the type a "kv" pointer takes in this case."""
        out = []
        for word in self.signature.split():
            arg, type_ = word.split(":")
            if type_ == "kv" and not kv:
                raise ValueError(f"{self.name}: {arg} is a KV pointer; the case names no kv")
            out.append((arg, kv if type_ == "kv" else type_))
        return tuple(out)

    def case(
        self,
        arch: str,
        label: str,
        cfg: dict[str, Any],
        *,
        ints: tuple[tuple[str, int], ...],
        constexprs: tuple[tuple[str, Any], ...],
        kv: str = "",
        floats: tuple[str, ...] = (),
        stream_bytes_per_iter: int = 0,
    ) -> Case:
        """One case of this kernel (built by `build`); `kv` as in `pointers`."""
        module, fn = self.qualname.rsplit(".", 1)
        return build(
            self.name,
            module,
            fn,
            arch,
            label,
            cfg,
            pointers=self.pointers(kv),
            ints=ints,
            constexprs=constexprs,
            floats=floats,
            stream=self.stream,
            stream_bytes_per_iter=stream_bytes_per_iter,
            expect=self.expect,
        )


def table(op: str, arch: str) -> dict[str, Any] | None:
    path = PKG / "configs" / op / f"{arch}.json"
    return json.loads(path.read_text()) if path.exists() else None


def table_configs(op: str, arch: str, heuristic) -> list[tuple[str, dict]]:
    """(shape key, config) for every bucket the arch's table holds (DEFAULT included); the
    heuristic's configs when there is no table (that is what would launch)."""
    table_ = table(op, arch)
    if table_ is None:
        return [("heuristic", heuristic(m)) for m in (1, 16, 64, 512, 4096)]
    out = []
    for key, buckets in table_.items():
        if key == "_meta":
            continue
        out.extend((key, dict(cfg)) for cfg in buckets.values())
    return out


def decode_configs(op: str, arch: str) -> list[dict]:
    """The distinct configs of a decode-attention op's table (or heuristic) on `arch`."""
    from sgl_kernel_rocm.attention._common import gpu_decode_heuristic

    seen, out = set(), []
    for _, cfg in table_configs(op, arch, gpu_decode_heuristic):
        sig = json.dumps(cfg, sort_keys=True)
        if sig not in seen:
            seen.add(sig)
            out.append(cfg)
    return out


# "fp8packed": SGLang's packed FP8 latent rows, read as bytes (attention/latent_layout.py).
_KV = {"bf16": ("*bf16", 2), "fp8": ("*fp8e4nv", 1), "fp8packed": ("*u8", 1)}


def kv_type(arch: str, kv: str) -> tuple[str, int]:
    """KV element type: CDNA3 (gfx942) FP8 is the FNUZ e4m3 (torch.float8_e4m3fnuz), OCP e4m3
    elsewhere; a gfx942 cache in OCP e4m3 would need instructions CDNA3 lacks."""
    if kv == "fp8" and arch == "gfx942":
        return "*fp8e4b8", 1
    return _KV[kv]


def dedupe(cases: Iterable[Case]) -> list[Case]:
    """One case per distinct compile (kernel, arch, path, constexprs, specialization, launch)."""
    seen: dict[str, Case] = {}
    for case in cases:
        sig = json.dumps(
            [case.kernel, case.arch, case.label.split("@")[0], case.constexprs,
             case.specialization(), case.num_warps, case.num_stages],
            default=str,
        )  # fmt: skip
        seen.setdefault(sig, case)
    return list(seen.values())
