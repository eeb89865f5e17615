from __future__ import annotations

import sys
from pathlib import Path

# These modules import each other and the planner tests' shared fixtures (plan_support).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2] / "sglang_mx" / "plan"))
