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
// No carried next-tile k step (vbatched_gemm.cu, PgCarry): its registers made the fp32
// per-kind variants spill 16-24 bytes on gfx908 and gfx90a (vendor matrix), and the
// persistent launches it serves were measured on NVIDIA only.
#define PG_CARRY_VENDOR 0
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
#define PG_CARRY_VENDOR 1
#define PG_UNROLL_K_DEFAULT _Pragma("unroll")
// The minimum-blocks cap was measured on sm_90; the same cap spills on sm_80 (vendor
// matrix), so older targets get none.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define PG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t)
#else
#define PG_LAUNCH_BOUNDS_MIN(t, b) __launch_bounds__(t, b)
#endif
#endif

// Asynchronous global -> shared copies (cp.async, sm_80+): no registers in between, and
// several k steps in flight. A source size below the copy size fills the rest with
// zeros (0: nothing is read, the source address is only a placeholder). Elsewhere
// PG_ASYNC is 0 and the kernel stages through registers.
#if !PG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PG_ASYNC 1
__device__ __forceinline__ unsigned pg_smem_addr(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}
// 16 bytes, cached in L2 only (.cg): operand tiles are read once per block.
__device__ __forceinline__ void pg_cp_async16(void* dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(pg_smem_addr(dst)), "l"(src), "r"(src_bytes) : "memory");
}
// One element of SIZE (4 or 8) bytes, for rows not 16-byte aligned (.ca: .cg is 16 only).
template <int SIZE>
__device__ __forceinline__ void pg_cp_async_elem(void* dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n"
                 :: "r"(pg_smem_addr(dst)), "l"(src), "n"(SIZE), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void pg_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Wait until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void pg_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
#else
#define PG_ASYNC 0
#endif


// fp64 warp-level MMA: D(8x8) += A(8x4) B(4x8) over the 32 lanes of a warp (on AMD a
// 32-lane half of a wave). Which element each lane holds is data, the same on every
// target (PTX ISA, "Matrix Fragments for mma.m8n8k4 with .f64"): lane l holds
// A[l >> 2][l % 4], B[l % 4][l >> 2] and C[l >> 2][2 (l % 4) + i], i = 0, 1.
struct PgMmaF64 {
    static constexpr int M = 8, N = 8, K = 4;
    static __device__ __forceinline__ int a_row(int l) { return l >> 2; }
    static __device__ __forceinline__ int a_k(int l) { return l & 3; }
    static __device__ __forceinline__ int b_k(int l) { return l & 3; }
    static __device__ __forceinline__ int b_col(int l) { return l >> 2; }
    static __device__ __forceinline__ int c_row(int l) { return l >> 2; }
    static __device__ __forceinline__ int c_col(int l, int i) { return 2 * (l & 3) + i; }
};
// threadIdx.x read in a way the compiler cannot merge with an earlier read, so a value
// derived from it is recomputed instead of kept live (or spilled) across a loop.
__device__ __forceinline__ int pg_thread_index()
{
#if PG_HIP
    return (int)threadIdx.x;
#else
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
#endif
}
#if !PG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
// DMMA (sm_80+): each of the 8 x 8 x 4 products is an IEEE fp64 FMA.
#define PG_MMA_F64 1
__device__ __forceinline__ void pg_mma_f64_8x8x4(double (&c)[2], double a, double b)
{
    asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
        : "+d"(c[0]), "+d"(c[1]) : "d"(a), "d"(b));
}
#else
// No fp64 MMA here (pre-sm_80, AMD until its MFMA path exists): the same fragment
// contract with shuffles and FMAs, so every kind compiles and computes the same result
// everywhere; the planner never offers the MMA kinds on these targets (occupancy/archs.py).
#define PG_MMA_F64 0
__device__ __forceinline__ double pg_shfl32(double v, int src)
{
#if PG_HIP
    return __shfl(v, src, 32);
#else
    return __shfl_sync(0xffffffffu, v, src, 32);
#endif
}
__device__ __forceinline__ void pg_mma_f64_8x8x4(double (&c)[2], double a, double b)
{
    const int l = threadIdx.x & 31;
    const int r = PgMmaF64::c_row(l);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int col = PgMmaF64::c_col(l, i);
#pragma unroll
        for (int k = 0; k < 4; ++k)     // A[r][k] sits in lane 4 r + k, B[k][col] in 4 col + k
            c[i] = fma(pg_shfl32(a, 4 * r + k), pg_shfl32(b, 4 * col + k), c[i]);
    }
}
#endif
