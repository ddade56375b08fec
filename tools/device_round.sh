#!/usr/bin/env bash
# One device call of several parts, logs under $OUT (the device returns at most 8 files).
# Usage (repo root, on the device): bash tools/device_round.sh PART [PART ...]
#   tests     every GPU test                       planner   bench/planner_proof.py
#   ceilings  measure the ceilings (no write)      host      bench/host_overhead.py --grid
#   packed    bench/packed_overhead.py             sanitize  compute-sanitizer memcheck+racecheck
#   plantime  bench/plan_time.py on this host      main      the main job
#   tune      python -m portgemm tune (writes occupancy/tuned/<arch>.json here, copied to $OUT)
#   grid      bash bench/device_bench.sh grid        kernel    bench/kernel_bench.py
#   ncu       Nsight Compute (--set full) of NCU_CASES (tools/ncu_case.py args, ';'-separated)
#   profile   tools/profile_host.py (attribute costs, stage times, cProfile of a call)
#   splitk    bench/split_k_bench.py (split-K against split_k=False and cuBLAS grouped)
#   fp64      bench/kernel_bench.py --dtype float64 and bench/fp64_default.py (old vs new default)
#   half      fp16/bf16/tf32 peer grid (bench/kernel_bench.py --dtype HALF_DTYPES, HALF_ARGS)
#             and the MoE bench, uniform and Zipf routing (bench/moe_bench.py MOE_ARGS):
#             half_grid.*, moe.*, moe_zipf.*, half.log
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export PORTGEMM_CACHE_DIR=${PORTGEMM_CACHE_DIR:-/tmp/pgcache}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for part in "$@"; do
  start=$(date +%s)
  case "$part" in
    tests) python3 -m pytest -m gpu tests -q -p no:cacheprovider -rs -x ${PYTEST_ARGS:-} \
             > "$OUT/gpu_tests.log" 2>&1; tail -15 "$OUT/gpu_tests.log" ;;
    planner) python3 bench/planner_proof.py --out "$OUT" ${PLANNER_ARGS:-} 2>&1 | tee "$OUT/planner.log" | tail -60 ;;
    ceilings) python3 -m portgemm bench --ceilings --no-write --out "$OUT" 2>&1 | tail -20 ;;
    host) python3 bench/host_overhead.py --grid --out "$OUT/host_overhead.json" 2>&1 | tee "$OUT/host_overhead.txt" | tail -70 ;;
    packed) python3 bench/packed_overhead.py --out "$OUT/packed.json" 2>&1 | tee "$OUT/packed.txt" | tail -45 ;;
    plantime) python3 bench/plan_time.py 2>&1 | tee "$OUT/plan_time.txt" | tail -40 ;;
    main) python3 -m portgemm run --batch 1024 2>&1 | tail -20 ;;
    tune) python3 -m portgemm tune --budget "${TUNE_BUDGET:-180}" --no-progress 2>&1 | tee "$OUT/tune.txt" | tail -40
          cp portgemm/occupancy/tuned/*.json "$OUT/" ;;
    grid) bash bench/device_bench.sh grid 2>&1 | tail -40 ;;
    kernel) python3 bench/kernel_bench.py --out "$OUT" 2>&1 | tail -60 ;;
    fp64) python3 bench/kernel_bench.py --dtype float64 --out "$OUT" > "$OUT/fp64.log" 2>&1
          python3 bench/fp64_default.py --out "$OUT" >> "$OUT/fp64.log" 2>&1; tail -20 "$OUT/f64_default.txt"
          grep -a -E "geomean" "$OUT/fp64.log" | tail -5 ;;
    splitk) python3 bench/split_k_bench.py --out "$OUT" 2>&1 | tee "$OUT/split_k.txt" | tail -40 ;;
    half) python3 bench/kernel_bench.py --dtype "${HALF_DTYPES:-float16,bfloat16,tf32,3xtf32}" ${HALF_ARGS:-} \
            --out "$OUT" > "$OUT/half.log" 2>&1; echo "kernel_bench (tensor-core grid): exit $?"
          grep -a -E "geomean|peak|grouped matmul|FAIL|Error" "$OUT/half.log" | head -20
          for routing in uniform zipf; do
            python3 bench/moe_bench.py --routing $routing ${MOE_ARGS:-} --out "$OUT" >> "$OUT/half.log" 2>&1
            echo "moe_bench --routing $routing: exit $?"
          done
          grep -a -E "geomean" "$OUT/half.log" | tail -12 ;;
    profile) python3 tools/profile_host.py > "$OUT/profile_host.txt" 2>&1; tail -30 "$OUT/profile_host.txt" ;;
    ncu) IFS=';' read -ra cases <<< "${NCU_CASES:-1024/128/256;1024/128/256 --peer cublas}"
         for c in "${cases[@]}"; do
           echo "===== ncu: $c" >> "$OUT/ncu.txt"
           # shellcheck disable=SC2086
           "$(command -v ncu || echo /usr/local/cuda/bin/ncu)" --profile-from-start off --set full --import-source no ${NCU_ARGS:-} \
             python3 tools/ncu_case.py $c >> "$OUT/ncu.txt" 2>&1
           echo "  $c: exit $?"
         done ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 9 python3 tools/sanitize_batches.py \
          > "$OUT/sanitizer_$tool.log" 2>&1
        echo "compute-sanitizer $tool: exit $? ($(grep -a -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer_$tool.log" | tail -1))"
        grep -a -c WRONG "$OUT/sanitizer_$tool.log" | sed 's/^/  wrong results: /'
      done ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
  echo "== $part: $(( $(date +%s) - start )) s"
done
