// portgemm vendor-compat header: the only place where CUDA and HIP differ.
// NVRTC defines __CUDACC_RTC__, hiprtc defines __HIPCC_RTC__; clang's HIP mode __HIP__.
// A pragma whose argument is macro-expanded first: PG_PRAGMA(unroll PG_K_UNROLL).
#define PG_PRAGMA_TEXT(x) _Pragma(#x)
#define PG_PRAGMA(x) PG_PRAGMA_TEXT(x)
#if defined(__HIPCC_RTC__) || defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#define PG_HIP 1
#ifndef __HIPCC_RTC__
#include <hip/hip_runtime.h>
#endif
// AMD has no separate read-only data path worth naming; plain loads.
#define PG_LDG(p) (*(p))
// CUDA's minimum-blocks hint caps registers; HIP reads its second argument as waves per
// SIMD instead, and a cap of 2 blocks already made AMD variants spill (vendor matrix), so
// HIP drops it.
#define PG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t)
// AMDGPU's scheduler hoists the shared-memory reads of every unrolled k step, so a full
// unroll of the BK loop costs 2-3x the VGPRs (gfx90a, clang 15: large tile 201 -> 108
// at 4, fused kernel 256 + AGPRs -> 156). Chosen from compiled counts and the occupancy
// model; not timed on AMD hardware.
#define PG_UNROLL_K_DEFAULT _Pragma("unroll 4")
#else
#define PG_HIP 0
// Read-only cache path for A and B (they are never written by the kernel).
#define PG_LDG(p) __ldg(p)
#define PG_UNROLL_K_DEFAULT _Pragma("unroll")
// The minimum-blocks cap was measured on sm_90; the same cap spills on sm_80 (vendor
// matrix), so older targets get none.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define PG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t)
#else
#define PG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t, b)
#endif
#endif

