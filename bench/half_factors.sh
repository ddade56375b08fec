#!/usr/bin/env bash
# One device call: measure the kind factors of the 16-bit families (each mma.sync family
# and the wgmma family weighed beside it, python -m portgemm.tuning.kind_factors --write),
# then time the fp16/bf16 peer grid planned with them (config base) and without them
# (kf16off) in one process. Results packed as $OUT/half_factors.tar.gz, with the new
# ceilings.json beside it; the compile cache as $OUT/pgc.tar.gz (a later call may carry
# and unpack it to skip compiling).
# Usage (repo root):
#   bash bench/half_factors.sh [seconds per family] [grid seconds per config] [dtypes]
# dtypes: float16,bfloat16 (default) or one of them
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
budget=${1:-45}; grid_s=${2:-100}; dtypes=${3:-float16,bfloat16}
dir="$OUT/half_factors"; mkdir -p "$dir"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$dir/device.txt"
start=$(date +%s)
for spec in "float16 portgemm-f16" "float16 wgmma-f16" "bfloat16 portgemm-bf16" "bfloat16 wgmma-bf16"; do
  set -- $spec
  [[ ",$dtypes," == *",$1,"* ]] || continue
  python3 -m portgemm.tuning.kind_factors --dtype "$1" --family "$2" --budget "$budget" \
    --write --out "$dir/kf_$2.json" 2>&1 | tee -a "$dir/kind_factors.log"
done
echo "factors: $(( $(date +%s) - start )) s" | tee -a "$dir/kind_factors.log"
cp portgemm/occupancy/ceilings.json "$OUT/ceilings.json"
python3 bench/kernel_bench.py --dtype "$dtypes" --config base,kf16off \
  --time-limit "$grid_s" --out "$dir" 2>&1 | tee "$dir/grid.log"
echo "total: $(( $(date +%s) - start )) s" | tee -a "$dir/grid.log"
tar czf "$OUT/half_factors.tar.gz" -C "$OUT" half_factors && rm -rf "$dir"
tar czf "$OUT/pgc.tar.gz" -C "$(dirname "$PORTGEMM_CACHE_DIR")" "$(basename "$PORTGEMM_CACHE_DIR")"
