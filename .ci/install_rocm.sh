#!/usr/bin/env bash
# Install the AMD toolchain a GPU-less machine can use (DESIGN.md §4):
#   Debian's ROCm 5.2 runtime (hiprtc lives inside libamdhip64.so.5) + device libs,
#   hipcc (clang-15, for gfx940 and LLVM's resource-usage remarks), hip-python.
# Idempotent and quiet. Prints the directory holding the libhiprtc.so symlink; put it on
# LD_LIBRARY_PATH or leave it where portgemm looks for it (PORTGEMM_HIPRTC_DIR or
# ~/.cache/portgemm/hiprtc, see portgemm/kernels/hiprtc_compile.py).
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need=""
for p in libamdhip64-5 rocm-device-libs hipcc llvm-15; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $need >/dev/null
fi

PY="${PYTHON:-python3}"
"$PY" -m pip install -q --disable-pip-version-check \
  "hip-python==7.2.2.562.43" "pyelftools>=0.29" "msgpack>=1.0"

# hip-python dlopens "libhiprtc.so"; Debian ships hiprtc inside libamdhip64.so.5.
lib="$(ldconfig -p | awk '/libamdhip64\.so\.5 /{print $NF; exit}')"
if [ -z "$lib" ]; then echo "libamdhip64.so.5 not found after install" >&2; exit 1; fi
dir="${PORTGEMM_HIPRTC_DIR:-$HOME/.cache/portgemm/hiprtc}"
mkdir -p "$dir"
ln -sfn "$lib" "$dir/libhiprtc.so"
echo "$dir"
