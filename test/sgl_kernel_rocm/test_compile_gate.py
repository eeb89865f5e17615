"""The compile-and-ISA gate: every kernel of sgl_kernel_rocm, built for gfx950, gfx942, sm90 and
sm100 with `triton.compile` on this CPU box, must compile without spills, fit LDS/SMEM, use the
instructions its path exists for, and stream MoE weights 16 bytes at a time.

The gate itself is tested on planted faults (compile_gate/planted_kernels.py) so it cannot pass
silently, and its parsers on small ISA snippets. Compiles are cached by kernel source and Triton
version (sgl_kernel_rocm/compile_check/build.py): a rerun on unchanged kernels takes seconds.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from sgl_kernel_rocm.compile_check import converts, isa
from sgl_kernel_rocm.compile_check.archs import ARCHS, is_amd
from sgl_kernel_rocm.compile_check.build import run_matrix, triton_version
from sgl_kernel_rocm.compile_check.cases import PKG, Case, all_cases
from sgl_kernel_rocm.compile_check.gate import violations

PLANTED = Path(__file__).parent / "compile_gate"


# ----------------------------------------------------------------------------- the gate


def test_every_package_kernel_passes_the_gate():
    cases = all_cases()
    results = run_matrix(cases)
    bad = [v for case, rec in zip(cases, results, strict=True) for v in violations(case, rec)]
    assert not bad, f"{len(bad)} gate violations under Triton {triton_version()}:\n" + "\n".join(
        bad
    )
    # The matrix covers all four arch ids and both paths of the production MoE.
    assert {c.arch for c in cases} == set(ARCHS)
    labels = {(c.arch, c.label.split("@")[0]) for c in cases if c.kernel == "moe.gate_up"}
    assert ("gfx950", "w4a4:dot_scaled") in labels and ("sm90", "w4a16:unpack") in labels


def test_every_jit_kernel_of_the_package_is_in_the_matrix():
    """A launched @triton.jit function (one indexed with a grid somewhere in the package) that
    the matrix does not compile would escape the gate."""
    launched = set()
    for path in PKG.rglob("*.py"):
        if "compile_check" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute | ast.Name):
                name = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
                if name.endswith("_kernel"):
                    launched.add(name)
    compiled = {c.fn for c in all_cases()}
    assert launched, "found no kernel launches: the scan is broken"
    assert launched <= compiled, f"kernels launched but never compiled: {launched - compiled}"


def test_static_tables_say_where_they_come_from():
    import json

    for table_path in (PKG / "configs").glob("*/*.json"):
        meta = json.loads(table_path.read_text())["_meta"]
        assert meta["source"] in ("static", "measured"), table_path
        if meta["source"] == "static":
            assert meta["triton"] and "not measured" in meta["how"], table_path


# ----------------------------------------------------------------------------- planted faults


def _planted(arch: str) -> dict[str, tuple[Case, str | None]]:
    """name -> (case, a phrase its violation must contain; None for a control that must pass).
    Every verdict of gate.py, on each arch where it applies: the scaled-MFMA and hardware-upcast
    demands exist on gfx950 only (the other archs have neither instruction)."""
    common = {"arch": arch, "floats": (), "num_stages": 1, "stream": "",
              "stream_bytes_per_iter": 0}  # fmt: skip
    dot = {"kernel": "planted.dot", "module": "planted_kernels", "fn": "dot_loop_kernel",
           "pointers": (("a_ptr", "*bf16"), ("b_ptr", "*bf16"), ("out_ptr", "*fp32")),
           "ints": (("k_dim", 4096),)}  # fmt: skip

    def dot_case(label: str, mnk: tuple[int, int, int], warps: int, expect=(), stages=1) -> Case:
        """The dot loop at one tile, warp count and stage count: each plants its own fault."""
        return Case(
            **dot,
            label=f"planted:{label}",
            constexprs=tuple(zip("MNK", mnk, strict=True)),
            num_warps=warps,
            expect=expect,
            **common | {"num_stages": stages},
        )

    stream = {"module": "planted_kernels", "ints": (("n", 6143), ("stride", 6144)),
              "pointers": (("w_ptr", "*u8"), ("out_ptr", "*i32")), "constexprs": (),
              "num_warps": 4, "expect": ("wide_stream",), "label": "planted",
              **common | {"stream": "weights", "stream_bytes_per_iter": 4096}}  # fmt: skip
    budget = "LDS" if is_amd(arch) else "shared memory"
    out = {
        "compile_error": (
            Case(
                kernel="planted.multi_type",
                module="planted_kernels",
                fn="multi_type_return_kernel",
                pointers=(("x_ptr", "*bf16"), ("out_ptr", "*bf16")),
                ints=(),
                constexprs=(("FLAG", True),),
                num_warps=4,
                label="planted",
                **common,
            ),
            "Return type mismatch",
        ),
        "spill": (
            dot_case("spill", (256, 128, 16) if is_amd(arch) else (128, 128, 16), warps=1),
            "spills",
        ),
        "lds_smem": (dot_case("stages", (32, 32, 512), warps=4, stages=6), f"{budget} "),
        "warp_repetition": (
            dot_case("small-tile", (16, 16, 32), warps=8, expect=("whole_warps",)),
            "warps compute each output tile",
        ),
        "narrow_stream": (
            Case(kernel="planted.narrow", fn="narrow_stream_kernel", **stream),
            "'weights' stream loads are 1 B wide",
        ),
        "unattributed_stream": (
            Case(kernel="planted.unmarked", fn="unmarked_stream_kernel", **stream),
            "no global load attributed to the 'weights' stream",
        ),
    }
    if arch != "gfx942":  # Triton 3.8 keeps this gfx942 (FNUZ) convert in one layout
        fp8 = "*fp8e4nv"
        out["converted_twice"] = (
            Case(
                kernel="planted.twice",
                fn="twice_converted_kernel",
                label="planted",
                module="planted_kernels",
                pointers=(("q_ptr", "*bf16"), ("kv_ptr", fp8), ("out_ptr", "*fp32")),
                ints=(("n", 4096),),
                constexprs=(),
                num_warps=4,
                expect=("convert_once",),
                **common | {"stream": "kv", "stream_bytes_per_iter": 8192},
            ),
            "converts each 'kv' tile 2 times per iteration",
        )
    # A software FP4 upcast in fp32: no hardware convert (gfx950), no packed bf16 multiply
    # (the PTX upcast's, sm90 / sm100).
    soft = {"kernel": "planted.soft_upcast", "module": "planted_kernels",
            "fn": "soft_upcast_kernel", "label": "planted", "constexprs": (), "ints": (),
            "pointers": (("w_ptr", "*u8"), ("out_ptr", "*bf16")), "num_warps": 4,
            **common}  # fmt: skip
    if arch in ("sm90", "sm100"):
        out["no_bf16x2_mul"] = (Case(**soft, expect=("bf16x2_mul",)), "no packed bf16 multiply")
    if arch == "gfx950":
        scaled = {"kernel": "planted.scaled_dot", "module": "planted_kernels",
                  "fn": "scaled_dot_kernel", "num_warps": 4, **common}  # fmt: skip
        blocks = (("BLOCK_M", 32), ("BLOCK_N", 32), ("BLOCK_K", 128))
        out |= {
            "no_mfma_scale": (
                dot_case("w4a4-as-bf16", (32, 32, 64), warps=4, expect=("mfma_scale",)),
                "W4A4 without v_mfma_scale",
            ),
            "no_cvt_scalef32": (
                Case(**soft, expect=("cvt_scalef32",)),
                "W4A16 without v_cvt_scalef32",
            ),
        }
        # The controls: e2m1 activations (W4A4) must use v_mfma_scale, bf16 ones (W4A16) the
        # hardware upcast v_cvt_scalef32.
        for name, a_fmt, a_type, demand in (
            ("control_w4a4", "e2m1", "*u8", "mfma_scale"),
            ("control_w4a16", "bf16", "*bf16", "cvt_scalef32"),
        ):
            pointers = (
                ("a_ptr", a_type),
                ("as_ptr", "*u8"),
                ("w_ptr", "*u8"),
                ("ws_ptr", "*u8"),
                ("out_ptr", "*fp32"),
            )
            case = Case(
                **scaled,
                label=f"control:{a_fmt}",
                expect=(demand,),
                pointers=pointers,
                ints=(),
                constexprs=(("A_FMT", a_fmt), *blocks),
            )
            out[name] = (case, None)
    return out


@pytest.mark.parametrize("arch", sorted(ARCHS))
def test_the_gate_catches_planted_faults(arch, monkeypatch):
    """Each planted kernel fails the gate with its own verdict; the controls pass. Compiles go
    through the shared result cache (keyed by the planted source), so reruns cost seconds."""
    monkeypatch.syspath_prepend(str(PLANTED))
    planted = _planted(arch)
    cases = [case for case, _ in planted.values()]
    results = dict(zip(planted, run_matrix(cases), strict=True))
    missed = []
    for name, (case, phrase) in planted.items():
        found = violations(case, results[name])
        if phrase is None and found:
            missed.append(f"control {name} fails: {found}")
        elif phrase is not None and not any(phrase in v for v in found):
            missed.append(f"{name}: no violation says {phrase!r}; got {found}")
    assert not missed, f"{arch}:\n" + "\n".join(missed)


def test_the_result_cache_answers_a_rerun(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLANTED))
    case = _planted("sm90")["compile_error"][0]
    first = run_matrix([case], cache_dir=tmp_path)
    again = run_matrix([case], cache_dir=tmp_path)
    assert not first[0]["cached"] and again[0]["cached"] and again[0]["error"] == first[0]["error"]


# ----------------------------------------------------------------------------- parsers

AMDGCN = """\
\t.file\t1 "/pkg/moe" "_kernels.py"
\t.text
k:
\t.loc\t1 10 0
\ts_load_dwordx2 s[0:1], s[4:5], 0x0
.LBB0_1:
\t.loc\t1 75 4
\tglobal_load_dwordx4 v[0:3], v[4:5], off
\tglobal_load_ubyte v6, v[4:5], off
\t.loc\t1 99 2
\tv_mfma_scale_f32_16x16x128_f8f6f4 v[8:11], v[0:7], v[12:19], v[8:11]
\tv_add_u32_e32 v1, 1, v1
\ts_cbranch_scc1 .LBB0_1
\ts_endpgm
\t.section\t.AMDGPU.csdata
; ScratchSize: 0
\t.section\t.note
  - .vgpr_count:     64
    .vgpr_spill_count: 3
"""

SASS = """\
.L_x_0:
\t//## File "/pkg/moe/_kernels.py", line 75
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0020*/              @P0   LDGSTS.E.BYPASS.LTC128B.128 [R1], desc[UR4][R2.64] ;
        /*0030*/                   LDG.E.U8 R8, desc[UR4][R2.64] ;
\t//## File "/pkg/moe/_kernels.py", line 99
        /*0040*/                   HMMA.16816.F32.BF16 R12, R4, R8, R12 ;
        /*0050*/                   BRA `(.L_x_0) ;
"""


def test_amdgcn_parser_attributes_loads_and_finds_the_loop():
    listing, meta = isa.parse_amdgcn(AMDGCN)
    assert meta["vgpr_count"] == 64 and meta["vgpr_spill_count"] == 3 and meta["ScratchSize"] == 0
    facts = isa.facts(listing, True, {("_kernels.py", 75): "weights"})
    assert facts["loads"]["weights"] == {"16": 1, "1": 1}
    assert facts["mfma_scale"] == 1
    loop = facts["main_loop"]
    assert loop["instructions"] == 5 and loop["mma_macs"] == 16 * 16 * 128


def test_sass_parser_widths_and_mma():
    listing = isa.parse_sass(SASS)
    facts = isa.facts(listing, False, {("_kernels.py", 75): "weights"})
    # LTC128B is a cache hint, not the width: the last .128 is.
    assert facts["loads"]["weights"] == {"16": 2, "1": 1}
    assert facts["mma"] == 1 and facts["main_loop"]["mma_macs"] == 16 * 8 * 16


def test_stream_markers_cover_the_whole_statement(tmp_path):
    src = tmp_path / "k.py"
    src.write_text(
        textwrap.dedent(
            """\
            def f(p):
                q = load(  # stream: weights
                    p,
                    other=0,
                )
                r = load(p)
            """
        )
    )
    lines = isa.stream_lines([src])
    assert {n for (_, n) in lines} == {2, 3, 4, 5} and set(lines.values()) == {"weights"}


TTGIR = "\n".join(
    [
        "#blocked = #ttg.blocked<{sizePerThread = [1, 16], threadsPerWarp = [16, 4], warpsPerCTA = [4, 1], order = [1, 0]}>",  # noqa: E501
        "#blocked1 = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [16, 4], warpsPerCTA = [4, 1], order = [1, 0]}>",  # noqa: E501
        "#mma = #ttg.amd_mfma<{version = 3, warpsPerCTA = [4, 1], instrShape = [16, 16], isTransposed = true}>",  # noqa: E501
        "#mma1 = #ttg.amd_mfma<{version = 3, warpsPerCTA = [1, 4], instrShape = [16, 16], isTransposed = true}>",  # noqa: E501
        "module {",
        "    %q = tt.load %p : tensor<64x64x!tt.ptr<i8>, #blocked> loc(#loc3)",
        "    %r = ttg.async_copy_global_to_local %p2, %buf {contiguity = 8 : i32} : tensor<64x64x!tt.ptr<i8>, #blocked> -> <64x64xi8> loc(#loc4)",  # noqa: E501
        "    %s = tt.load %p3 : tensor<64x4x!tt.ptr<bf16>, #blocked1> loc(#loc5)",
        "    %d = tt.dot %a, %b, %c : tensor<16x128xbf16> * tensor<128x32xbf16> -> tensor<16x32xf32, #mma> loc(#loc6)",  # noqa: E501
        "    %e = tt.dot %a, %b, %c : tensor<16x128xbf16> * tensor<128x64xbf16> -> tensor<16x64xf32, #mma1> loc(#loc6)",  # noqa: E501
        "}",
        '#loc1 = loc("/pkg/moe/_kernels.py":80:12)',
        '#loc2 = loc("/pkg/moe/_kernels.py":200:8)',
        "#loc3 = loc(callsite(#loc1 at #loc2))",
        '#loc4 = loc("q"(#loc3))',
        '#loc5 = loc("/pkg/moe/_kernels.py":81:12)',
        '#loc6 = loc("/pkg/moe/_kernels.py":120:12)',
    ]
)


TTGIR_CONVERTS = "\n".join(
    [
        "    %kv = tt.load %p, %m : tensor<64x128x!tt.ptr<f8E4M3FN>, #blocked> loc(#loc1)",
        "    %a = ttg.convert_layout %kv : tensor<64x128xf8E4M3FN, #blocked> -> tensor<64x128xf8E4M3FN, #linear> loc(#loc2)",  # noqa: E501
        "    %b = ttg.local_alloc %kv : (tensor<64x128xf8E4M3FN, #blocked>) -> !ttg.memdesc<64x128xf8E4M3FN, #shared, #smem> loc(#loc2)",  # noqa: E501
        "    %c = ttg.local_load %b : !ttg.memdesc<64x128xf8E4M3FN, #shared, #smem> -> tensor<64x128xf8E4M3FN, #dot1> loc(#loc2)",  # noqa: E501
        "    %x = tt.fp_to_fp %a : tensor<64x128xf8E4M3FN, #linear> -> tensor<64x128xbf16, #linear> loc(#loc2)",  # noqa: E501
        "    %y = tt.fp_to_fp %c : tensor<64x128xf8E4M3FN, #dot1> -> tensor<64x128xbf16, #dot1> loc(#loc2)",  # noqa: E501
        "    %r = tt.load %p2 : tensor<64x64x!tt.ptr<f8E4M3FN>, #blocked> loc(#loc3)",
        '    %w:2 = tt.elementwise_inline_asm "{ and.b32 $0, $2, 0x7F; }" {constraints = "=r,=r,r", packed_element = 4 : i32} %r : tensor<64x64xf8E4M3FN, #blocked> -> tensor<64x64xbf16, #blocked>, tensor<64x64xi8, #blocked> loc(#loc3)',  # noqa: E501
        "    %d = tt.dot %q, %w#0, %acc : tensor<16x64xbf16> * tensor<64x64xbf16> -> tensor<16x64xf32, #mma> loc(#loc3)",  # noqa: E501
        '#loc1 = loc("/pkg/attention/_mla_decode_kernels.py":90:12)',
        '#loc2 = loc("/pkg/attention/_mla_decode_kernels.py":99:8)',
        '#loc3 = loc("/pkg/attention/_mla_decode_kernels.py":93:12)',
    ]
)


def test_ttgir_convert_count_follows_views_of_each_load():
    """A convert applied in two layouts of one load counts 2; the inline-asm bit move of the
    other stream counts once; the dot that reads it is not a convert."""
    streams = {("_mla_decode_kernels.py", 90): "kv", ("_mla_decode_kernels.py", 93): "kv_rope"}
    assert converts.ttgir_stream_converts(TTGIR_CONVERTS, streams) == {"kv": 2, "kv_rope": 1}
    once = TTGIR_CONVERTS.replace("tt.fp_to_fp %c", "tt.trans %c")
    assert converts.ttgir_stream_converts(once, streams) == {"kv": 1, "kv_rope": 1}


TTGIR_PIPELINED = "\n".join(
    [
        "    %buf = ttg.local_alloc : () -> !ttg.memdesc<2x64x128xf8E4M3FN, #shared, #smem, mutable> loc(#loc1)",  # noqa: E501
        "    %v0 = ttg.memdesc_index %buf[%c0] : !ttg.memdesc<2x64x128xf8E4M3FN> -> !ttg.memdesc<64x128xf8E4M3FN> loc(#loc1)",  # noqa: E501
        "    %t0 = ttg.async_copy_global_to_local %ptr, %v0 mask %m other %o : tensor<64x128x!tt.ptr<f8E4M3FN>> -> <64x128xf8E4M3FN> loc(#loc1)",  # noqa: E501
        "      %v1 = ttg.memdesc_index %buf[%i] : !ttg.memdesc<2x64x128xf8E4M3FN> -> !ttg.memdesc<64x128xf8E4M3FN> loc(#loc1)",  # noqa: E501
        "      %t1 = ttg.async_copy_global_to_local %ptr2, %v1 mask %m other %o : tensor<64x128x!tt.ptr<f8E4M3FN>> -> <64x128xf8E4M3FN> loc(#loc1)",  # noqa: E501
        "      %v2 = ttg.memdesc_index %buf[%j] : !ttg.memdesc<2x64x128xf8E4M3FN> -> !ttg.memdesc<64x128xf8E4M3FN> loc(#loc1)",  # noqa: E501
        "      %a = ttg.local_load %v2 token %t1 : !ttg.memdesc<64x128xf8E4M3FN> -> tensor<64x128xf8E4M3FN, #linear> loc(#loc1)",  # noqa: E501
        "      %b = ttg.local_load %v2 token %t1 : !ttg.memdesc<64x128xf8E4M3FN> -> tensor<64x128xf8E4M3FN, #dot1> loc(#loc1)",  # noqa: E501
        "      %x = tt.fp_to_fp %a : tensor<64x128xf8E4M3FN, #linear> -> tensor<64x128xbf16, #linear> loc(#loc2)",  # noqa: E501
        "      %y = tt.fp_to_fp %b : tensor<64x128xf8E4M3FN, #dot1> -> tensor<64x128xbf16, #dot1> loc(#loc2)",  # noqa: E501
        '#loc1 = loc("/pkg/attention/_mla_decode_kernels.py":90:12)',
        '#loc2 = loc("/pkg/attention/_mla_decode_kernels.py":99:8)',
    ]
)


def test_ttgir_convert_count_follows_pipelined_loads():
    """With num_stages > 1 the tile arrives by async copies into a shared buffer and is read
    back from views of it: converts of those reads count; the copies themselves do not."""
    streams = {("_mla_decode_kernels.py", 90): "kv"}
    assert converts.ttgir_stream_converts(TTGIR_PIPELINED, streams) == {"kv": 2}
    once = TTGIR_PIPELINED.replace("tt.fp_to_fp %b", "tt.trans %b")
    assert converts.ttgir_stream_converts(once, streams) == {"kv": 1}


def test_ttgir_attribution_and_warp_redundancy():
    streams = {("_kernels.py", 80): "weights", ("_kernels.py", 81): "scales"}
    loads = isa.ttgir_stream_loads(TTGIR, streams)
    # 16 x i8 per thread = 16 B; the async copy is capped by its contiguity (8 B); 4 x bf16 = 8 B.
    assert loads == {"weights": {"16": 1, "8": 1}, "scales": {"8": 1}}
    # #mma puts 4 warps x 16 rows on a 16-row tile: each output computed 4 times; #mma1 splits
    # the 64 columns among the warps: no repetition. The worst dot counts.
    assert isa.warp_redundancy(TTGIR) == 4.0
    assert isa.warp_redundancy(TTGIR.replace("-> tensor<16x32xf32, #mma>", "")) == 1.0
