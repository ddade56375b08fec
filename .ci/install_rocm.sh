#!/usr/bin/env bash
# The AMD toolchain a GPU-less machine can use (docs/design.md §4): Debian's ROCm 5.2 runtime
# (hiprtc lives inside libamdhip64.so.5) + device libraries, hipcc (clang-15: gfx940 and
# LLVM's resource-usage remarks), hip-python, and the code-object readers (pyelftools,
# msgpack). hip-python 7.2.2 is newer than this ROCm 5.2 runtime; only its hiprtc bindings
# are used here (compiling, no device), which work across that gap. Running on an AMD GPU
# needs the hip-python release matching the installed ROCm instead (see pyproject.toml).
# Idempotent and quiet; prints the directory holding the libhiprtc.so symlink (portgemm
# finds it there by itself, see portgemm/kernels/hiprtc_compile.py).
set -euo pipefail

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

need=""
for p in libamdhip64-5 rocm-device-libs hipcc; do
  dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"
done
if [ -n "$need" ]; then
  log="$(mktemp)"
  if ! { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq $need; } >"$log" 2>&1; then
    cat "$log" >&2; exit 1
  fi
  rm -f "$log"
fi

PY="${PYTHON:-$(command -v python || command -v python3)}"
"$PY" -m pip install -q "hip-python==7.2.2.562.43" "pyelftools>=0.29" "msgpack>=1.0"

# hip-python dlopens "libhiprtc.so"; Debian ships hiprtc inside libamdhip64.so.5.
lib=""
for cand in /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 /opt/rocm/lib/libamdhip64.so.5; do
  [ -e "$cand" ] && { lib="$cand"; break; }
done
[ -n "$lib" ] || { echo "libamdhip64.so.5 not found after install" >&2; exit 1; }
dir="${PORTGEMM_HIPRTC_DIR:-$HOME/.cache/portgemm/hiprtc}"
mkdir -p "$dir"
ln -sfn "$lib" "$dir/libhiprtc.so"
echo "$dir"
