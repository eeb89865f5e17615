"""What goes to the server and how it leaves: the server's limits read before a run, token-exact
prompts, trace files (ours, public formats, the provider's ledger), one timed streaming request,
the load generator over one or many processes and its own self-check, multi-turn sessions,
Prometheus scrapes, the ideal prefix cache a trace can reach, and SGLang's own benchmark client.

The lowest room of bench: imports no other room (measure and capacity only)."""
