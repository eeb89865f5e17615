"""Claims: a performance claim as data (claim_file: schema, loading, the workload and SLO it
states), its reading before any run (claim_check: arithmetic, price basis, published rows), and
the verdict from N repeated measurements (verdict: confidence interval, ratio, reasons).

May import the rooms below it (load, agents, run); today it stands on load alone (limits)."""
