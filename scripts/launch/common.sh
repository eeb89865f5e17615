# Shared settings of the 8x MI355X launch recipes. NOT RUN HERE: written for a real node,
# never executed on the CPU box this project is developed on (see docs/benchmark.md).
: "${MODEL:?set MODEL to the GLM-5.2 MXFP4 checkpoint directory}"
HOST="${HOST:-0.0.0.0}"
# Flags every recipe shares: FP8 KV halves MLA cache bytes (44,928 B/token instead of 89,856),
# chunked prefill keeps a 20k prompt from stalling decode for a whole step, the hierarchical
# cache spills radix-cache pages to host memory so shared prefixes survive load spikes, and
# cache reporting gives the benchmark its measured hit rate.
COMMON_ARGS=(
  --model-path "$MODEL"
  --trust-remote-code
  --kv-cache-dtype fp8_e4m3
  --chunked-prefill-size 16384
  --enable-hierarchical-cache --hicache-ratio 2
  --mem-fraction-static 0.88
  --enable-cache-report
)
