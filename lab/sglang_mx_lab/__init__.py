"""sglang-mx's lab, apart from the product (`sglang_mx`, `sgl_kernel_rocm`), which never imports
it: `testing` (what the suite, the benchmarks and the scripts start and compare against: server
processes, HF references, hostile clients, fault campaigns) and `planner` (the planner's
validation runs on the CPU box, their calibration fits and pre-registration). Installed in
editable mode by `make setup`; not in any wheel a serving node installs."""
