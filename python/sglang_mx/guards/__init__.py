"""Request guards: what SGLang 0.5.23 would let through to a scheduler that dies on it.

- `checks`: pure functions over a request's token ids, counts and indexes (GuardViolation, a
  ValueError SGLang turns into a 400); the provider reuses them (`provider/guards.py`).
- `http_app`: guards on SGLang's HTTP app (non-object JSON bodies, scrubbed validation errors).
- `hooks`: wires both into SGLang (`register()`, called by the plugin).
"""
