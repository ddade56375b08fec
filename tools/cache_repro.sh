#!/usr/bin/env bash
# Compile-cache robustness on a CUDA machine (run from the repo root; results to $OUT).
# 1. portgemm's cache fresh, the driver's compute cache warm: NVRTC then returns the
#    cubin with an empty ptxas log, which once made every compile fail.
# 2. every cached binary truncated; 3. every cached binary replaced by one whose digest
#    checks out but which the driver refuses. Each run must print a small max rel error.
set -u -o pipefail
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
unset CUDA_CACHE_DISABLE
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
a=$(mktemp -d) b=$(mktemp -d)
rm -rf ~/.nv/ComputeCache
step() { echo "== $1"; shift; "$@" 2>&1 | grep -a -E "error|Error|backend|GFLOP" ; echo "exit ${PIPESTATUS[0]}"; }
{
step "first run, empty caches (PORTGEMM_CACHE_DIR=$a)" env PORTGEMM_CACHE_DIR=$a python3 -m portgemm run --batch 64
echo "driver compute cache: $(du -sh ~/.nv/ComputeCache 2>/dev/null | cut -f1)"
step "second run, fresh portgemm cache, warm driver cache (PORTGEMM_CACHE_DIR=$b)" env PORTGEMM_CACHE_DIR=$b python3 -m portgemm run --batch 64
python3 - <<'PY'
# What NVRTC returns now that the driver cache is warm: the log size of a compile of the
# main job's fused kernel, whose PTX the driver has already seen.
from portgemm.kernels import nvrtc
from portgemm.kernels.render import render
from portgemm.kernels.variants import catalogue_variants
r = render({v.name: v for v in catalogue_variants()}["pg_f32_nn_fused_zhang2025"])
n = nvrtc._nvrtc()
for src in (r.source, r.source + "\n#define PG_UNUSED_TAIL 1\n"):
    prog = nvrtc._check(n, n.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], []))
    opts = [o.encode() for o in nvrtc.OPTIONS + ("-arch=sm_90",)]
    nvrtc._check(n, n.nvrtcCompileProgram(prog, len(opts), opts), prog)
    log = nvrtc._log(n, prog)
    size = nvrtc._check(n, n.nvrtcGetCUBINSize(prog))
    print(f"NVRTC log {len(log)} chars, ptxas report {'present' if nvrtc.parse_ptxas_log(log, r.name) else 'ABSENT'}, cubin {size} bytes")
    n.nvrtcDestroyProgram(prog)
PY
for f in "$b"/*.bin; do truncate -s 100 "$f"; done
step "every cached binary truncated" env PORTGEMM_CACHE_DIR=$b python3 -m portgemm run --batch 64
python3 - "$b" <<'PY'
import hashlib, json, pathlib, sys
for meta in pathlib.Path(sys.argv[1]).glob("*.json"):
    junk = b"\x7fELF" + bytes(range(256)) * 4
    meta.with_suffix(".bin").write_bytes(junk)
    m = json.loads(meta.read_text()); m["sha256"] = hashlib.sha256(junk).hexdigest()
    meta.write_text(json.dumps(m))
PY
step "every cached binary replaced by a digest-valid image the driver refuses" env PORTGEMM_CACHE_DIR=$b python3 -m portgemm run --batch 64
step "and once more, from the repaired cache" env PORTGEMM_CACHE_DIR=$b python3 -m portgemm run --batch 64
} 2>&1 | tee "$OUT/cache_repro.log"
