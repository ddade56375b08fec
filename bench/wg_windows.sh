#!/usr/bin/env bash
# One device call (sm_90): the 16-bit wgmma kinds' aligned windows (render.WGMMA_WINDOWS,
# off in the committed tables; bench/NOTES.md, session 20), checked and timed.
#  1. correctness first: tests/test_gpu_wg_windows.py (every kind x dtype x transpose x
#     alignment class, the ragged entry; stops here on a failure), the torch-stream tests
#     of tests/test_gpu_host_path.py, then compute-sanitizer memcheck and racecheck on the
#     odd-leading-dimension cases of the first (a short selection);
#  2. each wgmma kind alone on odd leading dimensions, without and with the windows
#     (tools/wgmma_timing.py --odd-ld, --odd-ld --windows), and aligned with the windows
#     (the aligned loop must be where it was);
#  3. the fp16 / bf16 peer grid, config base against wgwin (windows on, the wgmma kinds
#     weighed for unaligned batches), in one process.
# Results packed as $OUT/wg_windows.tar.gz.
# Usage (repo root): bash bench/wg_windows.sh [grid seconds per config] [dtypes]
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgc}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
grid_s=${1:-100}; dtypes=${2:-float16,bfloat16}
dir="$OUT/wg_windows"; mkdir -p "$dir"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$dir/device.txt"
start=$(date +%s)
pack() { tar czf "$OUT/wg_windows.tar.gz" -C "$OUT" wg_windows; }
python3 -m pytest -m gpu -q -x tests/test_gpu_wg_windows.py 2>&1 | tail -30 | tee "$dir/tests.log"
if [[ ${PIPESTATUS[0]} != 0 ]]; then pack; exit 1; fi
# (and session 19's torch stream wrap for CuPy 14, not yet run on a GPU)
python3 -m pytest -m gpu -q tests/test_gpu_host_path.py -k torch 2>&1 | tail -5 | tee -a "$dir/tests.log"
for tool in memcheck racecheck; do
  compute-sanitizer --tool "$tool" python3 -m pytest -m gpu -q -x tests/test_gpu_wg_windows.py \
    -k "ld-odd-ld-odd and (nn or tt) and bfloat16" 2>&1 | tail -15 | tee "$dir/$tool.log"
done
echo "checks: $(( $(date +%s) - start )) s" | tee -a "$dir/tests.log"
for flags in "--odd-ld" "--odd-ld --windows" "--windows"; do
  python3 tools/wgmma_timing.py --dtype "$dtypes" --wgmma-only $flags \
    --out "$dir/timing${flags// /_}.jsonl" 2>&1 | tail -12
done
python3 bench/kernel_bench.py --dtype "$dtypes" --config "base,wgwin" \
  --time-limit "$grid_s" --out "$dir" 2>&1 | tee "$dir/grid.log"
echo "total: $(( $(date +%s) - start )) s" | tee -a "$dir/grid.log"
pack
