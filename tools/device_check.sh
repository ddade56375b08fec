#!/usr/bin/env bash
# One device call: versions, every GPU test, compute-sanitizer (memcheck, racecheck) over a
# small every-mode workload, and the main job. Logs go to $OUT.
# Usage on the device machine (repo root): bash tools/device_check.sh [--no-sanitizer]
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgcache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupy, cuda.bindings, numpy; print('cupy', cupy.__version__, 'cuda-bindings', cuda.bindings.__version__, 'numpy', numpy.__version__)"
python3 -m pytest -m gpu tests -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log" | tail -25
python3 -m portgemm run --batch 1024 2>&1 | tee "$OUT/main_job.log"
if [ "${1:-}" != --no-sanitizer ]; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 9 python3 tools/sanitize_batches.py \
      > "$OUT/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -a -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1))"
    grep -a -c WRONG "$OUT/sanitizer_$tool.log" | sed 's/^/  wrong results: /'
  done
fi
