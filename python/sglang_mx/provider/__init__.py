"""OpenRouter-style provider endpoint in front of SGLang: keys, pricing, usage, ledger, limits."""
