# Shared part of the 8x MI355X launch recipes. The flags themselves are data:
# python/sglang_mx/recipes/mi355x.json, printed by `sglang-mx recipe NAME`. The suite starts every
# recipe's flag set scaled to 2 ranks on the CPU box (test/sglang_mx/recipes/test_layouts.py; what it
# substitutes and why: `sglang-mx recipe NAME --cpu`). Not run here as written: no MI355X.
: "${MODEL:?set MODEL to the GLM-5.2 MXFP4 checkpoint directory}"
HOST="${HOST:-0.0.0.0}"
# recipe_args NAME [--role ROLE ...]: one engine's flags into the array RECIPE_ARGS.
recipe_args() {
  mapfile -t RECIPE_ARGS < <(sglang-mx recipe "$@")
  [ "${#RECIPE_ARGS[@]}" -gt 0 ] || { echo "no flags for recipe $1" >&2; exit 2; }
}
