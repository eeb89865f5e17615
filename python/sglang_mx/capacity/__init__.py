"""The capacity model under both `bench` (measures an endpoint) and `plan` (sizes a deployment):
hardware (data/hardware.json), model specs (data/models.json), parallel layouts, the roofline
limits of a node, cost per token, workload specifications and their presets, and the
`sglang-mx roofline` command (cli). Pure: imports nothing of ours above it (issue 43: it used to
live in bench/, and plan reached into bench)."""
