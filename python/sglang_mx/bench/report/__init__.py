"""A result rendered for a person: report.md (markdown: stamp, table, verdict and check lines) and
report.html (html_page: one self-contained page with the verdict first, then the points).

May import the rooms below it (load, agents, run, claims); today it stands on claims alone."""
