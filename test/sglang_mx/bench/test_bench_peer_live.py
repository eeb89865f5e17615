"""Peer agreement on the suite's live bundled-MXFP4 server: our runner and SGLang's own
`python -m sglang.benchmark.serving` run one workload (64 in / 32 out, 36 requests, a closed loop
at concurrency 1 and 2) at the same moment, and agree on request throughput and output tok/s
within 10% (peer.LIVE_BOUNDS; the latency medians are shown: on a shared box they swing with the
neighbours' load, so they are held to their bound against a paced server instead,
test_bench_peer_paced.py; the definitions compared are in docs/benchmark.md)."""

from __future__ import annotations

import pytest
from sglang_mx_lab.peer import LIVE_BOUNDS, PeerWorkload, side_by_side, table

pytestmark = pytest.mark.server


# 32 tokens a request, so the server's decode, not each client's turnaround between requests,
# sets the pace: at 8 the suite's loaded box starved one client or the other of CPU for a whole
# run and request throughput disagreed by 11-20% (CI, 2026-12-04: 0.85, 0.80, 1.11), while the
# same clients agree within 3% on a quiet box (docs/results/peer-live-spread.json). With both
# cores held by busy loops (2026-12-04, this box): 8 tokens 0.956 / 0.963 at concurrency 1 / 2,
# 32 tokens 0.984 / 0.991.
OUTPUT_LEN = 32
# A rate over a short run carries its ends: the client that starts late or finishes last runs
# that stretch alone, faster, so the ratio is off by up to a request's time over the run's. At
# 12 requests (6 rounds at concurrency 2) that is up to ~1/6: CI 2026-12-06 failed concurrency 2
# at 0.89. At 36 the ends weigh a third as much; our runner is also prepared (tokenizer, model,
# limits) before SGLang's process starts, so only its event loop stands between the two starts.
NUM_REQUESTS = 36


@pytest.mark.parametrize("concurrency", [1, 2])
def test_agrees_with_sglang_benchmark(live_server, bundled_tokenizer_dir, tmp_path, concurrency):
    w = PeerWorkload(
        input_len=64, output_len=OUTPUT_LEN, num_requests=NUM_REQUESTS, concurrency=concurrency
    )
    got = side_by_side(live_server, bundled_tokenizer_dir, w, tmp_path, bounds=LIVE_BOUNDS)
    ours, theirs = got["ours"], got["sglang"]
    # every request done and counted alike by both (ignore_eos: all OUTPUT_LEN tokens each)
    assert ours["completed"] == theirs["completed"] == NUM_REQUESTS
    assert ours["output_tokens"] == theirs["output_tokens"] == NUM_REQUESTS * OUTPUT_LEN
    # both time the gaps between chunks that carry text (a token that decodes to nothing yet
    # merges two gaps), so at most OUTPUT_LEN - 1 per request
    most = NUM_REQUESTS * (OUTPUT_LEN - 1)
    assert 0 < len(ours["itl_samples"]) <= most and 0 < len(theirs["itl_samples"]) <= most
    # our token audit (client vs usage) held; a CLIENT-BOUND flag from the loaded box may stand,
    # since SGLang's client shares the box with ours
    assert not [w for w in ours["warnings"] if "CLIENT-BOUND" not in w], ours["warnings"]
    print(f"\nconcurrency {concurrency}:\n{table(got['rows'])}")  # the figures, with -s
    assert all(r["ok"] for r in got["rows"]), "\n" + table(got["rows"])
