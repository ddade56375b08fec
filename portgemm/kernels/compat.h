// portgemm vendor-compat header: the only place where CUDA and HIP differ.
// NVRTC defines __CUDACC_RTC__, hiprtc defines __HIPCC_RTC__; clang's HIP mode __HIP__.
#if defined(__HIPCC_RTC__) || defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#define PG_HIP 1
#ifndef __HIPCC_RTC__
#include <hip/hip_runtime.h>
#endif
// AMD has no separate read-only data path worth naming; plain loads.
#define PG_LDG(p) (*(p))
#else
#define PG_HIP 0
// Read-only cache path for A and B (they are never written by the kernel).
#define PG_LDG(p) __ldg(p)
#endif

typedef long long pg_i64;
