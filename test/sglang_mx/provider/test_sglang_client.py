"""SGLang's own benchmark client through the provider in front of the default server (issue 41):
`python -m sglang.benchmark.serving --backend sglang-oai-chat` on shared-prefix prompts at
concurrency 4, from a cold cache, so first tokens wait for prefill and the provider's keep-alives
fire. Every request must succeed and leave one settled `ok` row in the ledger."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest
from provider_support import MODEL_ID, priced_provider
from sglang_mx.provider.keys import KeyStore
from sglang_mx.provider.ledger import Ledger

pytestmark = pytest.mark.server

GROUPS, PER_GROUP, OUTPUT_LEN = 4, 8, 32  # the configuration: 32 requests
WARMUP = 1  # the client's own warm-up request, sent first (and billed: it is a request too)


def test_sglang_bench_client_through_provider(default_server: str, tmp_path) -> None:
    from sglang_mx.assets import bundled_model_path

    db = tmp_path / "provider.sqlite"
    _, key = KeyStore(db).create("bench")
    out = tmp_path / "bench.jsonl"
    # A fresh seed: prompts no earlier test cached, so prefill (not the cache) sets the TTFT.
    seed = random.randrange(1, 2**31)
    with priced_provider(default_server, tmp_path, db) as prov:
        cmd = [sys.executable, "-m", "sglang.benchmark.serving", "--backend", "sglang-oai-chat",
               "--base-url", prov["url"], "--model", MODEL_ID,
               "--tokenizer", str(bundled_model_path("glm5-quark")),
               "--dataset-name", "generated-shared-prefix", "--gsp-num-groups", str(GROUPS),
               "--gsp-prompts-per-group", str(PER_GROUP), "--gsp-system-prompt-len", "256",
               "--gsp-question-len", "64", "--gsp-output-len", str(OUTPUT_LEN),
               "--max-concurrency", "4", "--warmup-requests", str(WARMUP), "--seed", str(seed),
               "--output-file", str(out), "--output-details"]  # fmt: skip
        env = dict(os.environ, OPENAI_API_KEY=key, HOME=str(tmp_path))  # its dataset cache
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text().splitlines()[-1])
    errors = [e for e in result["errors"] if e]
    assert result["completed"] == GROUPS * PER_GROUP, errors[:3]
    assert not errors, errors[:3]
    rows = Ledger(db).rows()
    assert Counter(row.status for row in rows) == {"ok": GROUPS * PER_GROUP + WARMUP}, [
        (row.status, row.error) for row in rows if row.status != "ok"
    ]
    # Each billed its 32 tokens (the client sends ignore_eos), as the client counted them.
    assert all(row.completion_tokens == OUTPUT_LEN for row in rows)
    assert result["output_lens"] == [OUTPUT_LEN] * (GROUPS * PER_GROUP)
