"""Choose the decode-attention launch tiles from compiler data and write
sgl_kernel_rocm/configs/<op>/<arch>.json with "source": "static" (no GPU needed).

Each candidate tile (BLOCK_N, num_warps, num_stages) is compiled for the arch at GLM shapes (GQA
with 12 query heads per KV head; MLA/DSA 8 and 64 heads x 512 + 64; the DSA indexer), bf16 and
FP8 KV; the pick passes the compile gate with the least time the cost model predicts at batch
32, 20k context (sgl_kernel_rocm/compile_check/static_tune.py, compile_check/costmodel).
Split planning keeps its derived rule.

  python scripts/tune_attention.py --static gfx950 [--static sm90 ...] [--op decode_mla ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG_DIR = REPO / "sgl-kernel-rocm" / "sgl_kernel_rocm" / "configs"


def main(argv: list[str] | None = None) -> int:
    from sgl_kernel_rocm.compile_check.archs import ARCHS
    from sgl_kernel_rocm.compile_check.static_tune import ATTN_OPS, attention_table

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--static", action="append", choices=sorted(ARCHS), required=True)
    p.add_argument("--op", action="append", choices=sorted(ATTN_OPS))
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument(
        "--also-triton",
        action="append",
        type=Path,
        default=None,
        help="picks must also pass under the Triton in this dir (default .triton/3.6.0)",
    )
    args = p.parse_args(argv)
    for arch in args.static:
        for op in args.op or list(ATTN_OPS):
            t0 = time.time()
            default = REPO / ".triton" / "3.6.0"
            also = args.also_triton if args.also_triton is not None else (
                [default] if default.exists() else [])  # fmt: skip
            table = attention_table(op, arch, jobs=args.jobs, also=also)
            path = CONFIG_DIR / op / f"{arch}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(table, indent=2) + "\n")
            tile = {
                k: v
                for k, v in table["DEFAULT"]["any"].items()
                if k[0].isupper() or k[:4] == "num_"
            }
            print(f"wrote {path}: {tile} ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
