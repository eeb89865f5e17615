"""CPU stand-ins for packages SGLang imports but never uses on a CPU box (see README.md)."""
