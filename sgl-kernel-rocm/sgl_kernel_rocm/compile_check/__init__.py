"""Compile-and-ISA gate: build every Triton kernel of sgl_kernel_rocm for gfx950, gfx942, sm90
and sm100 on a CPU-only machine (`triton.compile` with a GPUTarget), read registers, spills,
LDS/SMEM and instruction facts from the result, and check them (gate.py).

    python -m sgl_kernel_rocm.compile_check            # table + gate under the installed Triton
    python -m sgl_kernel_rocm.compile_check --json out.json --doc docs/kernels-compile.md
    python -m sgl_kernel_rocm.compile_check --predict --arch gfx950 --family moe

This is build evidence, not speed. Speed is predicted by the cost model (costmodel/: per-pipe
issue, latency, memory, waves and launch bounds from the compiled code, calibrated on the H200
rows) and measured by the GPU check; the old static ceiling is retired.
"""
