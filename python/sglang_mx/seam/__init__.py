"""Where SGLang meets sglang_mx: the general plugin (`plugin.register`, the `sglang.srt.plugins`
entry point, which wires every concern's hooks), the `mx_cpu` platform (`platform.activate`, the
`sglang.srt.platforms` entry point, and its class in `platform_impl`), the CPU-box preparation
(`cpu_setup`) and the venv-wide CPU stand-ins (`venv_shims`, over `sglang_mx/_cpu_shims/`)."""
