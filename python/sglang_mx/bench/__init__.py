"""Benchmark harness: an OpenAI-compatible load runner over measure's exact prefix-hit traces and
sweeps, claim verification, reports and frontend-DSL agent workloads, in rooms by job, each
importing only the rooms below it (test/test_import_graph.py holds the order):

    load    what goes to the server: server limits, prompts, traces, the streaming client, the
            load generator and its self-check, sessions, Prometheus scrapes, SGLang's client
    agents  frontend-DSL agent programs (load of another kind; recorded as traces)
    run     one run measured: the pipeline of run, sweep and verify, the runner, token audit,
            acceptance, agreement, task eval, the load generator's calibration
    claims  a claim as data, its reading before a run, the verdict on repeated runs
    report  a result recorded (BenchResult) and rendered: report.md, report.html
    cli     `sglang-mx bench VERB`: the parser, the shared run flags, verify, calibrate, sessions

All of them stand on sglang_mx.measure and sglang_mx.capacity; nothing below bench imports it.
Modules stay import-light (no torch/sglang at module level) so `sglang-mx --help` is quick."""
