set -u
export PYTHONUNBUFFERED=1
timeout 200 python3 bench/kernel_bench.py --dtype float64 --extra --config base,dmma-cap4,dmma-st3 --out $OUT > $OUT/kbench.log 2>&1; echo "bench rc $?"; grep -v "^f64\|^---\|^case" $OUT/kbench.log | tail -12
NCU_CASES="512/256/256 --dtype float64 --kind 64x64/w32x32;512/256/256 --dtype float64 --peer cublas" timeout 150 bash tools/device_round.sh ncu > $OUT/ncu_round.log 2>&1; echo "ncu rc $?"
grep -a -E "^  [a-z_]+.*\(|Kernel|Duration|bank|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Throughput|Memory Throughput|Block Limit|Executed Ipc" $OUT/ncu.txt | head -60
timeout 220 python3 -m pytest -m gpu tests/test_gpu_kernels.py -q -p no:cacheprovider -rs -x -k "cuda" > $OUT/gpu_tests.log 2>&1; echo "tests rc $?"; tail -4 $OUT/gpu_tests.log
