"""The measurement vocabulary under both `bench` (measures an endpoint) and `plan` (simulates a
deployment): SLOs and per-request results (metrics), the run summary (summary) and its checks
(run_checks), seeded traces (tracegen), load sweeps and their knee (sweep), the provenance stamp
(stamp), head-to-head tables (compare) and a result's files and plots (result_files). A measured
run and a simulated one share these definitions, so their figures mean the same thing.

It imports nothing from bench or plan (issue 60: plan used to reach into bench for these); below
it sit only capacity and the package's leaf modules (machine_info)."""
