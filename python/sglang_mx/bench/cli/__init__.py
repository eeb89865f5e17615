"""`sglang-mx bench VERB`: the parser and its small verbs (verbs), the run flags the verbs share
(args), and the verbs big enough for a module of their own: verify (a claim file in, a verdict
directory out: runs, judges, reports), calibrate (calibrate_cli) and sessions (sessions_cli).

The top room of bench: may import every room below it; nothing in bench imports it."""
