"""A result recorded and rendered for a person: the record itself (result: BenchResult, with
its one JSON round trip), report.md (markdown: stamp, table, verdict and check lines) and
report.html (html_page: one self-contained page with the verdict first, then the points).

May import the rooms below it (load, agents, run, claims); today it stands on run (the
pipeline's Measurement, the runner's RunConfig) and claims (Verdict)."""
