"""The planner's validation lab: live calibration fits (`step_fit`, `pd_lone`, `pd_decode`,
`pd_live`, `handoff`), the PD model built from them (`pd_model`), the CPU-box checks
(`validate_cpu`, `validate_pd_cpu`: `python -m sglang_mx_lab.planner.validate_pd_cpu`), their
pre-registration (`preregister`) and the public data points (`public_points`). `sglang-mx plan`
(the product, `sglang_mx.plan`) reaches none of it."""
