"""Compile-and-ISA gate: build every Triton kernel of sgl_kernel_rocm for gfx950, gfx942, sm90
and sm100 on a CPU-only machine (`triton.compile` with a GPUTarget), read registers, spills,
LDS/SMEM and instruction facts from the result, and check them (gate.py).

    python -m sgl_kernel_rocm.compile_check            # table + gate under the installed Triton
    python -m sgl_kernel_rocm.compile_check --json out.json --doc docs/kernels-compile.md

This is build evidence, not speed: the static ceiling (ceiling.py) is an estimate.
"""
