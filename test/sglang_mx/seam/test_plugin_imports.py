"""What loading the plugin imports in a launcher process. SGLang applies every hook by importing
its target when plugins load, before it sets PROMETHEUS_MULTIPROC_DIR; a hook whose target pulls
in prometheus_client then makes the main process's counters (sglang:prompt_tokens_total, the
bench token audit's source) vanish from /metrics. The PD hooks did (seam/pd_cpu.py), so they
register only in a PD launch."""

from __future__ import annotations

import subprocess
import sys

from sglang_mx.seam.pd_cpu import disaggregation_launch

PROBE = """
import sys
sys.argv += {extra!r}
from sglang_mx.seam import plugin
plugin.register()
from sglang.srt.plugins.hook_registry import HookRegistry
HookRegistry.apply_hooks()
print("prometheus_client" in sys.modules)
"""


def test_plugin_load_leaves_prometheus_to_sglang():
    out = subprocess.run([sys.executable, "-c", PROBE.format(extra=["--tp", "2"])],
                         capture_output=True, text=True, timeout=180,
                         env={"HF_HUB_OFFLINE": "1", "PATH": ""})  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False", "prometheus_client imported at load"


def test_disaggregation_launch_reads_the_mode():
    assert disaggregation_launch(["x", "--disaggregation-mode", "decode"])
    assert disaggregation_launch(["--disaggregation-mode=prefill"])
    assert not disaggregation_launch(["--disaggregation-mode", "null"])
    assert not disaggregation_launch(["--tp", "2"]) and not disaggregation_launch([])
