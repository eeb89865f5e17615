#!/usr/bin/env bash
# The public workload against a running recipe: rate sweep like the published table, then the
# roofline for the same layout. NOT RUN HERE. Usage: LAYOUT=tp8 bench-production.sh URL
set -euo pipefail
: "${MODEL:?set MODEL to the checkpoint directory (its tokenizer builds the prompts)}"
URL="${1:-http://127.0.0.1:30000}"
OUT="${OUT:-bench-results/mi355x-${LAYOUT:-tp8}-$(date +%Y%m%d)}"
sglang-mx bench sweep --url "$URL" --tokenizer "$MODEL" --workload production-20k-1k-60 \
  --rates 0.5,1,1.5,2,2.25,2.4,3,4 --hardware MI355X --page-size "${PAGE_SIZE:-1}" -o "$OUT"
knee=$(python -c "import json,sys; k=json.load(open('$OUT/result.json'))['sweep']['knee']; \
print(k['output_tok_s'] if k else 0)")
sglang-mx roofline --hardware MI355X --layout "${LAYOUT:-tp8}" --measured "$knee"
