#!/usr/bin/env bash
# One device call: versions, GPU tests, the main job, and the mode benchmark.
# Usage on the device machine (repo root): bash tools/device_check.sh [quick]
set -u -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgcache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import cupy, cuda.bindings, numpy; print('cupy', cupy.__version__, 'cuda-bindings', cuda.bindings.__version__, 'numpy', numpy.__version__)"
python3 -m pytest -m gpu tests/test_gpu.py -q -x -p no:cacheprovider ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
python3 -m portgemm run --batch 1024 2>&1 | tee "$OUT/main_job.log"
if [ "${1:-}" = quick ]; then
  python3 bench/modes.py --quick --out "$OUT/modes.json" 2>&1 | tee "$OUT/modes.log"
else
  python3 bench/modes.py --out "$OUT/modes.json" 2>&1 | tee "$OUT/modes.log"
fi
