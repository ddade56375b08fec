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
// C's loads and stores in the SIMT epilogue (vbatched_gemm.cu, pg_store_micro): plain.
#define PG_LDC(p) (*(p))
#define PG_STC(p, v) (*(p) = (v))
// No C staged through a warp's shared rows (vbatched_gemm.cu, pg_store_staged): it
// relies on 32-thread warps and __syncwarp; AMD's 64-wide wavefronts were not measured.
#define PG_STAGED_C_VENDOR 0
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
// C's loads and stores in the SIMT epilogue (vbatched_gemm.cu, pg_store_micro) as
// global-memory accesses: through a pointer read from a descriptor, a plain access
// compiles to a generic LD / ST (sm_90 SASS). C is read (beta != 0) before the same
// thread writes it, so the L2-coherent load is enough.
#define PG_LDC(p) __ldcg(p)
#define PG_STC(p, v) __stwb((p), (v))
#define PG_CARRY_VENDOR 1
// C staged through a warp's shared rows where its rows are not 16-byte aligned
// (vbatched_gemm.cu, pg_store_staged), on sm_90, where it was measured; pg_syncwarp
// orders a warp's shared accesses. On sm_80 (no register cap there) the 8x8 kinds took
// 14-28 more registers with it and two of them a block an SM less.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define PG_STAGED_C_VENDOR 1
#else
#define PG_STAGED_C_VENDOR 0
#endif
#define pg_syncwarp() __syncwarp()
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
// 16 bytes, cached in L2 only (.cg): operand tiles are read once per block. The
// unsigned form takes the shared address itself (pg_smem_addr), so a loop's copies can
// step one address by constants, which ptxas folds into the instruction.
__device__ __forceinline__ void pg_cp_async16(unsigned dst, const void* src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void pg_cp_async16(void* dst, const void* src, int src_bytes)
{
    pg_cp_async16(pg_smem_addr(dst), src, src_bytes);
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
template <class T>   // (the 16-bit emulation below shuffles 32-bit registers with it too)
__device__ __forceinline__ T pg_shfl32(T v, int src)
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


// ---- 16-bit floating point (float16, bfloat16): storage types and the half MMA ----
// Both are stored as their 16 bits and computed in fp32 (loads widen, the epilogue
// rounds once, to nearest even), so the kernel needs no vendor half header: NVRTC and
// hiprtc see the same two structs. A converting constructor and conversion operator let
// the SIMT path's `acc += a * b` run in fp32 unchanged (the accumulator type is PG_ACC).
// Trivial default construction keeps them legal in __shared__ arrays.
__device__ __forceinline__ float pg_bits_to_f32(unsigned u)
{
    return __uint_as_float(u);
}
__device__ __forceinline__ float pg_f16_to_f32(unsigned short h)
{
#if PG_HIP
    return (float)__builtin_bit_cast(_Float16, h);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
#endif
}
__device__ __forceinline__ unsigned short pg_f32_to_f16(float f)
{
#if PG_HIP
    return __builtin_bit_cast(unsigned short, (_Float16)f);
#else
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
#endif
}
// bfloat16 is fp32's upper half: widening is a shift; narrowing rounds to nearest even
// and keeps NaN a (quiet) NaN.
__device__ __forceinline__ unsigned short pg_f32_to_bf16(float f)
{
    const unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
struct PgHalf {
    unsigned short x;
    PgHalf() = default;
    __device__ __forceinline__ PgHalf(float f) : x(pg_f32_to_f16(f)) {}
    __device__ __forceinline__ operator float() const { return pg_f16_to_f32(x); }
};
struct PgBf16 {
    unsigned short x;
    PgBf16() = default;
    __device__ __forceinline__ PgBf16(float f) : x(pg_f32_to_bf16(f)) {}
    __device__ __forceinline__ operator float() const { return pg_bits_to_f32((unsigned)x << 16); }
};

// 16-bit warp-level MMA: D(16x8, fp32) += A(16x16) B(16x8) over the 32 lanes of a warp,
// A and B in float16 or bfloat16. Fragment layout as data (PTX ISA, "Matrix Fragments
// for mma.m16n8k16 with floating point type"), g = l >> 2, t = l % 4: lane l holds A in
// 4 registers of 2 k-adjacent elements, register r at row g + 8 (r % 2), k 2 t + 8 (r / 2)
// (+0, +1); B in 2 registers, register r at k 2 t + 8 r (+0, +1), column g; C in 4
// floats, i at row g + 8 (i / 2), column 2 t + i % 2.
struct PgMmaHalf {
    static constexpr int M = 16, N = 8, K = 16;
    static constexpr int AR = 4, BR = 2, CE = 4;    // registers of A, B; floats of C
    static __device__ __forceinline__ int a_row(int l, int r) { return (l >> 2) + 8 * (r & 1); }
    static __device__ __forceinline__ int a_k(int l, int r) { return 2 * (l & 3) + 8 * (r >> 1); }
    static __device__ __forceinline__ int b_k(int l, int r) { return 2 * (l & 3) + 8 * r; }
    static __device__ __forceinline__ int b_col(int l) { return l >> 2; }
    static __device__ __forceinline__ int c_row(int l, int i) { return (l >> 2) + 8 * (i >> 1); }
    static __device__ __forceinline__ int c_col(int l, int i) { return 2 * (l & 3) + (i & 1); }
};
// Two 16-bit elements as one 32-bit register, the first in the low half (PTX's order).
__device__ __forceinline__ unsigned pg_pack2(unsigned short lo, unsigned short hi)
{
    return (unsigned)lo | ((unsigned)hi << 16);
}
#if !PG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PG_MMA_HALF 1
__device__ __forceinline__ void pg_mma_16x8x16(float (&c)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2], PgHalf)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ void pg_mma_16x8x16(float (&c)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2], PgBf16)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// Four 8x8 matrices of 16-bit elements from shared memory (ldmatrix): lane l gives the
// address of row l % 8 of matrix l / 8 (16 contiguous bytes); register q of every lane
// receives its fragment of matrix q, the elements (g, 2 t) and (g, 2 t + 1) of it, or,
// transposed, (2 t, g) and (2 t + 1, g): exactly the m16n8k16 A and B register layouts.
template <bool TRANS>
__device__ __forceinline__ void pg_ldmatrix_x4(unsigned (&r)[4], const void* row)
{
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(pg_smem_addr(row)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(pg_smem_addr(row)));
}
#else
// No 16-bit MMA wired here (AMD until its MFMA path exists, pre-sm_80): the same
// fragment contract with shuffles and fp32 FMAs, so every kind compiles and computes the
// same sums everywhere; the planner never offers the MMA kinds on these targets
// (occupancy/archs.py HALF_MMA).
#define PG_MMA_HALF 0
template <class T>
__device__ __forceinline__ float pg_half_of(unsigned v, int hi)
{
    T h;
    h.x = (unsigned short)(hi ? v >> 16 : v & 0xffffu);
    return (float)h;
}
template <class T>
__device__ __forceinline__ void pg_mma_16x8x16(float (&c)[4], const unsigned (&a)[4],
                                               const unsigned (&b)[2], T)
{
    const int l = threadIdx.x & 31;
    // k = 8 kh + kk. The kk loop is not unrolled: unrolled, the shuffles of every fragment
    // of a step stayed live at once and the 64x64 kind spilled 144 bytes on gfx90a
    // (hiprtc, ROCm 5.2); kh is, so every register index below is a constant (a runtime
    // index would put a and b in scratch memory).
#pragma unroll
    for (int kh = 0; kh < 2; ++kh) {
#pragma unroll 1
        for (int kk = 0; kk < 8; ++kk) {
            // A[row][k] sits in lane 4 (row % 8) + kk / 2, register row / 8 + 2 kh; B[k][col]
            // in lane 4 col + kk / 2, register kh; half kk % 2 of each
            const int t = kk >> 1, h = kk & 1;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = PgMmaHalf::c_row(l, i);    // r / 8 = i / 2
                const unsigned a0 = pg_shfl32(a[(i >> 1) + 2 * kh], 4 * (r & 7) + t);
                const unsigned bc = pg_shfl32(b[kh], 4 * PgMmaHalf::c_col(l, i) + t);
                c[i] = fmaf(pg_half_of<T>(a0, h), pg_half_of<T>(bc, h), c[i]);
            }
        }
    }
}
#endif

// How the 16-bit ragged entry points reach their tile function (vbatched_gemm.cu,
// pg_ragged_tile16): a real call on CUDA, where ptxas allocates an inlined tile function
// worse after the slot lookup (spills under the 128x128 kind's cap, sm_90); inlined on
// AMD, where a call keeps its frame in scratch memory and nothing was measured.
#if PG_HIP
#define PG_RAGGED_TILE_CALL __forceinline__
#else
#define PG_RAGGED_TILE_CALL __noinline__
#endif

// ---- Hopper warpgroup MMA (wgmma.mma_async, sm_90a): the wgmma-* families' kinds ----
// One MMA is a whole warpgroup's (128 threads): D(64 x N, fp32, registers) += A(64 x 16)
// B(16 x N), A and B read from shared memory through matrix descriptors, asynchronously:
// issued after wgmma.fence, grouped by commit_group, waited for by wait_group. Only
// sm_90a has it (NVRTC -arch=sm_90a defines __CUDA_ARCH_FEAT_SM90_ALL; kernels/nvrtc.py
// picks that arch for these kinds alone), so no other target ever sees the PTX below.
// Accumulator register i of thread t of the warpgroup (PTX ISA, "wgmma D matrix
// fragment", m64nNk16 f32): row 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2), column
// 8 (i / 4) + 2 (t % 4) + i % 2.
#if !PG_HIP && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define PG_WGMMA 1
__device__ __forceinline__ void pg_wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void pg_wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void pg_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}
// Shared memory written by this thread in the generic proxy (cp.async, plain stores)
// made visible to the async proxy that wgmma reads it through; a barrier after it
// publishes every thread's writes.
__device__ __forceinline__ void pg_fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// An accumulator register the compiler must treat as rewritten here: wgmma writes it
// asynchronously, so no read of it may move above the wait_group that completes it.
__device__ __forceinline__ void pg_wgmma_reg_fence(float& x)
{
    asm volatile("" : "+f"(x) :: "memory");
}
// Matrix descriptor of an operand in shared memory (PTX ISA, "Matrix Descriptor Format"):
// start address, `lbo` (leading byte offset) and `sbo` (stride byte offset) stored >> 4,
// the layout (swizzle) type `mode` in bits 62-63 (0 none, 1 128 B, 2 64 B, 3 32 B);
// what lbo and sbo mean per layout: vbatched_gemm.cu, PgWgStage.
__device__ __forceinline__ unsigned long long pg_wgmma_desc(const void* p, unsigned lbo,
                                                            unsigned sbo, unsigned mode)
{
    const unsigned a = pg_smem_addr(p);
    return (unsigned long long)((a & 0x3ffffu) >> 4) |
           ((unsigned long long)((lbo >> 4) & 0x3fffu) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3fffu) << 32) |
           ((unsigned long long)(mode & 3u) << 62);
}
#define PG_WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                    "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
// D(64 x 128) += A B with the operands' majorness as immediates: TA (TB) 0: A (B) is
// K-major in shared memory, 1: M-major (N-major), the "transpose" of the 16-bit types.
#define PG_WGMMA_64X128(TY)                                                               \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                             \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "             \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "\
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "\
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "\
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "\
                 "%64, %65, p, 1, 1, %67, %68;\n}\n"                                      \
                 : PG_WG_D8(0), PG_WG_D8(8), PG_WG_D8(16), PG_WG_D8(24), PG_WG_D8(32),    \
                   PG_WG_D8(40), PG_WG_D8(48), PG_WG_D8(56)                               \
                 : "l"(a), "l"(b), "r"(1), "n"(TA), "n"(TB) : "memory")
template <int TA, int TB>
__device__ __forceinline__ void pg_wgmma_64x128x16(float (&d)[64], unsigned long long a,
                                                   unsigned long long b, PgHalf)
{
    PG_WGMMA_64X128("f16");
}
template <int TA, int TB>
__device__ __forceinline__ void pg_wgmma_64x128x16(float (&d)[64], unsigned long long a,
                                                   unsigned long long b, PgBf16)
{
    PG_WGMMA_64X128("bf16");
}
#undef PG_WGMMA_64X128
// D(64 x N) (+)= A B in TF32 (wgmma-3xtf32), N = 128 or 64: A (64 x 8) from registers,
// this thread's four as PgMmaTf32's A fragment of its warp's 16 rows; B (8 x N) K-major in
// shared memory (TF32 has no transposed form). scale_d 0 writes D = A B (the
// accumulators' old values ignored). D is %0 .. %(N/2 - 1), then A, B and scale_d.
#define PG_WGMMA_TF32(SHAPE, DREGS, A0, A1, A2, A3, BD, SD, ...)                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SD ", 0;\n"                          \
                 "wgmma.mma_async.sync.aligned." SHAPE ".f32.tf32.tf32 " DREGS ", "         \
                 "{" A0 ", " A1 ", " A2 ", " A3 "}, " BD ", p, 1, 1;\n}\n"                   \
                 : __VA_ARGS__                                                             \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d) : "memory")
template <int N>
__device__ __forceinline__ void pg_wgmma_tf32(float (&d)[N / 2], const unsigned (&a)[4],
                                              unsigned long long b, int scale_d);
template <>
__device__ __forceinline__ void pg_wgmma_tf32<128>(float (&d)[64], const unsigned (&a)[4],
                                                   unsigned long long b, int scale_d)
{
    PG_WGMMA_TF32("m64n128k8",
                  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}",
                  "%64", "%65", "%66", "%67", "%68", "%69",
                  PG_WG_D8(0), PG_WG_D8(8), PG_WG_D8(16), PG_WG_D8(24), PG_WG_D8(32),
                  PG_WG_D8(40), PG_WG_D8(48), PG_WG_D8(56));
}
template <>
__device__ __forceinline__ void pg_wgmma_tf32<64>(float (&d)[32], const unsigned (&a)[4],
                                                  unsigned long long b, int scale_d)
{
    PG_WGMMA_TF32("m64n64k8",
                  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}",
                  "%32", "%33", "%34", "%35", "%36", "%37",
                  PG_WG_D8(0), PG_WG_D8(8), PG_WG_D8(16), PG_WG_D8(24));
}
#undef PG_WGMMA_TF32
#undef PG_WG_D8
#else
#define PG_WGMMA 0
#endif

// Read-only loads of one element: __ldg has no overload for the 16-bit structs.
template <class T>
__device__ __forceinline__ T pg_ldg(const T* p)
{
    return PG_LDG(p);
}
__device__ __forceinline__ PgHalf pg_ldg(const PgHalf* p)
{
    PgHalf h;
    h.x = PG_LDG(&p->x);
    return h;
}
__device__ __forceinline__ PgBf16 pg_ldg(const PgBf16* p)
{
    PgBf16 h;
    h.x = PG_LDG(&p->x);
    return h;
}
#if PG_ASYNC
// The 16-bit MMA kinds' pipeline prologue (vbatched_gemm.cu, pg_mma_k_loop), its stages'
// copies in three widths each (pg_copy16): unrolled, ptxas for sm_80 spilled 4 bytes in
// two kinds (32x32/w16x16 nn, 64x64/w32x32 tn); rolled, ptxas for sm_90 gave others
// 60-120 more registers (128x64/w64x32 nn: 168 -> 252, one resident block fewer).
// Measured with NVRTC 13.0 (tools/vendor_matrix.py).
#if __CUDA_ARCH__ < 900
#define PG_HALF_PROLOGUE_UNROLL _Pragma("unroll 1")
#else
#define PG_HALF_PROLOGUE_UNROLL _Pragma("unroll")
#endif
// Bytes of {hi:lo} = (b, a) picked by `sel`, four 4-bit byte indices (PTX prmt):
// pg_copy_shift16 joins the high half of one word and the low half of the next.
__device__ __forceinline__ unsigned pg_perm(unsigned a, unsigned b, unsigned sel)
{
    return __byte_perm(a, b, sel);
}
// cp.async copies 4, 8 or 16 bytes: a 2-byte element (a 16-bit row that is not 16-byte
// aligned) is copied by the thread itself. Its store is published by the same barrier
// that publishes the stage's asynchronous copies, so the pipeline's order holds.
template <>
__device__ __forceinline__ void pg_cp_async_elem<2>(void* dst, const void* src, int src_bytes)
{
    *static_cast<unsigned short*>(dst) =
        src_bytes ? PG_LDG(static_cast<const unsigned short*>(src)) : (unsigned short)0;
}
#endif

// ---- AMD matrix cores (MFMA): the float16 / bfloat16 / fp64 kinds of the mfma-* families ----
// One MFMA is a whole wave64's: D(16x16) += A(16xK) B(Kx16). Which element each lane holds
// is data (LLVM AMDGPU / AMD's matrix instruction calculator; the same layouts CK's
// xdlops tables describe), checked by tests/test_mfma_lanes.py, which reads these structs
// from this file and runs them through a numpy model of each instruction. Lane l,
// element i (0 .. AE-1) of a fragment:
//   16x16x16 (f16; bf16_1k on gfx90a/gfx94x): A[l % 16][4 (l / 16) + i], B[4 (l / 16) + i][l % 16]
//   16x16x4 f64 (gfx90a/gfx94x):              A[l % 16][l / 16],          B[l / 16][l % 16]
// and C element i (0 .. CE-1): 16x16x16: C[4 (l / 16) + i][l % 16], f64: C[4 i + l / 16][l % 16]
// (the f64 form deals its four rows per lane out in groups of one, the fp32 forms in one
// group of four). gfx908 has no bf16_1k: its 16x16x8bf16 takes two of the four k values a
// lane holds (A[l % 16][2 (l / 16) + i], i = 0, 1); two of them, the first on elements 0-1
// and the second on 2-3, sum the same 16 products, because A and B see the same k order.
// Kept in the form `static ... name(args) { return <expression>; }`: the test parses it.
struct PgMfmaHalf {
    static constexpr int M = 16, N = 16, K = 16, LANES = 64;
    static constexpr int AE = 4, CE = 4;    // A (and B) elements, C floats per lane
    static __device__ __forceinline__ int a_row(int l) { return l & 15; }
    static __device__ __forceinline__ int a_k(int l, int i) { return 4 * (l >> 4) + i; }
    static __device__ __forceinline__ int b_k(int l, int i) { return 4 * (l >> 4) + i; }
    static __device__ __forceinline__ int b_col(int l) { return l & 15; }
    static __device__ __forceinline__ int c_row(int l, int i) { return 4 * (l >> 4) + i; }
    static __device__ __forceinline__ int c_col(int l) { return l & 15; }
};
struct PgMfmaF64 {
    static constexpr int M = 16, N = 16, K = 4, LANES = 64;
    static constexpr int AE = 1, CE = 4;    // A (and B) elements, C doubles per lane
    static __device__ __forceinline__ int a_row(int l) { return l & 15; }
    static __device__ __forceinline__ int a_k(int l, int i) { return (l >> 4) + i; }
    static __device__ __forceinline__ int b_k(int l, int i) { return (l >> 4) + i; }
    static __device__ __forceinline__ int b_col(int l) { return l & 15; }
    static __device__ __forceinline__ int c_row(int l, int i) { return 4 * i + (l >> 4); }
    static __device__ __forceinline__ int c_col(int l) { return l & 15; }
};
#if PG_HIP && (defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) || \
               defined(__gfx941__) || defined(__gfx942__))
#define PG_MFMA 1
typedef float PgF32x4 __attribute__((ext_vector_type(4)));
typedef double PgF64x4 __attribute__((ext_vector_type(4)));
typedef unsigned PgU32x2 __attribute__((ext_vector_type(2)));
typedef _Float16 PgF16x4 __attribute__((ext_vector_type(4)));
typedef short PgI16x4 __attribute__((ext_vector_type(4)));
typedef short PgI16x2 __attribute__((ext_vector_type(2)));
// A lane's four 16-bit elements of A and of B as two registers, elements 0-1 and 2-3 (the
// first of each pair in the low half, pg_pack2's order).
__device__ __forceinline__ PgU32x2 pg_u32x2(const unsigned (&r)[2])
{
    PgU32x2 v;
    v.x = r[0];
    v.y = r[1];
    return v;
}
__device__ __forceinline__ void pg_mfma_16x16x16(PgF32x4& c, const unsigned (&a)[2],
                                                 const unsigned (&b)[2], PgHalf)
{
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(PgF16x4, pg_u32x2(a)),
                                              __builtin_bit_cast(PgF16x4, pg_u32x2(b)), c, 0, 0, 0);
}
__device__ __forceinline__ void pg_mfma_16x16x16(PgF32x4& c, const unsigned (&a)[2],
                                                 const unsigned (&b)[2], PgBf16)
{
#if defined(__gfx908__)
    // two 16x16x8bf16, one per register (see above)
    c = __builtin_amdgcn_mfma_f32_16x16x8bf16(__builtin_bit_cast(PgI16x2, a[0]),
                                              __builtin_bit_cast(PgI16x2, b[0]), c, 0, 0, 0);
    c = __builtin_amdgcn_mfma_f32_16x16x8bf16(__builtin_bit_cast(PgI16x2, a[1]),
                                              __builtin_bit_cast(PgI16x2, b[1]), c, 0, 0, 0);
#else
    c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(PgI16x4, pg_u32x2(a)),
                                                  __builtin_bit_cast(PgI16x4, pg_u32x2(b)), c, 0, 0, 0);
#endif
}
#if !defined(__gfx908__)
#define PG_MFMA_F64 1
// Each of the 16 x 16 x 4 products is an IEEE fp64 FMA (round to nearest even).
__device__ __forceinline__ void pg_mfma_f64_16x16x4(PgF64x4& c, double a, double b)
{
    c = __builtin_amdgcn_mfma_f64_16x16x4f64(a, b, c, 0, 0, 0);
}
#else
#define PG_MFMA_F64 0
#endif
#else
#define PG_MFMA 0
#define PG_MFMA_F64 0
#endif

// ---- TF32: fp32 GEMMs on the tensor cores (precision "tf32" and "3xtf32") ----
// D(16x8, fp32) += A(16x8) B(8x8), A and B in TF32 (fp32's sign, exponent and top 10
// mantissa bits, in a 32-bit register). Fragment layout as data (PTX ISA, "Matrix
// Fragments for mma.m16n8k8", .tf32), g = l >> 2, t = l % 4: lane l holds A in 4
// registers, register r at row g + 8 (r % 2), k t + 4 (r / 2); B in 2, register r at
// k t + 4 r, column g; C in 4 floats as PgMmaHalf's: i at row g + 8 (i / 2), column
// 2 t + i % 2.
struct PgMmaTf32 {
    static constexpr int M = 16, N = 8, K = 8;
    static constexpr int AR = 4, BR = 2, CE = 4;    // registers of A, B; floats of C
    static __device__ __forceinline__ int a_row(int l, int r) { return (l >> 2) + 8 * (r & 1); }
    static __device__ __forceinline__ int a_k(int l, int r) { return (l & 3) + 4 * (r >> 1); }
    static __device__ __forceinline__ int b_k(int l, int r) { return (l & 3) + 4 * r; }
    static __device__ __forceinline__ int b_col(int l) { return l >> 2; }
    static __device__ __forceinline__ int c_row(int l, int i) { return (l >> 2) + 8 * (i >> 1); }
    static __device__ __forceinline__ int c_col(int l, int i) { return 2 * (l & 3) + (i & 1); }
};
#if !PG_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define PG_MMA_TF32 1
// fp32 -> TF32, to nearest with ties away from zero (cvt.rna), as a 32-bit register
// whose 13 low bits are unspecified: the MMA ignores them (a register holding any fp32
// value is read as that value truncated to TF32), and whoever uses the value as a float
// clears them first (pg_tf32_float).
__device__ __forceinline__ unsigned pg_tf32(float f)
{
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}
__device__ __forceinline__ void pg_mma_16x8x8_tf32(float (&c)[4], const unsigned (&a)[4],
                                                   const unsigned (&b)[2])
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#else
// No TF32 MMA here (AMD, pre-sm_80): the same rounding in integer arithmetic (adding
// half a TF32 unit to the magnitude bits rounds ties away from zero; a carry into the
// exponent gives the next binade or infinity; Inf and NaN pass unchanged) and the same
// fragment contract with shuffles and fp32 FMAs, so every TF32 kind compiles and
// computes the same sums everywhere; the planner refuses the precision modes on these
// targets (occupancy/archs.py TF32_MMA).
#define PG_MMA_TF32 0
__device__ __forceinline__ unsigned pg_tf32(float f)
{
    const unsigned u = __float_as_uint(f);
    return (u & 0x7f800000u) == 0x7f800000u ? u : (u + 0x1000u) & 0xffffe000u;
}
// A TF32 operand register as the MMA reads it: the 13 low bits ignored (truncated).
__device__ __forceinline__ float pg_tf32_shfl(unsigned v, int src)
{
#if PG_HIP
    return __uint_as_float((unsigned)__shfl((int)v, src, 32) & 0xffffe000u);
#else
    return __uint_as_float(__shfl_sync(0xffffffffu, v, src, 32) & 0xffffe000u);
#endif
}
__device__ __forceinline__ void pg_mma_16x8x8_tf32(float (&c)[4], const unsigned (&a)[4],
                                                   const unsigned (&b)[2])
{
    const int l = threadIdx.x & 31;
#pragma unroll
    for (int q = 0; q < 2; ++q) {           // k = 4 q + kk
#pragma unroll 1
        for (int kk = 0; kk < 4; ++kk) {
            // A[row][k] sits in lane 4 (row % 8) + kk, register row / 8 + 2 q; B[k][col]
            // in lane 4 col + kk, register q
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int r = PgMmaTf32::c_row(l, i);    // r / 8 = i / 2
                const float x = pg_tf32_shfl(a[(i >> 1) + 2 * q], 4 * (r & 7) + kk);
                const float y = pg_tf32_shfl(b[q], 4 * PgMmaTf32::c_col(l, i) + kk);
                c[i] = fmaf(x, y, c[i]);
            }
        }
    }
}
#endif
// x rounded to TF32 as the MMA reads it, for 3xTF32's big part: half a TF32 unit added
// to the bits, so the truncating read gives cvt.rna's value for every finite x (an Inf or
// NaN x gives any bits: the caller's small part x - big is NaN then).
__device__ __forceinline__ unsigned pg_tf32_big(float x) { return __float_as_uint(x) + 0x1000u; }
// The value of a pg_tf32 register as a float (its unspecified low bits cleared).
__device__ __forceinline__ float pg_tf32_float(unsigned t)
{
    return __uint_as_float(t & 0xffffe000u);
}
// 3xTF32's parts of x: returns big (pg_tf32_big's bits), sets small = x - big's value,
// exact in fp32 (the MMA reads it truncated to TF32). An Inf or NaN x makes small NaN,
// so its products stay NaN, as with cvt.rna.
__device__ __forceinline__ unsigned pg_tf32_split(float x, float& small)
{
    const unsigned big = pg_tf32_big(x);
    small = x - pg_tf32_float(big);
    return big;
}
