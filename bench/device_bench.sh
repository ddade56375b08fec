#!/usr/bin/env bash
# One device call of `python -m portgemm bench`: the GPU test of the bench, then the run,
# packed as one tar.gz under $OUT (the device returns few files).
# Usage (repo root): bash bench/device_bench.sh grid|paper|quick [extra bench options]
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgcache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
what=${1:-quick}; shift || true
case "$what" in
  grid) flags=(--grid) ;;
  paper) flags=(--paper) ;;
  quick) flags=(--grid --quick) ;;
  *) echo "usage: $0 grid|paper|quick [options]" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -m pytest -m gpu tests/test_bench_gpu.py -q -p no:cacheprovider 2>&1 | tail -5
dir="$OUT/$what"
start=$(date +%s)
python3 -m portgemm bench "${flags[@]}" --no-progress --out "$dir" "$@" 2>&1 | tee "$OUT/$what.log"
rc=${PIPESTATUS[0]}
echo "bench $what: exit $rc after $(( $(date +%s) - start )) s" | tee -a "$OUT/$what.log"
tar czf "$OUT/$what.tar.gz" -C "$OUT" "$what" && rm -rf "$dir"
exit "$rc"
