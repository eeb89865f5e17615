"""A result rendered for a person: report.md (markdown: stamp, table, verdict and check lines) and
report.html (html_page: one self-contained page with the verdict first, then the points).

Imports the rooms below it: load, agents, run, claims (today claims only)."""
