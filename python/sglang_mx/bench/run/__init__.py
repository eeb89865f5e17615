"""One run measured: the pipeline every measuring verb runs (pipeline.measure: traces in, typed
sweep points out), the runner that replays a trace and records every request, and the checks
that read the same run (token audit, speculative acceptance from the server's counters), beside
the endpoint checks verify runs next to speed (agreement with a reference, the HumanEval task
eval) and the load generator's own ceiling against a null server (calibrate, calibrate_peer).

May import the rooms below it (load, agents); today it stands on load alone."""
