#!/usr/bin/env bash
# One device call: measure the kind factors of the 16-bit families (each mma.sync family
# and the wgmma family weighed beside it, python -m portgemm.tuning.kind_factors --write:
# the mma.sync families' copy-path figures too), then time the fp16/bf16 peer grid
# planned with them (config base) and with the ceilings committed before the call
# (config before) in one process. With floors=1, first the families' step floors (python
# -m portgemm.tuning.step_floors --write: one tile per SM, a K step alone), then the
# factors refitted over them. Results packed as $OUT/half_factors.tar.gz, with
# the new ceilings.json beside it; the compile cache as $OUT/pgc.tar.gz (a later call may
# carry and unpack it to skip compiling).
# Usage (repo root):
#   bash bench/half_factors.sh [seconds per family] [grid seconds per config] [dtypes] [floors]
# dtypes: float16,bfloat16 (default) or one of them; floors: 0 (default) or 1 (the
# mma.sync families' floors only)
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
budget=${1:-45}; grid_s=${2:-100}; dtypes=${3:-float16,bfloat16}; floors=${4:-0}
dir="$OUT/half_factors"; mkdir -p "$dir"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$dir/device.txt"
start=$(date +%s)
specs=("float16 portgemm-f16" "float16 wgmma-f16" "bfloat16 portgemm-bf16" "bfloat16 wgmma-bf16")
per_family() {   # per_family <tuning module> <file prefix> [family prefix]: --write each
  local module=$1 prefix=$2 only=${3:-} spec dt fam
  for spec in "${specs[@]}"; do
    read -r dt fam <<< "$spec"
    [[ ",$dtypes," == *",$dt,"* && $fam == "$only"* ]] || continue
    python3 -m "portgemm.tuning.$module" --dtype "$dt" --family "$fam" --budget "$budget" \
      --write --out "$dir/${prefix}_$fam.json" 2>&1 | tee -a "$dir/$module.log"
  done
}
cp portgemm/occupancy/ceilings.json "$dir/ceilings_before.json"
export PG_CEILINGS_BEFORE="$dir/ceilings_before.json"
if [[ $floors == 1 ]]; then
  per_family step_floors sf portgemm-   # the mma.sync families (the wgmma ones' floors
fi                                     # misled the staged plans: bench/NOTES.md, session 17)
per_family kind_factors kf
echo "factors: $(( $(date +%s) - start )) s" | tee -a "$dir/kind_factors.log"
cp portgemm/occupancy/ceilings.json "$OUT/ceilings.json"
python3 bench/kernel_bench.py --dtype "$dtypes" --config "base,before" \
  --time-limit "$grid_s" --out "$dir" 2>&1 | tee "$dir/grid.log"
echo "total: $(( $(date +%s) - start )) s" | tee -a "$dir/grid.log"
tar czf "$OUT/half_factors.tar.gz" -C "$OUT" half_factors && rm -rf "$dir"
tar czf "$OUT/pgc.tar.gz" -C "$(dirname "$PORTGEMM_CACHE_DIR")" "$(basename "$PORTGEMM_CACHE_DIR")"
