// portgemm vendor-compat header: the only place where CUDA and HIP differ.
// NVRTC defines __CUDACC_RTC__, hiprtc defines __HIPCC_RTC__; clang's HIP mode __HIP__.
#if defined(__HIPCC_RTC__) || defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#define PG_HIP 1
#ifndef __HIPCC_RTC__
#include <hip/hip_runtime.h>
#endif
// AMD has no separate read-only data path worth naming; plain loads.
#define PG_LDG(p) (*(p))
// Launch bounds with a minimum of B resident blocks per compute unit (CUDA's meaning).
// HIP's own __launch_bounds__ reads B as waves per SIMD, so spell it out: B blocks of
// ceil(T / wave) waves spread over a CU's 4 SIMDs.
#ifdef __AMDGCN_WAVEFRONT_SIZE
#define PG_WAVE __AMDGCN_WAVEFRONT_SIZE
#else
#define PG_WAVE 64
#endif
#define PG_LAUNCH_BOUNDS_MIN(t, b) __attribute__((amdgpu_flat_work_group_size(1, t), \
    amdgpu_waves_per_eu(((b) * (((t) + PG_WAVE - 1) / PG_WAVE) + 3) / 4)))
#else
#define PG_HIP 0
// Read-only cache path for A and B (they are never written by the kernel).
#define PG_LDG(p) __ldg(p)
#define PG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t, b)
#endif

typedef long long pg_i64;
