"""The self-check tests build mx_dsa backends over the attention tests' bare DSA pool: put
test/sglang_mx/attention on sys.path so `dsa_pool_support` imports from here as it does there."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "attention"))
