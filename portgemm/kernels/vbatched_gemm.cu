// portgemm: the one variable-size batched GEMM kernel source, CUDA dialect, compiled by
// NVRTC and hiprtc alike. render.py prepends the #defines that specialise it:
//   PG_T            float | double | PgHalf | PgBf16 (compat.h: float16, bfloat16 storage)
//   PG_ACC          the arithmetic type: PG_T, or float for the 16-bit types (absent: PG_T)
//   PG_HALF         1: PG_T is a 16-bit type (only pg_tile_mma16 is defined), else 0 (only
//                   the fp64 pg_tile_mma)
//   PG_TRANS_A/_B   0 | 1: op(X) = X^T
//   PG_THREADS      block size (max over the kinds)
//   PG_MIN_BLOCKS   minimum resident blocks per compute unit (caps registers); 0: no hint
//   PG_K_UNROLL     unroll count of the BK loop; 0: the vendor default (compat.h)
//   PG_NAME         extern "C" entry point
//   PG_GRIDZ        0: flat tile list (block -> tiles via block_ptr); 1: MAGMA grid.z layout
//   PG_SMEM_ELEMS   shared-memory elements of the register path (max over the kinds)
//   PG_STAGES       cp.async pipeline stages on sm_80+ (0: the register path everywhere)
//   PG_SMEM_ELEMS_ASYNC  shared-memory elements of the cp.async path (PG_STAGES stages)
//   PG_DYN_SMEM     1: the shared tiles are the launch's dynamic shared memory (the wgmma
//                   kinds' stages past 48 KiB); 0 or absent: a static array
//   PG_PAD          shared-memory row padding in elements (keeps 16-byte alignment)
//   PG_KINDS(X)     X(id, BM, BN, BK, NT, RM, RN, E) for every tile kind this entry point
//                   runs; E = 0: SIMT, RM x RN a thread's micro-tile; E = 1: warp MMA (fp64),
//                   E = 2: warp MMA (float16 / bfloat16, fp32 accumulators), RM x RN a
//                   warp's sub-tile; E = 3 / 4: TF32 / 3xTF32 (PG_TF32);
//                   E = 5: AMD MFMA (PG_MFMA_KINDS)
//   PG_MMA          1: some kind is an MMA kind (its pipeline also runs for B^T)
//   PG_TF32         1: some kind is a TF32 kind (E = 3: TF32, E = 4: 3xTF32, fp32 only;
//                   pg_tile_tf32 is defined only then); 0 or absent: none
//   PG_MFMA_KINDS   1: some kind is an AMD MFMA kind (E = 5, pg_tile_mfma: RM x RN a
//                   64-lane wave's sub-tile); AMD MFMA targets only
//   PG_RAGGED       1: the entry point is the ragged-M GEMM (group ends read on the
//                   device, one kind); 0 or absent: PG_GRIDZ says which
//   PG_CARRY        1: a block running several tiles of one kind prefetches the next
//                   tile's first k step during the current one's last (register path,
//                   SIMT kinds; where compat.h's PG_CARRY_VENDOR allows)
//   PG_LEAN         1: the SIMT kinds' lean edge code (per-kind entry points of our own
//                   families, render.lean): units and copies inside the matrix skip the
//                   element checks, the epilogue picks its loop by beta once; 0 or absent:
//                   the code before it
//   PG_LEAN_STEP    1 (with PG_LEAN; render.lean_step): the register path's main loop
//                   loads a k step inside the matrix from per-tile unit offsets with no
//                   checks and keeps its two stages interleaved; 0 or absent: as before
//   PG_STAGED_C     1 (with PG_LEAN; render.staged_c): unaligned C stored through a warp's
//                   shared rows (pg_store_staged) where compat.h's PG_STAGED_C_VENDOR
//                   allows; 0 or absent: element stores from the micro-tile
//   PG_KPIPE        1 (with PG_LEAN and PG_STAGES >= 2; render.kpipe): the cp.async main
//                   loop stages A k-major by element copies and double-buffers the
//                   fragments (PgAsyncKT); 0 or absent: as before
//   PG_SHIFT16_CH   4 or 8 (16-bit MMA kinds, sm_80+; render.shift16): inside slices of
//                   2-byte aligned rows copied as shifted words (pg_copy_shift16), chunks
//                   of that many elements, rows of at least PG_SHIFT16_MIN_CONT elements
//                   only; 0 or absent: element copies
//   PG_WG_WINDOWS   1 (the 16-bit wgmma kinds, render.wg_windows): a tile whose A or B rows
//                   are not 16-byte aligned stages them through aligned windows and a
//                   shift pass (PgWgWindow); 0 or absent: 4-byte and element copies
//   PG_TILE_EXPAND  1: render only the tile-list expansion (needs PG_T, PG_NAME)
//   PG_SPLIT_REDUCE 1: render only the split-K reduction, at the end of this file (needs
//                   PG_T, PG_NAME, PG_REDUCE_THREADS, PG_REDUCE_CHUNK)
//   PG_STAGE_COPY   1: render only the alignment staging copy, at the end of this file
//                   (needs PG_T, PG_NAME, PG_STAGE_THREADS, PG_STAGE_CHUNK)
//
// C_i = alpha_i * op(A_i) @ op(B_i) + beta_i * C_i, all matrices row-major with
// leading dimensions (row strides, in elements). beta == 0 never reads C; alpha == 0
// never reads A or B (BLAS semantics).

#ifndef PG_ACC
#define PG_ACC PG_T
#endif
#ifndef PG_TF32
#define PG_TF32 0
#endif
#ifndef PG_LEAN
#define PG_LEAN 0
#endif
#ifndef PG_LEAN_STEP
#define PG_LEAN_STEP 0
#endif
#ifndef PG_KPIPE
#define PG_KPIPE 0
#endif
#ifndef PG_SHIFT16_CH
#define PG_SHIFT16_CH 0
#define PG_SHIFT16_MIN_CONT 0
#endif
#ifndef PG_STAGED_C
#define PG_STAGED_C 0
#endif
#ifndef PG_WG_WINDOWS
#define PG_WG_WINDOWS 0
#endif
// Unaligned C staged through shared memory (pg_store_staged) in a PG_STAGED_C variant,
// where compat.h's vendor and target allow.
#define PG_STAGED_C_ON (PG_STAGED_C && PG_LEAN && PG_STAGED_C_VENDOR)

struct PgGemm {                 // one per GEMM; layout mirrored by render.GEMM_DTYPE
    const PG_T* A;
    const PG_T* B;
    PG_T* C;
    int lda, ldb, ldc;          // 32-bit: validation keeps every element offset below 2^31,
    int M, N, K;                // which frees registers for occupancy (bench/NOTES.md)
    double alpha, beta;
};

struct alignas(16) PgTile {     // one per tile; layout mirrored by render.DEVICE_TILE_DTYPE
    int gemm, m0, n0, kind;
};

#if PG_RAGGED
// Ragged M with the group ends on the device, in torch._grouped_mm's convention: group g
// is rows [offs[g-1], offs[g]) of A and C (offs[-1] = 0 implied). One launch, no host
// round trip and nothing written but C: a graph replay reads the offsets current at
// replay time. The grid is an upper-bound tile list of rows / tm + groups row slots
// times tiles_n column tiles, one tile per block. Group g owns the row slots from
// first(g) = start(g) / tm + g up to first(g + 1); its real row tiles come first and
// never reach first(g + 1), so no scan is needed: a block finds its group by a binary
// search over first() and builds that group's descriptor in registers. A slot past its
// group's rows leaves at once. backends/ragged.py emulates this logic on the host; keep
// the two in step. Offsets are clamped into [0, rows], so bad ones give wrong results,
// never an access outside A or C.
__device__ __forceinline__ int pg_group_start(const int* offs, int g, int rows)
{
    const int s = g > 0 ? offs[g - 1] : 0;
    return min(max(s, 0), rows);
}

// Slot `slot` (row slot slot / tiles_n, column tile slot % tiles_n) -> the descriptor of
// the group it falls in and the tile's origin; false for a slot past its group's rows
// (then g, m0 and n0 are not set).
__device__ __forceinline__ bool pg_ragged_slot(
    const int* __restrict__ offs, int groups, int rows, int tm, int tn, int tiles_n,
    int slot, const PG_T* A, const PG_T* B, PG_T* C, long long a_step, long long b_stride,
    int lda, int ldb, int ldc, int N, int K, double alpha, double beta,
    const double* __restrict__ alphas, const double* __restrict__ betas, PgGemm& g,
    int& m0, int& n0)
{
    const int r = slot / tiles_n, j = slot - r * tiles_n;
    int lo = 0, hi = groups - 1;        // the last group with first(g) <= r; first(0) = 0
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (pg_group_start(offs, mid, rows) / tm + mid <= r) lo = mid; else hi = mid - 1;
    }
    const int s = pg_group_start(offs, lo, rows);
    const int e = min(max(offs[lo], s), rows);
    m0 = (r - (s / tm + lo)) * tm;
    if (m0 < 0 || m0 >= e - s) return false;
    n0 = j * tn;
    g.A = A + s * a_step;
    g.B = B + lo * b_stride;
    g.C = C + (long long)s * ldc;
    g.lda = lda; g.ldb = ldb; g.ldc = ldc;
    g.M = e - s; g.N = N; g.K = K;
    g.alpha = alphas ? alphas[lo] : alpha;
    g.beta = betas ? betas[lo] : beta;
    return true;
}
#endif  // PG_RAGGED (slot lookup)

#if PG_TILE_EXPAND
// A one-tile-per-block plan's tile list and block pointers, written on the device from
// its per-GEMM layout, so the host sends O(batch) numbers instead of 16 bytes a tile.
// `layout` holds six int rows of `spans + 1` entries each, one column per GEMM that has
// tiles, in launch order (backends/expand.py builds it and emulates this kernel; keep
// the two in step): first (the GEMM's first tile; entry `spans` is n_tiles), gemm,
// gn (tile columns), tm, tn, kind. One thread per tile: a binary search over first
// finds its GEMM, the index inside the GEMM gives its place in the row-major tile grid
// (the order of tile_layout.TileLayout.tiles). Thread n_tiles writes the last pointer.
extern "C" __global__ void __launch_bounds__(256)
PG_NAME(const int* __restrict__ layout, int spans, int n_tiles, PgTile* __restrict__ tiles,
        int* __restrict__ block_ptr)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t > n_tiles) return;
    block_ptr[t] = t;               // one tile per block
    if (t == n_tiles) return;
    const int stride = spans + 1;
    const int* first = layout;
    int lo = 0, hi = spans - 1;     // the last span with first[s] <= t (first[0] = 0)
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (first[mid] <= t) lo = mid; else hi = mid - 1;
    }
    const int i = t - first[lo];
    const int gn = layout[2 * stride + lo];
    const int r = i / gn;
    PgTile tile;
    tile.gemm = layout[stride + lo];
    tile.m0 = r * layout[3 * stride + lo];
    tile.n0 = (i - r * gn) * layout[4 * stride + lo];
    tile.kind = layout[5 * stride + lo];
    tiles[t] = tile;
}
#elif PG_SPLIT_REDUCE || PG_STAGE_COPY
// (the split-K reduction and the staging copy are at the end of this file)
#else

#if PG_K_UNROLL > 0
#define PG_UNROLL_K PG_PRAGMA(unroll PG_K_UNROLL)
#else
#define PG_UNROLL_K PG_UNROLL_K_DEFAULT
#endif

// 16-byte accesses: PG_V elements of PG_T move as one float4 / double2.
constexpr int PG_V = 16 / (int)sizeof(PG_T);

__device__ __forceinline__ bool pg_aligned16(const void* p)
{
    return ((unsigned long long)p & 15ull) == 0;
}
#if PG_HALF
// The 16-bit alignment of one operand (pg_tile_mma16): the widest copy, in bytes (16, 8,
// 4 or 2), that every row of its slices starts on: the base address, the leading
// dimension and the slice origin along the stored row (`col0`, a multiple of the tile
// size) in bytes, all divisible by it. A random leading dimension is odd half the time
// and a multiple of 8 elements only one time in 8, so the narrower copies below carry
// most GEMMs of a random batch.
__device__ __forceinline__ int pg_align_of(const void* p, int ld, int col0)
{
    const unsigned x = (unsigned)(unsigned long long)p | (unsigned)(ld * 2) | (unsigned)(col0 * 2);
    return (x & 15u) == 0 ? 16 : (x & 7u) == 0 ? 8 : (x & 3u) == 0 ? 4 : 2;
}
#endif
__device__ __forceinline__ void pg_ld16(const float* p, float* r)
{
    const float4 v = PG_LDG(reinterpret_cast<const float4*>(p));
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
__device__ __forceinline__ void pg_ld16(const double* p, double* r)
{
    const double2 v = PG_LDG(reinterpret_cast<const double2*>(p));
    r[0] = v.x; r[1] = v.y;
}
// Plain (coherent) 16-byte loads and stores: shared memory and C.
__device__ __forceinline__ void pg_get16(const float* p, float* r)
{
    const float4 v = *reinterpret_cast<const float4*>(p);
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
__device__ __forceinline__ void pg_get16(const double* p, double* r)
{
    const double2 v = *reinterpret_cast<const double2*>(p);
    r[0] = v.x; r[1] = v.y;
}
__device__ __forceinline__ void pg_put16(float* p, const float* r)
{
    *reinterpret_cast<float4*>(p) = make_float4(r[0], r[1], r[2], r[3]);
}
__device__ __forceinline__ void pg_put16(double* p, const double* r)
{
    *reinterpret_cast<double2*>(p) = make_double2(r[0], r[1]);
}
// The 16-bit types: eight elements as one uint4, element 2 i in the low half of word i.
template <class H>
__device__ __forceinline__ void pg_unpack8(const uint4 v, H* r)
{
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        r[2 * i].x = (unsigned short)(w[i] & 0xffffu);
        r[2 * i + 1].x = (unsigned short)(w[i] >> 16);
    }
}
template <class H>
__device__ __forceinline__ uint4 pg_pack8(const H* r)
{
    return make_uint4(pg_pack2(r[0].x, r[1].x), pg_pack2(r[2].x, r[3].x),
                      pg_pack2(r[4].x, r[5].x), pg_pack2(r[6].x, r[7].x));
}
#define PG_16BIT_ACCESS(H)                                                            \
    __device__ __forceinline__ void pg_ld16(const H* p, H* r)                         \
    { pg_unpack8(PG_LDG(reinterpret_cast<const uint4*>(p)), r); }                     \
    __device__ __forceinline__ void pg_get16(const H* p, H* r)                        \
    { pg_unpack8(*reinterpret_cast<const uint4*>(p), r); }                            \
    __device__ __forceinline__ void pg_put16(H* p, const H* r)                        \
    { *reinterpret_cast<uint4*>(p) = pg_pack8(r); }
PG_16BIT_ACCESS(PgHalf)
PG_16BIT_ACCESS(PgBf16)

// C's accesses in the SIMT epilogue (compat.h: PG_LDC, PG_STC), one element or 16 bytes;
// the templates (16-bit C, which no lean variant writes) are plain accesses.
template <class T>
__device__ __forceinline__ T pg_ldc(const T* p) { return *p; }
template <class T>
__device__ __forceinline__ void pg_stc(T* p, T v) { *p = v; }
template <class T>
__device__ __forceinline__ void pg_ldc16(const T* p, T* r) { pg_get16(p, r); }
template <class T>
__device__ __forceinline__ void pg_stc16(T* p, const T* r) { pg_put16(p, r); }
__device__ __forceinline__ float pg_ldc(const float* p) { return PG_LDC(p); }
__device__ __forceinline__ double pg_ldc(const double* p) { return PG_LDC(p); }
__device__ __forceinline__ void pg_stc(float* p, float v) { PG_STC(p, v); }
__device__ __forceinline__ void pg_stc(double* p, double v) { PG_STC(p, v); }
__device__ __forceinline__ void pg_ldc16(const float* p, float* r)
{
    const float4 v = PG_LDC(reinterpret_cast<const float4*>(p));
    r[0] = v.x; r[1] = v.y; r[2] = v.z; r[3] = v.w;
}
__device__ __forceinline__ void pg_ldc16(const double* p, double* r)
{
    const double2 v = PG_LDC(reinterpret_cast<const double2*>(p));
    r[0] = v.x; r[1] = v.y;
}
__device__ __forceinline__ void pg_stc16(float* p, const float* r)
{
    PG_STC(reinterpret_cast<float4*>(p), make_float4(r[0], r[1], r[2], r[3]));
}
__device__ __forceinline__ void pg_stc16(double* p, const double* r)
{
    PG_STC(reinterpret_cast<double2*>(p), make_double2(r[0], r[1]));
}

__host__ __device__ constexpr bool pg_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

// How one operand's BK x BX slice (X = M for A, N for B) is staged through registers
// into shared memory, stored k-major as Xs[k][x]. In global memory the operand is
// row-major with rows of CONT contiguous elements: CONT = BX when x runs along the
// stored rows (A^T, B), CONT = BK when k does (A, B^T: "transposed" staging, the
// shared store turns k-contiguous vectors into one element in each of W rows).
// Each thread moves L units of W contiguous elements: W = PG_V (one 16-byte load)
// where the slice divides into whole units per thread, else W = 1 (the scalar path).
//
// Transposed staging writes W rows at one x; a warp covers KU = BK / W k-groups of
// 32 / KU consecutive x, which collide on the same banks unless the rows are skewed.
// Instead of padding (which would break the 16-byte alignment the reads need), column
// x of row k lives at x ^ SWZ(k), SWZ(k) = (k / W % KU) * (32 / KU): an XOR of whole
// 16-byte groups, so the compute loop's vector reads stay contiguous. It needs a power
// of two BX >= 32 and 32 / KU >= W; other shapes keep the PG_PAD padded rows.
template <int BK, int BX, int NT, bool TRANSPOSED>
struct PgStage {
    static constexpr int CONT = TRANSPOSED ? BK : BX;
    static constexpr int W = (CONT % PG_V == 0 && (BK * BX) % (NT * PG_V) == 0) ? PG_V : 1;
    static constexpr int UNITS = BK * BX / W;
    static constexpr int L = (UNITS + NT - 1) / NT;
    static constexpr int KU = BK / W;
    static constexpr bool SWIZZLE = TRANSPOSED && W > 1 && pg_pow2(BX) && BX >= 32 &&
                                    KU <= 32 && 32 / KU >= W;
    static constexpr int S = SWIZZLE ? BX : BX + PG_PAD;   // row stride of Xs
    static constexpr int SPAN = SWIZZLE ? 32 / KU : 0;

    static __device__ __forceinline__ int swz(int k) { return SWIZZLE ? (k / W % KU) * SPAN : 0; }

    // Unit u covers stored row `o` (of this slice), columns c .. c + W - 1.
    static __device__ __forceinline__ void unit(int u, int& o, int& c)
    {
        o = u / (CONT / W);
        c = (u % (CONT / W)) * W;
    }

    // Global -> registers. (rbase, cbase): the slice's first stored row and column;
    // rlim, clim: the stored matrix's rows and columns. `vec` (uniform per GEMM): the
    // base address and leading dimension keep every unit 16-byte aligned.
    // PG_LEAN: a unit wholly inside the matrix (most units of most steps) loads with no
    // element checks also on unaligned operands (scalar loads), where the per-element
    // checks and their selects cost more issue slots than the loads (bench/NOTES.md,
    // session 9). Otherwise only 16-byte units skip them.
    static __device__ __forceinline__ void load(PG_T (&r)[L][W], const PG_T* __restrict__ X,
                                                int ld, int rbase, int cbase, int rlim,
                                                int clim, bool vec, int tid
#if PG_LEAN_STEP
                                                , const unsigned* q = nullptr
#endif
                                                )
    {
#pragma unroll
        for (int l = 0; l < L; ++l) {
            const int u = tid + l * NT;
            int o, c;
            unit(u, o, c);
            const int row = rbase + o, col = cbase + c;
            const bool live = (UNITS % NT == 0 || u < UNITS) && row < rlim;
#if PG_LEAN
#if PG_LEAN_STEP
            // q (the main loop's, offsets()): X is the step's first element and the unit
            // starts q[l] on (the same address where the unit is live: its row is not
            // clamped then), so no row address is computed
            const PG_T* p = q != nullptr ? X + q[l] : X + row * ld + col;
            if (live && col + W <= clim) {
#else
            if (live && col + W <= clim) {
                const PG_T* p = X + row * ld + col;
#endif
                if (W > 1 && vec) {
                    pg_ld16(p, r[l]);
                } else {
#pragma unroll
                    for (int j = 0; j < W; ++j) r[l][j] = pg_ldg(p + j);
                }
            } else {
#else
            if (W > 1 && vec && live && col + W <= clim) {
                pg_ld16(X + row * ld + col, r[l]);
            } else {
#endif
#pragma unroll
                for (int j = 0; j < W; ++j)
#if PG_LEAN_STEP
                    r[l][j] = (live && col + j < clim) ? pg_ldg(p + j) : PG_T(0);
#else
                    r[l][j] = (live && col + j < clim) ? pg_ldg(X + row * ld + col + j) : PG_T(0);
#endif
            }
        }
    }

#if PG_LEAN_STEP
    // PG_LEAN_STEP's main loop keeps each unit's offset in the tile's first k step and loads
    // a step wholly inside the matrix from the step's address plus it, with no checks:
    // the unit's row address was recomputed and its bounds checked every step
    // (bench/NOTES.md, session 10). The caller tests `inside` per step (ROWS, CONT);
    // the rest go through load(). Offsets, not pointers: a 64-bit address a unit spilled
    // 4-36 bytes under the register caps (sm_90). Rows are clamped into the matrix, so
    // a row past the edge (never read from here) cannot overflow; rlim >= 1 there.
    static constexpr int ROWS = UNITS * W / CONT;   // stored rows of one slice

    static __device__ __forceinline__ void offsets(unsigned (&q)[L], int ld, int rbase, int cbase,
                                                   int rlim, int tid)
    {
#pragma unroll
        for (int l = 0; l < L; ++l) {
            int o, c;
            unit(tid + l * NT, o, c);
            q[l] = unsigned(min(rbase + o, rlim - 1) * ld + cbase + c);
        }
    }

    // A slice wholly inside the matrix: unit l at X + (koff + q[l]) (koff: the step's
    // offset), a 32-bit sum, so each address is one wide multiply-add (as 64-bit sums
    // the compiler sign-extended and added in pairs). One uniform branch on `vec` (per
    // GEMM), not one per unit.
    static __device__ __forceinline__ void load_inside(PG_T (&r)[L][W], const PG_T* __restrict__ X,
                                                       unsigned koff, const unsigned (&q)[L],
                                                       bool vec, int tid)
    {
        if (W > 1 && vec) {
#pragma unroll
            for (int l = 0; l < L; ++l)
                if (UNITS % NT == 0 || tid + l * NT < UNITS) pg_ld16(X + (koff + q[l]), r[l]);
        } else {
#pragma unroll
            for (int l = 0; l < L; ++l)
                if (UNITS % NT == 0 || tid + l * NT < UNITS) {
                    const PG_T* p = X + (koff + q[l]);
#pragma unroll
                    for (int j = 0; j < W; ++j) r[l][j] = pg_ldg(p + j);
                }
        }
    }

    // One k step of the main loop: unchecked where `inside` (the step's whole slice lies
    // inside the matrix), else load() with its checks, addressed from the same offsets.
    // (rbase, cbase, rlim, clim) as in load(); koff: the step's offset from X.
    static __device__ __forceinline__ void load_step(PG_T (&r)[L][W], const PG_T* __restrict__ X,
                                                     int ld, unsigned koff, const unsigned (&q)[L],
                                                     bool inside, int rbase, int cbase, int rlim,
                                                     int clim, bool vec, int tid)
    {
        if (inside)
            load_inside(r, X, koff, q, vec, tid);
        else
            load(r, X + koff, ld, rbase, cbase, rlim, clim, vec, tid, q);
    }
#endif

    // Registers -> Xs[k][x] (one stage).
    static __device__ __forceinline__ void store(const PG_T (&r)[L][W], PG_T* xs, int tid)
    {
#pragma unroll
        for (int l = 0; l < L; ++l) {
            const int u = tid + l * NT;
            if (UNITS % NT != 0 && u >= UNITS) continue;
            int o, c;
            unit(u, o, c);
            if (TRANSPOSED) {           // o = x, c = k: one element in each of W rows
#if PG_LEAN_STEP
                // c is a multiple of W, so the W rows share one swizzle: one address and
                // constant row steps (per element, the compiler kept W addresses)
                PG_T* xc = xs + c * S + (o ^ swz(c));
#pragma unroll
                for (int j = 0; j < W; ++j) xc[j * S] = r[l][j];
#else
#pragma unroll
                for (int j = 0; j < W; ++j) xs[(c + j) * S + (o ^ swz(c + j))] = r[l][j];
#endif
            } else if (W > 1) {         // o = k, c = x: one 16-byte store
                pg_put16(xs + o * S + c, r[l]);
            } else {
                xs[o * S + c] = r[l][0];
            }
        }
    }

    // The compute loop's read of N contiguous x (a multiple of 16 bytes when N % W == 0
    // and x is W-aligned) from row k.
    template <int N>
    static __device__ __forceinline__ void read(PG_T* v, const PG_T* xs, int k, int x)
    {
        const PG_T* row = xs + k * S;
        if (N % PG_V == 0 && S % PG_V == 0) {
#pragma unroll
            for (int i = 0; i < N; i += PG_V) pg_get16(row + ((x + i) ^ swz(k)), v + i);
        } else {
#pragma unroll
            for (int i = 0; i < N; ++i) v[i] = row[(x + i) ^ swz(k)];
        }
    }
};

#if PG_ASYNC  // its copy helpers exist only there (compat.h)
// Issue one thread's cp.async copies of a slice's units: UNITS units of W contiguous
// elements, CONT / W of them to a stored row, thread tid taking units tid + l NT. Unit
// (o, c) covers stored row o (of the slice), columns c .. c + W - 1, and goes to
// dst(o, c). (rbase, cbase): the slice's first stored row and column; rlim, clim: the
// stored matrix's rows and columns; `vec`: 16-byte units are aligned (as in
// PgStage::load); `inside` (uniform): the whole slice lies inside the matrix, so no
// unit needs its bounds checked (most steps of most tiles: the checks cost more issue
// slots than the copies). Units past the edge are zero-filled by the copy itself.
// ELEMS_UNCHECKED: an inside slice on unaligned rows (not vec) also skips the checks,
// copying W elements a unit (the SIMT pipeline of a PG_LEAN variant, PgAsync; the MMA
// kinds' stages keep their checked element copies there).
template <int W, int L, int UNITS, int CONT, int NT, class Dst, bool ELEMS_UNCHECKED = false>
__device__ __forceinline__ void pg_copy_units(Dst dst_of, const PG_T* __restrict__ X, int ld,
                                              int rbase, int cbase, int rlim, int clim,
                                              bool vec, bool inside, int tid)
{
    if (W > 1 && vec && inside) {
#pragma unroll
        for (int l = 0; l < L; ++l) {
            const int u = tid + l * NT;
            if (UNITS % NT != 0 && u >= UNITS) continue;
            const int o = u / (CONT / W), c = (u % (CONT / W)) * W;
            pg_cp_async16(dst_of(o, c), X + (rbase + o) * ld + cbase + c, 16);
        }
        return;
    }
    if (ELEMS_UNCHECKED && inside) {    // unaligned rows: W element copies, unchecked
#pragma unroll
        for (int l = 0; l < L; ++l) {
            const int u = tid + l * NT;
            if (UNITS % NT != 0 && u >= UNITS) continue;
            const int o = u / (CONT / W), c = (u % (CONT / W)) * W;
            const PG_T* src = X + (rbase + o) * ld + cbase + c;
            PG_T* dst = dst_of(o, c);
#pragma unroll
            for (int j = 0; j < W; ++j)
                pg_cp_async_elem<sizeof(PG_T)>(dst + j, src + j, (int)sizeof(PG_T));
        }
        return;
    }
#pragma unroll
    for (int l = 0; l < L; ++l) {
        const int u = tid + l * NT;
        if (UNITS % NT != 0 && u >= UNITS) continue;
        const int o = u / (CONT / W), c = (u % (CONT / W)) * W;
        const int row = rbase + o, col = cbase + c;
        PG_T* dst = dst_of(o, c);
        const bool live = row < rlim;
        if (W > 1 && vec) {
            const int n = live ? max(0, min(W, clim - col)) : 0;
            pg_cp_async16(dst, n > 0 ? X + row * ld + col : X, n * (int)sizeof(PG_T));
        } else {
#pragma unroll
            for (int j = 0; j < W; ++j) {
                const bool in = live && col + j < clim;
                pg_cp_async_elem<sizeof(PG_T)>(dst + j, in ? X + row * ld + col + j : X,
                                               in ? (int)sizeof(PG_T) : 0);
            }
        }
    }
}

#if PG_HALF
// One thread's copies of a 16-bit slice (stored rows of CONT elements, ELEMS in all) in
// chunks of CH elements (CH * 2 bytes: 8 or 4 by cp.async, 2 by the thread itself,
// pg_cp_async_elem<2>) into a PgMmaStage layout (Stage::pos). Chunk q = tid + l NT:
// consecutive lanes take consecutive chunks of a row, so a warp's loads cover whole
// sectors and its shared stores one 128-byte bank line (no conflicts in any PgMmaStage
// layout; with each thread stepping through its own 16-byte unit, the lanes' narrow
// stores fell 4 ways on the same banks). NT is a multiple of the chunks in a row, so a thread keeps
// one column and its chunks lie RS rows apart: one pointer and one bound, not one per
// chunk (which the compiler hoisted out of the k loop and spilled under the 128x128
// kind's register cap). A chunk past the matrix edge is zero-filled by the copy itself.
template <int CH, int CONT, int ELEMS, int NT, class Stage>
__device__ __forceinline__ void pg_copy_chunks16(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                 int rbase, int cbase, int rlim, int clim, int tid)
{
    constexpr int PER_ROW = CONT / CH, ROWS = ELEMS / CONT, RS = NT / PER_ROW;
    static_assert(CONT % CH == 0 && NT % PER_ROW == 0 && ROWS % RS == 0 &&
                  (RS % 2 == 0 || !Stage::SKEW), "whole chunks per thread, a constant row step");
    const int o = tid / PER_ROW, c = (tid % PER_ROW) * CH;
    const int col = cbase + c;
    const int n = max(0, min(CH, clim - col));      // this thread's live elements in a chunk
    const int rows = n > 0 ? rlim - rbase - o : 0;  // chunk l is live when l RS < rows
    const PG_T* src = X + (rbase + o) * ld + col;
#pragma unroll
    for (int l = 0; l < ROWS / RS; ++l) {
        const bool live = l * RS < rows;
        // pos(o + l RS, c) as a constant step (the pair skew splits too: RS is even)
        pg_cp_async_elem<CH * 2>(xs + Stage::pos(o, c) + Stage::pos(l * RS, 0),
                                 live ? src + l * RS * ld : X, live ? n * 2 : 0);
    }
}

// The element copies of an inside slice (every row live, every column inside the matrix)
// on rows only 2-byte aligned (an odd leading dimension): a thread moves chunks of CH
// elements (8 or 4) as CH / 2 aligned 4-byte loads and one CH * 2-byte shared store,
// where pg_copy_chunks16<1> issues CH loads and CH stores of 2 bytes. A row whose first
// element sits 2 bytes into a word (parity p = 1: every other row) takes its words from
// one element before the chunk, and each stored pair is the high half of one word and
// the low half of the next (pg_perm); its chunk's last element is the low half of one
// more word, loaded alone, so no load reaches past the chunk's last element. The word
// before a chunk holds the element before it: in the matrix (the row or the one above),
// or, for the first row's first chunk, in the same allocation (a base that is 2 mod 4
// bytes is inside its allocation, which starts aligned). Chunks RS rows apart (RS even)
// share the parity. CUDA only (sm_80+: PG_ASYNC), as the other 16-bit stage copies.
template <int CH, int CONT, int ELEMS, int NT, class Stage>
__device__ __forceinline__ void pg_copy_shift16(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int tid)
{
    constexpr int NW = CH / 2, PER_ROW = CONT / CH, ROWS = ELEMS / CONT, RS = NT / PER_ROW;
    static_assert((CH == 4 || CH == 8) && CONT % CH == 0 && NT % PER_ROW == 0 &&
                  ROWS % RS == 0 && RS % 2 == 0, "whole chunks per thread, rows of one parity");
    const int o = tid / PER_ROW, c = (tid % PER_ROW) * CH;
    const PG_T* src = X + (rbase + o) * ld + cbase + c;
    const int p = (int)((unsigned long long)src >> 1) & 1;
    const unsigned* w = reinterpret_cast<const unsigned*>(src - p);
    const unsigned sel = p ? 0x5432u : 0x3210u;   // p = 0: the first word as it is
    const int step = RS / 2 * ld;                   // words between a thread's chunks
#pragma unroll
    for (int l = 0; l < ROWS / RS; ++l) {
        const unsigned* wl = w + l * step;
        unsigned a[NW + 1], v[NW];
#pragma unroll
        for (int j = 0; j < NW; ++j) a[j] = PG_LDG(wl + j);
        a[NW] = p ? (unsigned)PG_LDG(reinterpret_cast<const unsigned short*>(wl + NW)) : 0u;
#pragma unroll
        for (int j = 0; j < NW; ++j) v[j] = pg_perm(a[j], a[j + 1], sel);
        PG_T* dst = xs + Stage::pos(o, c) + Stage::pos(l * RS, 0);
        if constexpr (CH == 8)
            *reinterpret_cast<uint4*>(dst) = make_uint4(v[0], v[1], v[2], v[3]);
        else
            *reinterpret_cast<uint2*>(dst) = make_uint2(v[0], v[1]);
    }
}

// A 16-bit slice by the widest copy its alignment allows (pg_align_of): 16-byte units as
// pg_copy_units (W = PG_V), else chunks of 4 or 2 bytes (pg_copy_chunks16; an inside
// slice's 2-byte rows by pg_copy_shift16); 8-byte
// chunks (a leading dimension of 4 mod 8 elements) take the 4-byte path: a third
// path's hoisted addresses cost registers the 128x128 kind does not have.
// `phase` 0 issues the cp.async copies (align >= 4), phase 1 the element copies (align
// 2), which pg_mma_k_loop places after a step's MMAs.
template <int W, int L, int UNITS, int CONT, int NT, class Stage>
__device__ __forceinline__ void pg_copy16(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                          int rbase, int cbase, int rlim, int clim,
                                          int align, bool inside, int tid, int phase)
{
    constexpr int ELEMS = UNITS * W;
    if (phase == 0) {
        if (W > 1 && align >= 16)
            pg_copy_units<W, L, UNITS, CONT, NT>([&](int o, int c) { return xs + Stage::pos(o, c); },
                                                 X, ld, rbase, cbase, rlim, clim, true, inside, tid);
        else if (align >= 4)
            pg_copy_chunks16<2, CONT, ELEMS, NT, Stage>(xs, X, ld, rbase, cbase, rlim, clim, tid);
    } else if (align < 4) {
        // PG_SHIFT16_CH (render.SHIFT16): the chunk, 0 for none; rows of at least
        // PG_SHIFT16_MIN_CONT elements only
        constexpr int SH = PG_SHIFT16_CH > 0 ? PG_SHIFT16_CH : 8;
        if (PG_SHIFT16_CH > 0 && CONT >= PG_SHIFT16_MIN_CONT && inside)
            pg_copy_shift16<SH, CONT, ELEMS, NT, Stage>(xs, X, ld, rbase, cbase, tid);
        else
            pg_copy_chunks16<1, CONT, ELEMS, NT, Stage>(xs, X, ld, rbase, cbase, rlim, clim, tid);
    }
}
#endif  // PG_HALF

// cp.async staging of one operand's BK x BX slice (sm_80+, PG_PIPELINE): every 16-byte
// unit goes global -> shared unchanged, so the layout follows global memory. An operand
// with x contiguous (CONT = BX: A^T, B) keeps the register path's Xs[k][x] (PgStage, not
// transposed); a k-contiguous one (CONT = BK: A) is stored x-major, Xs[x][k], in rows of
// BK + PG_PAD elements: an odd number of 16-byte groups, so the units a quarter warp
// copies land on different banks. The compute loop reads Xs[x][k] KV k values at a
// time; the threads of a quarter warp share their rows there (TX >= 8 in every kind
// that runs this path), so those reads are broadcasts. But a warp holds 32 / TX row
// blocks of RB rows (RB = RM), which the same read puts RB rows apart: RB * S elements,
// a multiple of 128 bytes for RB = 16 in fp32, all on the same banks. So the 16-byte
// groups of row x are XOR-ed with (x / RB) % KG (KG: the groups that hold k values)
// and the row blocks of a warp read different banks. Units past the matrix edge are
// zero-filled by the copy itself (source size 0), as the register path loads zeros.
template <int BK, int BX, int NT, bool TRANSPOSED, int RB = 1>
struct PgAsync {
    using KMajor = PgStage<BK, BX, NT, false>;          // Xs[k][x] layout and its read
    static constexpr int CONT = TRANSPOSED ? BK : BX;
    static constexpr int W = (CONT % PG_V == 0 && (BK * BX) % (NT * PG_V) == 0) ? PG_V : 1;
    static constexpr int UNITS = BK * BX / W;
    static constexpr int L = (UNITS + NT - 1) / NT;
    static constexpr int S = TRANSPOSED ? BK + PG_PAD : KMajor::S;   // row stride
    static constexpr int ELEMS = (TRANSPOSED ? BX : BK) * S;         // one stage
    static_assert(S % PG_V == 0, "rows must keep 16-byte alignment");
    static constexpr int KG = BK / PG_V;
    static constexpr bool SWIZZLE = TRANSPOSED && pg_pow2(KG) && KG > 1;

    // Where element k of x-major row x lives in its row (k itself when not swizzled).
    static __device__ __forceinline__ int kpos(int x, int k)
    {
        return SWIZZLE ? ((k / PG_V) ^ (x / RB % KG)) * PG_V + k % PG_V : k;
    }

    // Issue this thread's copies of the slice (pg_copy_units says what the arguments are).
    static __device__ __forceinline__ void copy(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int rlim, int clim,
                                                bool vec, bool inside, int tid)
    {
        auto dst = [&](int o, int c) { return xs + o * S + (TRANSPOSED ? kpos(o, c) : c); };
        pg_copy_units<W, L, UNITS, CONT, NT, decltype(dst), (bool)PG_LEAN>(
            dst, X, ld, rbase, cbase, rlim, clim, vec, inside, tid);
    }

    // Xs[x][k]: N rows from x, KV k values from k each (KV * sizeof(PG_T) <= 16, k a
    // multiple of KV).
    template <int N, int KV>
    static __device__ __forceinline__ void read_rows(PG_T (&v)[N][KV], const PG_T* xs, int x, int k)
    {
        static_assert(N <= RB, "the rows read must lie in one row block");
        const int kp = kpos(x, k);      // x starts a row block: one swizzle for all N rows
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const PG_T* p = xs + (x + i) * S + kp;
            if (KV == PG_V) {
                pg_get16(p, v[i]);
            } else {
#pragma unroll
                for (int j = 0; j < KV; ++j) v[i][j] = p[j];
            }
        }
    }
};
#endif

#if PG_ASYNC
// A SIMT pipeline's first ST - 1 steps in flight (issue(stage, k0) copies one), one
// commit group each, empty ones too: the count the waits rely on stays fixed.
template <int ST, int BK, class Issue>
__device__ __forceinline__ void pg_prefill(int nk, Issue& issue)
{
#pragma unroll
    for (int s = 0; s < ST - 1; ++s) {
        if (s < nk) issue(s, s * BK);
        pg_cp_async_commit();
    }
}
#endif

#if PG_KPIPE && PG_ASYNC  // its copy helpers exist only there (compat.h)
// PG_KPIPE's A (M x K, k contiguous) staged k-major, As[k][m] in PgStage's layout (rows
// of S), by element copies: thread t copies column k = t % BK of rows t / BK + i RS, so
// any leading dimension and alignment take the same copies, and the compute loop reads
// A as it reads B, one k at a time (cuBLAS's grouped SIMT kernel stages A this way).
// A warp's copies cover 32 / BK rows of BK consecutive k (whole sectors) and land on
// distinct banks (S = BM + 4: row k starts 4 k banks on). Rows are clamped into the
// matrix once a tile (rows past M only feed C rows that are never stored), so a step
// wholly inside K copies with no test, and the last, partial one zero-fills a k past K
// (source size 0) from an address inside the row.
template <int BK, int BM, int NT>
struct PgAsyncKT {
    using KMajor = PgStage<BK, BM, NT, false>;
    static constexpr int S = KMajor::S, ELEMS = BK * S;
    static constexpr int RS = NT / BK, N = BM * BK / NT;     // row step, copies a thread
    static_assert(NT % BK == 0 && BM % RS == 0 && !KMajor::SWIZZLE, "whole rows per copy round");

    // The thread's copies' sources at k = 0, advanced by BK each step: one pointer each,
    // so no copy's address waits for the copy before it to read a shared address
    // register (with offsets added per step, sm_90 reused one register pair and each
    // copy stalled on the one before: ncu, H100).
    static __device__ __forceinline__ void sources(const PG_T* (&p)[N], const PG_T* __restrict__ A,
                                                   int lda, int m0, int M, int tid)
    {
#pragma unroll
        for (int i = 0; i < N; ++i)
            p[i] = A + min(m0 + tid / BK + i * RS, M - 1) * lda + tid % BK;
    }

    // Step k0's copies from p (at k0 by then; advanced here).
    static __device__ __forceinline__ void copy(PG_T* as, const PG_T* (&p)[N], int k0, int K, int tid)
    {
        const int kc = tid % BK;
        PG_T* dst = as + kc * S + tid / BK;
        if (k0 + BK <= K) {
#pragma unroll
            for (int i = 0; i < N; ++i) pg_cp_async_elem<sizeof(PG_T)>(dst + i * RS, p[i], (int)sizeof(PG_T));
        } else {
            const bool live = k0 + kc < K;
            const int back = live ? 0 : k0 + kc - (K - 1);     // a dead copy reads nothing
#pragma unroll
            for (int i = 0; i < N; ++i)
                pg_cp_async_elem<sizeof(PG_T)>(dst + i * RS, p[i] - back, live ? (int)sizeof(PG_T) : 0);
        }
#pragma unroll
        for (int i = 0; i < N; ++i) p[i] += BK;
    }
};
#endif

// One workgroup computes one BM x BN tile of C. Thread (ty, tx) holds an RM x RN
// micro-tile: RM contiguous rows, and RN columns in NG groups of CV contiguous ones,
// group g at column g * BN / NG + tx * CV. With CV = 16 bytes a quarter warp's
// shared-memory reads of B are one contiguous 128-byte line (no bank conflicts) and the
// epilogue's stores are 16 bytes wide.
//
// Two main loops fill the accumulators. PG_PIPELINE (cp.async on sm_80+, PG_STAGES
// stages; B not transposed): copies run PG_STAGES - 1 k steps ahead, one barrier per
// step. Otherwise (AMD, older NVIDIA, B^T, or a variant rendered with PG_STAGES 0)
// global -> register -> shared staging, double-buffered: the next k step's loads are in
// flight while the current one is multiplied, with one barrier per step. B^T stays on the
// register path: its k-contiguous rows, read CV columns at a time, would put a quarter
// warp's 16-byte reads 4 rows apart, on the same banks.
#if PG_ASYNC && PG_STAGES >= 2 && !PG_TRANS_B
#define PG_PIPELINE 1
#else
#define PG_PIPELINE 0
#endif
// The MMA kinds pipeline every transpose (pg_tile_mma), so their variants' B^T entry
// points declare the pipeline's stages too (render.py makes that figure cover the
// register path's).
#if PG_ASYNC && PG_STAGES >= 2 && (!PG_TRANS_B || PG_MMA)
#define PG_SMEM_TILE PG_SMEM_ELEMS_ASYNC
#else
#define PG_SMEM_TILE PG_SMEM_ELEMS
#endif

// The shared tiles' alignment: 16 bytes (the 16-byte copies), 1 KiB for the wgmma kinds,
// whose swizzled stages (PgWgStage) the hardware locates by address bits 7-9.
#if PG_WGMMA_KINDS
#define PG_SMEM_ALIGN 1024
#else
#define PG_SMEM_ALIGN 16
#endif

// The shared tiles of an entry point: a static array, or (PG_DYN_SMEM, the wgmma kinds'
// deeper pipelines past the 48 KiB a static array may hold) the launch's dynamic shared
// memory, which starts after the static variables: PG_SMEM_ALIGN - 16 bytes more are
// requested (render.Rendered.dynamic_smem) and the tiles start at the next aligned address.
#if PG_DYN_SMEM
#define PG_SMEM_DECL(name)                                                                 \
    extern __shared__ __align__(16) unsigned char pg_dyn_smem[];                           \
    PG_T* name = reinterpret_cast<PG_T*>(                                                  \
        pg_dyn_smem + (-pg_smem_addr(pg_dyn_smem) & (PG_SMEM_ALIGN - 1)))
#else
#define PG_SMEM_DECL(name) alignas(PG_SMEM_ALIGN) __shared__ PG_T name[PG_SMEM_TILE]  // alignas first: clang (HIP) rejects it after __shared__
#endif

// Stored A is M x K (K x M when transposed), B K x N (N x K); a 16-byte unit starts at a
// multiple of PG_V columns from the slice start, so these keep it aligned.
__device__ __forceinline__ bool pg_vec_a(const PgGemm* gp, int m0)
{
    return pg_aligned16(gp->A) && gp->lda % PG_V == 0 && (PG_TRANS_A ? m0 : 0) % PG_V == 0;
}
__device__ __forceinline__ bool pg_vec_b(const PgGemm* gp, int n0)
{
    return pg_aligned16(gp->B) && gp->ldb % PG_V == 0 && (PG_TRANS_B ? 0 : n0) % PG_V == 0;
}

// A tile's K as the main loop sees it: alpha == 0 reads neither A nor B.
__device__ __forceinline__ int pg_k_of(const PgGemm* gp)
{
    return (gp->alpha == 0.0) ? 0 : gp->K;
}

// The carry (PG_CARRY, where compat.h's PG_CARRY_VENDOR allows). Everything below that
// it needs is compiled only under PG_CARRY_ON, so a variant that does not carry renders
// to the same code as without the carry (its registers and spills unchanged).
#define PG_CARRY_ON (PG_CARRY && PG_CARRY_VENDOR)

#if PG_CARRY_ON
// What a block carries from one tile to the next of the same kind on the register path:
// the next tile's first k step, loaded into registers while the current tile finishes
// (its last step's FMAs and its epilogue), so a block running several tiles does not
// wait a global-memory latency at each tile's start. `primed`: ra and rb hold the
// first step of the tile about to run. Empty on the cp.async path, which drains its
// stages at each tile's end.
template <int BM, int BN, int BK, int NT>
struct PgCarry {
#if !PG_PIPELINE
    using SA = PgStage<BK, BM, NT, !PG_TRANS_A>;       // As[k][m]
    using SB = PgStage<BK, BN, NT, (bool)PG_TRANS_B>;  // Bs[k][n]
    PG_T ra[SA::L][SA::W], rb[SB::L][SB::W];
    bool primed;

    __device__ __forceinline__ void reset() { primed = false; }
#else
    __device__ __forceinline__ void reset() {}
#endif
};

// pg_tile's further parameters when it carries: the carry, and the next tile (nullptr:
// none of this kind, nothing to prefetch).
#define PG_TILE_CARRY_PARAMS \
    , PgCarry<BM, BN, BK, NT>&carry, const PgGemm *__restrict__ next, int nm0, int nn0
#else
#define PG_TILE_CARRY_PARAMS
#endif

// One k step (from k0) of a tile's A (M x K, K x M when transposed) or B (K x N, N x K)
// slice into the register path's staging registers, inside pg_tile (its SA, SB, tid):
// the tile's own loads and the carry's prefetch of the next tile's first step. Macros,
// so a variant without the carry compiles the very calls it had before the carry.
#if PG_TRANS_A
#define PG_LOAD_A(ra, A, lda, m0, k0, M, K, vec) SA::load(ra, A, lda, k0, m0, K, M, vec, tid)
#else
#define PG_LOAD_A(ra, A, lda, m0, k0, M, K, vec) SA::load(ra, A, lda, m0, k0, M, K, vec, tid)
#endif
#if PG_TRANS_B
#define PG_LOAD_B(rb, B, ldb, n0, k0, N, K, vec) SB::load(rb, B, ldb, n0, k0, N, K, vec, tid)
#else
#define PG_LOAD_B(rb, B, ldb, n0, k0, N, K, vec) SB::load(rb, B, ldb, k0, n0, K, N, vec, tid)
#endif

#if PG_LEAN
// pg_tile's epilogue in a PG_LEAN variant, C = alpha acc + beta C over one thread's
// micro-tile: rows r0 .. r0 + RM - 1, column groups of CV from c0 + g GS; 16 bytes at a
// time where `vec` and the group lies inside C, else element by element, each checked
// against N. BETA (beta != 0) is a template argument, so one uniform branch picks the
// loop and no element tests beta (beta == 0 never reads C); C goes through PG_LDC /
// PG_STC, global accesses rather than generic ones. On short-K batches the epilogue is
// about a tenth of a tile's instructions; with beta tested in the element loop (the
// code the other variants keep) sm_90 SASS branched around every element.
template <int RM, int RN, int CV, int GS, bool BETA>
__device__ __forceinline__ void pg_store_micro(const PG_ACC (&acc)[RM][RN], PG_T* __restrict__ C,
                                               int ldc, int M, int N, int r0, int c0,
                                               PG_ACC alpha, PG_ACC beta, bool vec)
{
#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int r = r0 + i;
        if (r >= M) continue;
        PG_T* crow = C + r * ldc;
#pragma unroll
        for (int g = 0; g < RN / CV; ++g) {
            const int c = c0 + g * GS;
            const PG_ACC* ac = acc[i] + g * CV;
            if (vec && c + CV <= N) {
                PG_T v[CV > PG_V ? CV : PG_V];
                if (BETA) pg_ldc16(crow + c, v);
#pragma unroll
                for (int j = 0; j < CV; ++j)
                    v[j] = PG_T(BETA ? alpha * ac[j] + beta * PG_ACC(v[j]) : alpha * ac[j]);
                pg_stc16(crow + c, v);
            } else {
#pragma unroll
                for (int j = 0; j < CV; ++j) {
                    if (c + j >= N) continue;
                    PG_ACC x = alpha * ac[j];
                    if (BETA) x += beta * PG_ACC(pg_ldc(crow + c + j));
                    pg_stc(crow + c + j, PG_T(x));
                }
            }
        }
    }
}

#if PG_STAGED_C_ON
// pg_tile's epilogue where C's rows are not 16-byte aligned (PG_STAGED_C_ON): the
// micro-tiles' element stores put a half warp's lanes CV elements apart, so
// each store touched ~17 sectors for 128 bytes, 73 % of a short-K launch's sectors
// (ncu, H100: 128x128/16x8 on random sizes). Instead, row i of each of the warp's R
// thread rows goes to the warp's own R x BN shared rows `ws` (16-byte stores: NG groups
// of CV), then back out as 32 consecutive columns per access, RN accesses a lane; C is
// read (BETA) the same way. Only the warp touches `ws` (pg_syncwarp orders it), so the
// block needs no barrier; pg_tile passes a region that no other warp reads or writes
// until every warp has finished its epilogue.
template <int RM, int RN, int CV, int GS, int TX, bool BETA>
__device__ __forceinline__ void pg_store_staged(const PG_ACC (&acc)[RM][RN], PG_ACC* __restrict__ ws,
                                                PG_T* __restrict__ C, int ldc, int M, int N,
                                                int r0, int c0, PG_ACC alpha, PG_ACC beta,
                                                int lane)
{
    constexpr int BN = TX * RN, R = 32 / TX, NG = RN / CV;
    static_assert(32 % TX == 0 && BN % 32 == 0, "a warp holds whole thread rows of whole 32-column runs");
    const int tx = lane % TX, tr = lane / TX;      // column group and thread row in the warp
    const int n_left = N - c0;                     // C's columns from the tile's first
    const bool n_full = n_left >= BN;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
        for (int g = 0; g < NG; ++g) {
            PG_ACC* w = ws + tr * BN + g * GS + tx * CV;
            if (CV * sizeof(PG_ACC) == 16) {
                pg_put16(w, acc[i] + g * CV);
            } else {
#pragma unroll
                for (int j = 0; j < CV; ++j) w[j] = acc[i][g * CV + j];
            }
        }
        pg_syncwarp();
#pragma unroll
        for (int t = 0; t < R; ++t) {              // thread row t's row i: BN / 32 runs
            const int r = r0 + t * RM + i;
            if (r >= M) continue;
            PG_T* crow = C + r * ldc + c0 + lane;
            const PG_ACC* w = ws + t * BN + lane;
            auto put = [&](int u) {
                PG_ACC x = alpha * w[32 * u];
                if (BETA) x += beta * PG_ACC(pg_ldc(crow + 32 * u));
                pg_stc(crow + 32 * u, PG_T(x));
            };
            // A tile wholly inside C's columns (uniform) stores with no column test: its
            // runs are one address plus constants (tested per run, sm_90 recomputed
            // each run's 64-bit address around a branch)
            if (n_full) {
#pragma unroll
                for (int u = 0; u < BN / 32; ++u) put(u);
            } else {
#pragma unroll
                for (int u = 0; u < BN / 32; ++u)
                    if (lane + 32 * u < n_left) put(u);
            }
        }
        pg_syncwarp();                             // ws is rewritten by the next row
    }
}
#endif
#endif

// One k of a thread's micro-tile: acc += a b^T (the SIMT main loops' FMAs).
template <int RM, int RN>
__device__ __forceinline__ void pg_outer(PG_ACC (&acc)[RM][RN], const PG_T (&a)[RM], const PG_T (&b)[RN])
{
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] += PG_ACC(a[i]) * PG_ACC(b[j]);
}

template <int BM, int BN, int BK, int NT, int RM, int RN>
__device__ __forceinline__ void pg_tile(const PgGemm* __restrict__ gp, int m0, int n0,
                                        PG_T* smem PG_TILE_CARRY_PARAMS)
{
    constexpr int TX = BN / RN;
    constexpr int TY = BM / RM;
    static_assert(TX * TY == NT, "micro-tile layout must use every thread");
    constexpr int CV = (RN % PG_V == 0) ? PG_V : RN;   // contiguous columns per group
    constexpr int NG = RN / CV;
    constexpr int GS = BN / NG;                        // column stride of the groups

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;

    // What the main loop needs is read here; C, ldc, alpha and beta only in the epilogue,
    // so they hold no registers across the loop.
    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;
    // Stored A is M x K (K x M when transposed), B K x N (N x K); a 16-byte unit starts
    // at a multiple of PG_V columns from the slice start, so these keep it aligned.
    const bool vec_a = pg_aligned16(A) && lda % PG_V == 0 && (PG_TRANS_A ? m0 : 0) % PG_V == 0;
    const bool vec_b = pg_aligned16(B) && ldb % PG_V == 0 && (PG_TRANS_B ? 0 : n0) % PG_V == 0;

    PG_ACC acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = PG_ACC(0);

#if PG_PIPELINE && PG_KPIPE
    // cp.async pipeline with both operands k-major (A by PgAsyncKT's element copies, A^T
    // as stored) and the fragments double-buffered, as CUTLASS's multistage SIMT loop
    // runs: k step kk's FMAs use the fragments read during step kk - 1, the next stage's
    // wait and barrier come before the last k's FMAs, whose 128 independent FMAs then
    // cover the first read of the next stage, and each step's copies go out between its
    // first fragment reads and FMAs. (The loop below, with A x-major and a step's
    // fragments read at its start, spent 25 % of its time between the barrier and the
    // first FMA, and in branches of the copy paths: ncu, H100, bench/NOTES.md session 13.)
    constexpr int ST = PG_STAGES;
#if PG_TRANS_A
    using PA = PgAsync<BK, BM, NT, false>;             // As[k][m], copied as stored
#else
    using PA = PgAsyncKT<BK, BM, NT>;                  // As[k][m], element copies
    const PG_T* pa[PA::N];
    PA::sources(pa, A, lda, m0, M, tid);
#endif
    using PB = PgAsync<BK, BN, NT, false>;             // Bs[k][n]
    static_assert(ST * (PA::ELEMS + PB::ELEMS) <= PG_SMEM_TILE, "shared tiles exceed PG_SMEM_ELEMS_ASYNC");
    static_assert(BK % 2 == 0, "the fragment buffers alternate within a step");
    PG_T* As = smem;                   // [ST][PA::ELEMS]
    PG_T* Bs = smem + ST * PA::ELEMS;  // [ST][PB::ELEMS]

    const bool n_in = n0 + BN <= N;
#if PG_TRANS_A
    const bool m_in = m0 + BM <= M;
#endif
    auto issue = [&](int stage, int k0) {
        const bool k_in = k0 + BK <= K;
#if PG_TRANS_A
        PA::copy(As + stage * PA::ELEMS, A, lda, k0, m0, K, M, vec_a, m_in && k_in, tid);
#else
        PA::copy(As + stage * PA::ELEMS, pa, k0, K, tid);
#endif
        PB::copy(Bs + stage * PB::ELEMS, B, ldb, k0, n0, K, N, vec_b, n_in && k_in, tid);
    };
    PG_T a[2][RM], b[2][RN];
    auto read = [&](int f, const PG_T* as, const PG_T* bs, int k) {
        PA::KMajor::template read<RM>(a[f], as, k, ty * RM);
#pragma unroll
        for (int g = 0; g < NG; ++g)
            PB::KMajor::template read<CV>(b[f] + g * CV, bs, k, g * GS + tx * CV);
    };

    const int nk = (K + BK - 1) / BK;
    if (nk > 0) {
        pg_prefill<ST, BK>(nk, issue);
        pg_cp_async_wait<ST - 2>();
        __syncthreads();
        read(0, As, Bs, 0);
        int rs = 0, ws = ST - 1;                // stages read and written this step
        for (int kt = 0; kt < nk; ++kt) {
            const PG_T* as = As + rs * PA::ELEMS;
            const PG_T* bs = Bs + rs * PB::ELEMS;
            const int rn = rs + 1 == ST ? 0 : rs + 1;
#pragma unroll
            for (int kk = 0; kk < BK; ++kk) {
                const int f = kk & 1;
                if (kk + 1 < BK) {
                    read(f ^ 1, as, bs, kk + 1);
                } else if (kt + 1 < nk) {
                    // Step kt + 1's group is complete once at most ST - 2 younger ones
                    // are pending; the barrier publishes it and retires every warp's
                    // reads of stage rs, which step kt + 1 refills.
                    pg_cp_async_wait<ST - 2>();
                    __syncthreads();
                    read(f ^ 1, As + rn * PA::ELEMS, Bs + rn * PB::ELEMS, 0);
                }
                if (kk == 0) {                  // stage ws was last read before the barrier
                    if (kt + ST - 1 < nk) issue(ws, (kt + ST - 1) * BK);
                    pg_cp_async_commit();
                }
                pg_outer(acc, a[f], b[f]);
            }
            rs = rn;
            ws = ws + 1 == ST ? 0 : ws + 1;
        }
        // The block may run another tile next, whose first copies overwrite the stages.
        pg_cp_async_wait<0>();
        __syncthreads();
    }
#elif PG_PIPELINE
    constexpr int ST = PG_STAGES;
    using PA = PgAsync<BK, BM, NT, !PG_TRANS_A, RM>;   // As[m][k] (A), As[k][m] (A^T)
    using PB = PgAsync<BK, BN, NT, false>;             // Bs[k][n]
    static_assert(ST * (PA::ELEMS + PB::ELEMS) <= PG_SMEM_TILE, "shared tiles exceed PG_SMEM_ELEMS_ASYNC");
    // k values per read of the x-major A: 16 bytes, unless that would hold more than 64
    // fragment registers at once (16 rows of fp32 take 64 and stay below 255 with no
    // spill on sm_80 and sm_90; reading them 8 bytes at a time costs 16 more reads a step).
    constexpr int KV = PG_TRANS_A ? 1 : (RM * PG_V <= 64 ? PG_V : PG_V / 2);
    PG_T* As = smem;                   // [ST][PA::ELEMS]
    PG_T* Bs = smem + ST * PA::ELEMS;  // [ST][PB::ELEMS]

    const bool m_in = m0 + BM <= M, n_in = n0 + BN <= N;
    auto issue = [&](int stage, int k0) {
        const bool k_in = k0 + BK <= K;
#if PG_TRANS_A
        PA::copy(As + stage * PA::ELEMS, A, lda, k0, m0, K, M, vec_a, m_in && k_in, tid);
#else
        PA::copy(As + stage * PA::ELEMS, A, lda, m0, k0, M, K, vec_a, m_in && k_in, tid);
#endif
        PB::copy(Bs + stage * PB::ELEMS, B, ldb, k0, n0, K, N, vec_b, n_in && k_in, tid);
    };

    const int nk = (K + BK - 1) / BK;
    if (nk > 0) {
        pg_prefill<ST, BK>(nk, issue);
        int rs = 0, ws = ST - 1;                // stages read and written this step
        for (int kt = 0; kt < nk; ++kt) {
            // Step kt's group is complete once at most ST - 2 younger ones are pending;
            // the barrier publishes it and retires step kt - 1's reads of stage ws.
            pg_cp_async_wait<ST - 2>();
            __syncthreads();
            const PG_T* as = As + rs * PA::ELEMS;
            const PG_T* bs = Bs + rs * PB::ELEMS;
            PG_UNROLL_K
            for (int kq = 0; kq < BK; kq += KV) {
#if !PG_TRANS_A
                PG_T a4[RM][KV];
                PA::template read_rows<RM, KV>(a4, as, ty * RM, kq);
#endif
#pragma unroll
                for (int j = 0; j < KV; ++j) {
                    PG_T a[RM], b[RN];
#if PG_TRANS_A
                    PA::KMajor::template read<RM>(a, as, kq + j, ty * RM);
#else
#pragma unroll
                    for (int i = 0; i < RM; ++i) a[i] = a4[i][j];
#endif
#pragma unroll
                    for (int g = 0; g < NG; ++g)
                        PB::KMajor::template read<CV>(b + g * CV, bs, kq + j, g * GS + tx * CV);
                    // The copies into stage ws go out once the first fragments are read:
                    // the compiler keeps shared reads behind a cp.async (its memory
                    // clobber), so issued first they would delay the step's first FMAs
                    // by the whole issue sequence. Stage ws was last read before the
                    // barrier above.
                    if (kq == 0 && j == 0) {
                        if (kt + ST - 1 < nk) issue(ws, (kt + ST - 1) * BK);
                        pg_cp_async_commit();
                    }
                    pg_outer(acc, a, b);
                }
            }
            rs = rs + 1 == ST ? 0 : rs + 1;
            ws = ws + 1 == ST ? 0 : ws + 1;
        }
        // The block may run another tile next, whose first copies overwrite the stages.
        pg_cp_async_wait<0>();
        __syncthreads();
    }
#else
#if PG_CARRY_ON
    using SA = typename PgCarry<BM, BN, BK, NT>::SA;
    using SB = typename PgCarry<BM, BN, BK, NT>::SB;
    PG_T(&ra)[SA::L][SA::W] = carry.ra;  // the staging registers live in the carry
    PG_T(&rb)[SB::L][SB::W] = carry.rb;
#else
    using SA = PgStage<BK, BM, NT, !PG_TRANS_A>;       // As[k][m]
    using SB = PgStage<BK, BN, NT, (bool)PG_TRANS_B>;  // Bs[k][n]
    PG_T ra[SA::L][SA::W], rb[SB::L][SB::W];
#endif
#if PG_LEAN_STEP
    // The two stages interleaved, [2][A | B] (BK rows of SA::S, then of SB::S): one
    // offset, toggled by an XOR, picks a stage for both operands' reads and stores (the
    // stage index multiplied into each address cost ~20 instructions a step).
    constexpr int STAGE = BK * (SA::S + SB::S);
    PG_T* As = smem;
    PG_T* Bs = smem + BK * SA::S;
#else
    PG_T* As = smem;                   // [2][BK][SA::S]
    PG_T* Bs = smem + 2 * BK * SA::S;  // [2][BK][SB::S]
#endif

#if PG_LEAN_STEP
    // Each unit's offset at k = 0 (PgStage::offsets); a step inside the matrix starts
    // k0 elements on along k-contiguous rows (A, B^T), k0 rows on otherwise.
    unsigned qa[SA::L], qb[SB::L];
    const bool a_in = m0 + BM <= M, b_in = n0 + BN <= N;
#if PG_TRANS_A
    SA::offsets(qa, lda, 0, m0, K, tid);
#else
    SA::offsets(qa, lda, m0, 0, M, tid);
#endif
#if PG_TRANS_B
    SB::offsets(qb, ldb, n0, 0, N, tid);
#else
    SB::offsets(qb, ldb, 0, n0, K, tid);
#endif
    auto load = [&](int k0) {
        const bool k_in = k0 + BK <= K;
#if PG_TRANS_A
        SA::load_step(ra, A, lda, unsigned(k0 * lda), qa, a_in && k_in, k0, m0, K, M, vec_a, tid);
#else
        SA::load_step(ra, A, lda, unsigned(k0), qa, a_in && k_in, m0, k0, M, K, vec_a, tid);
#endif
#if PG_TRANS_B
        SB::load_step(rb, B, ldb, unsigned(k0), qb, b_in && k_in, n0, k0, N, K, vec_b, tid);
#else
        SB::load_step(rb, B, ldb, unsigned(k0 * ldb), qb, b_in && k_in, k0, n0, K, N, vec_b, tid);
#endif
    };
#else
    auto load = [&](int k0) {
        PG_LOAD_A(ra, A, lda, m0, k0, M, K, vec_a);
        PG_LOAD_B(rb, B, ldb, n0, k0, N, K, vec_b);
    };
#endif
#if PG_LEAN_STEP
    auto store = [&](int so) {          // so: the stage's offset, 0 or STAGE
        SA::store(ra, As + so, tid);
        SB::store(rb, Bs + so, tid);
    };
#else
    auto store = [&](int buf) {
        SA::store(ra, As + buf * BK * SA::S, tid);
        SB::store(rb, Bs + buf * BK * SB::S, tid);
    };
#endif
#if PG_CARRY_ON
    // The next tile's first step, into the registers this tile no longer needs; false
    // when it has none (no next tile, or K == 0 there).
    auto prefetch = [&]() {
        if (next == nullptr) return false;
        const int kn = pg_k_of(next);
        if (kn <= 0) return false;
        PG_LOAD_A(ra, next->A, next->lda, nm0, 0, next->M, kn, pg_vec_a(next, nm0));
        PG_LOAD_B(rb, next->B, next->ldb, nn0, 0, next->N, kn, pg_vec_b(next, nn0));
        return true;
    };
    bool primed = false;                // the next tile's first step is in ra, rb
#endif

    if (K > 0) {
#if PG_CARRY_ON
        if (!carry.primed)
#endif
        load(0);
        // The previous tile's last barrier retired every read of both buffers.
        store(0);
        __syncthreads();
#if PG_LEAN_STEP
        int so = 0;                     // the stage read this step
#else
        int buf = 0;
#endif
        for (int k0 = 0; k0 < K; k0 += BK) {
            const bool more = k0 + BK < K;
            if (more) load(k0 + BK);
#if PG_CARRY_ON
            else primed = prefetch();   // overlaps this last step's FMAs and the epilogue
#endif
#if PG_LEAN_STEP
            const PG_T* as = As + so;
            const PG_T* bs = Bs + so;
#else
            const PG_T* as = As + buf * BK * SA::S;
            const PG_T* bs = Bs + buf * BK * SB::S;
#endif
            PG_UNROLL_K
            for (int kk = 0; kk < BK; ++kk) {
                PG_T a[RM], b[RN];
                SA::template read<RM>(a, as, kk, ty * RM);
#pragma unroll
                for (int g = 0; g < NG; ++g) SB::template read<CV>(b + g * CV, bs, kk, g * GS + tx * CV);
                pg_outer(acc, a, b);
            }
#if PG_LEAN_STEP
            if (more) store(so ^ STAGE);
#else
            if (more) store(buf ^ 1);
#endif
            // One barrier per step: the buffer just filled was last read before the
            // previous barrier, and the next step reads it only after this one.
            __syncthreads();
#if PG_LEAN_STEP
            so ^= STAGE;
#else
            buf ^= 1;
#endif
        }
    }
#if PG_CARRY_ON
    else primed = prefetch();
    carry.primed = primed;
#endif
#endif

    const PG_ACC alpha = PG_ACC(gp->alpha), beta = PG_ACC(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc;
    const bool vec_c = CV == PG_V && pg_aligned16(C) && ldc % PG_V == 0 && n0 % PG_V == 0;
#if PG_STAGED_C_ON
    // Shared memory the epilogue may use (pg_store_staged): a stage the next tile first
    // fills after that tile's first barrier. On the pipeline the last stage (the first
    // copies go to the others); on the register path stage 1 (the first step goes to
    // stage 0), of both operands or of the larger one.
#if PG_PIPELINE
    constexpr int SPARE = PA::ELEMS >= PB::ELEMS ? PA::ELEMS : PB::ELEMS;
    PG_T* const spare = PA::ELEMS >= PB::ELEMS ? As + (ST - 1) * PA::ELEMS : Bs + (ST - 1) * PB::ELEMS;
#elif PG_LEAN_STEP
    constexpr int SPARE = STAGE;
    PG_T* const spare = smem + STAGE;
#else
    constexpr int SPARE = SA::S >= SB::S ? BK * SA::S : BK * SB::S;
    PG_T* const spare = SA::S >= SB::S ? As + BK * SA::S : Bs + BK * SB::S;
#endif
#endif
#if PG_LEAN
#if PG_STAGED_C_ON
    // Unaligned C through the warp's share of `spare` (pg_store_staged), where the
    // micro-tile layout and the spare rows allow; aligned C as 16-byte stores below.
    constexpr bool STAGED = 32 % TX == 0 && BN % 32 == 0 && SPARE % PG_V == 0 &&
                            NT * RN * sizeof(PG_ACC) <= SPARE * sizeof(PG_T);
    if constexpr (STAGED) {
        if (!vec_c) {
            PG_ACC* ws = reinterpret_cast<PG_ACC*>(spare) + tid / 32 * 32 * RN;
            const int r0 = m0 + tid / 32 * (32 / TX) * RM;
            if (beta == PG_ACC(0))
                pg_store_staged<RM, RN, CV, GS, TX, false>(acc, ws, C, ldc, M, N, r0, n0,
                                                           alpha, beta, tid % 32);
            else
                pg_store_staged<RM, RN, CV, GS, TX, true>(acc, ws, C, ldc, M, N, r0, n0,
                                                          alpha, beta, tid % 32);
            return;
        }
    }
#endif
    if (beta == PG_ACC(0))
        pg_store_micro<RM, RN, CV, GS, false>(acc, C, ldc, M, N, m0 + ty * RM, n0 + tx * CV,
                                              alpha, beta, vec_c);
    else
        pg_store_micro<RM, RN, CV, GS, true>(acc, C, ldc, M, N, m0 + ty * RM, n0 + tx * CV,
                                             alpha, beta, vec_c);
#else
#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int r = m0 + ty * RM + i;
        if (r >= M) continue;
        PG_T* crow = C + r * ldc;
#pragma unroll
        for (int g = 0; g < NG; ++g) {
            const int c0 = n0 + g * GS + tx * CV;
            const PG_ACC* ac = acc[i] + g * CV;
            if (vec_c && c0 + CV <= N) {
                PG_T v[CV > PG_V ? CV : PG_V];
                if (beta != PG_ACC(0)) pg_get16(crow + c0, v);   // beta == 0 never reads C
#pragma unroll
                for (int j = 0; j < CV; ++j) {
                    PG_ACC x = alpha * ac[j];
                    if (beta != PG_ACC(0)) x += beta * PG_ACC(v[j]);
                    v[j] = PG_T(x);
                }
                pg_put16(crow + c0, v);
            } else {
#pragma unroll
                for (int j = 0; j < CV; ++j) {
                    const int c = c0 + j;
                    if (c >= N) continue;
                    PG_ACC x = alpha * ac[j];
                    if (beta != PG_ACC(0)) x += beta * PG_ACC(crow[c]);
                    crow[c] = PG_T(x);
                }
            }
        }
    }
#endif

}

// The MMA kinds (fp64, engine "mma" in tiles.py): warps in a (BM / WTM) x (BN / WTN)
// grid, each computing a WTM x WTN sub-tile of C as (WTM / 8) x (WTN / 8) fragments of
// the 8x8x4 warp MMA (compat.h: DMMA on sm_80+), accumulators in registers.
//
// Each operand's BK x BX slice is staged as its 16-byte units lie in global memory (no
// transposition, so cp.async can copy them unchanged): k-contiguous operands (A, B^T)
// x-major, Xs[x][k] in rows of BK + 4, the others k-major, Xs[k][x] in rows of BX + 4.
// A warp's fragment read has lane l load element (x0 + l / 4, k0 + l % 4) (A's row and
// k, B's column and k: PgMmaF64), 8 bytes a lane, which the hardware serves a half warp
// at a time; a half warp's 16 loads hit 16 different 8-byte bank pairs when the row
// stride S is 4 mod 8 doubles: x-major lanes sit at (l / 4) S + l % 4, k-major at
// (l % 4) S + l / 4, and l / 4, l % 4 < 4 there, so offsets mod 16 are distinct. Two
// wavefronts per read, the minimum for 256 bytes. A row stride of BX + 4 (or BK + 4)
// doubles is 16-byte aligned, so the staging's 16-byte units stay aligned.
// The 16-bit kinds (pg_tile_mma16) pad rows wider than 64 bytes by 8 elements instead
// (16 bytes) and skew 64-byte rows in pairs (PgMmaStage::SKEW). Their fragments load by
// ldmatrix (8 rows of 16 bytes per matrix) on sm_80+; elsewhere as 4-byte pairs along k
// (x-major) or 2-byte elements (k-major): with S = 8 mod 16 elements, a warp's 32 pair
// reads of an x-major stage, (x0 + l / 4) S / 2 + l % 4 words, cover all 32 banks, and its
// k-major element reads, k rows 2 (l % 4) (+1) apart, fall 8 banks apart per k pair.
constexpr int PG_MMA_PAD = sizeof(PG_T) == 2 ? 8 : 4;

template <int BK, int BX, int NT, bool KCONT>
struct PgMmaStage {
    using Units = PgStage<BK, BX, NT, KCONT>;   // the same units, CONT = KCONT ? BK : BX
    static constexpr int CONT = Units::CONT;
    static constexpr int W = Units::W, L = Units::L, UNITS = Units::UNITS;
    static constexpr bool K_CONTIGUOUS = KCONT;   // x-major: Xs[x][k]
    // 16-bit rows of 64 bytes (32 elements: BK of an x-major stage, BX = 32 of a k-major
    // one) are skewed in pairs instead of padded one by one: row r starts at r * 64 +
    // (r / 2) * 16 bytes. Padded to 80 bytes, the 16-byte copies of a quarter warp (two
    // rows of four groups) fell 2 ways on the same banks; unpadded, the 8 rows an ldmatrix
    // reads at one 16-byte group would fall 4 ways. Skewed, rows r and r + 1 (r even)
    // fill one 128-byte bank line, starting r / 2 groups into it, so both are
    // conflict-free, and the skew stays additive: a lane's ldmatrix addresses are one
    // register plus constants. (An XOR swizzle of the groups, r / 2 % 4, is as
    // conflict-free but made the two MMA steps' k offsets lane values, and the 128x128
    // kind spilled 8-16 bytes under its cap.) Wider rows keep the padding: S = 8 mod 16
    // elements already puts a quarter warp's copies and a read's 8 rows on distinct groups.
    static constexpr bool SKEW = PG_HALF && CONT * (int)sizeof(PG_T) == 64;
    static constexpr int S = SKEW ? CONT : CONT + PG_MMA_PAD;   // row stride (+ the skew)
    static constexpr int ROWS = KCONT ? BX : BK;
    static constexpr int ELEMS = ROWS * S + (SKEW ? ROWS / 2 * PG_V : 0);   // one stage
    static_assert(S % PG_V == 0 && (SKEW || S % (2 * PG_MMA_PAD) == PG_MMA_PAD),
                  "16-byte rows, conflict-free fragment reads");

    // Stored row r, column c.
    static __device__ __forceinline__ int pos(int r, int c)
    {
        return r * S + (SKEW ? (r >> 1) * PG_V : 0) + c;
    }
    static __device__ __forceinline__ int at(int x, int k) { return KCONT ? pos(x, k) : pos(k, x); }
    // pos(rb + r8, c) for rb a multiple of 8 (the rows of an ldmatrix): the skew splits
    // into rb's and r8's, so the lane's part is one value for every fragment.
    static __device__ __forceinline__ int pos8(int rb, int r8, int c)
    {
        return pos(rb, c) + pos(r8, 0);
    }

#if PG_HALF
    // The 16-bit kinds: elements (x, k) and (x, k + 1), k even, as one register (the
    // first in the low half): one 4-byte read where k is contiguous, else two.
    static __device__ __forceinline__ unsigned pair(const PG_T* xs, int x, int k)
    {
        if (KCONT) return *reinterpret_cast<const unsigned*>(xs + pos(x, k));
        return pg_pack2(xs[pos(k, x)].x, xs[pos(k + 1, x)].x);
    }
#endif

    // Registers (PgStage::load) -> one stage.
    static __device__ __forceinline__ void store(const PG_T (&r)[L][W], PG_T* xs, int tid)
    {
#pragma unroll
        for (int l = 0; l < L; ++l) {
            const int u = tid + l * NT;
            if (UNITS % NT != 0 && u >= UNITS) continue;
            int o, c;
            Units::unit(u, o, c);
            if (W > 1) pg_put16(xs + pos(o, c), r[l]);
            else xs[pos(o, c)] = r[l][0];
        }
    }
#if PG_ASYNC && PG_HALF
    // `align`: the operand's pg_align_of (bytes), which picks the copy width.
    static __device__ __forceinline__ void copy(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int rlim, int clim,
                                                int align, bool inside, int tid, int phase)
    {
        pg_copy16<W, L, UNITS, CONT, NT, PgMmaStage>(xs, X, ld, rbase, cbase, rlim, clim, align,
                                                     inside, tid, phase);
    }
#elif PG_ASYNC
    static __device__ __forceinline__ void copy(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int rlim, int clim,
                                                bool vec, bool inside, int tid)
    {
        pg_copy_units<W, L, UNITS, CONT, NT>([&](int o, int c) { return xs + o * S + c; },
                                             X, ld, rbase, cbase, rlim, clim, vec, inside, tid);
    }
#endif
};

// A copy-width flag as the register path reads it: 16-byte loads or not (the fp64 kinds
// pass a bool, the 16-bit kinds their alignment in bytes, pg_align_of).
__device__ __forceinline__ bool pg_vec16(bool vec) { return vec; }
__device__ __forceinline__ bool pg_vec16(int align) { return align >= 16; }

// The MMA kinds' k loop (pg_tile_mma, pg_tile_mma16): stages A's and B's BK-deep slices
// through shared memory (SA, SB: their PgMmaStage layouts) and calls step(as, bs, kk)
// for each MMA step of KSTEP k values of a staged slice.
// vec_a, vec_b: bools (fp64: 16-byte units aligned) or the 16-bit kinds' alignments in
// bytes (pg_align_of); SA::copy takes either as it is.
template <int BM, int BN, int BK, int NT, int KSTEP, class SA, class SB, class V, class Step>
__device__ __forceinline__ void pg_mma_k_loop(const PG_T* __restrict__ A, const PG_T* __restrict__ B,
                                              int lda, int ldb, int M, int N, int K, int m0,
                                              int n0, V vec_a, V vec_b, int tid,
                                              PG_T* smem, Step step)
{
#if PG_ASYNC && PG_STAGES >= 2
    // cp.async pipeline, as pg_tile's: PG_STAGES - 1 steps in flight, one barrier a step.
    constexpr int ST = PG_STAGES;
    static_assert(ST * (SA::ELEMS + SB::ELEMS) <= PG_SMEM_TILE, "shared tiles exceed PG_SMEM_TILE");
    PG_T* As = smem;                   // [ST][SA::ELEMS]
    PG_T* Bs = smem + ST * SA::ELEMS;  // [ST][SB::ELEMS]
    const bool m_in = m0 + BM <= M, n_in = n0 + BN <= N;
    // `phase` (16-bit kinds, PgMmaStage::copy): 0 the cp.async copies, 1 the element
    // copies of an odd leading dimension; other kinds have one phase.
#if PG_HALF
#define PG_PHASE_ARG , phase
#else
#define PG_PHASE_ARG
#endif
    auto issue = [&](int stage, int k0, int phase) {
        const bool k_in = k0 + BK <= K;
#if PG_TRANS_A
        SA::copy(As + stage * SA::ELEMS, A, lda, k0, m0, K, M, vec_a, m_in && k_in, tid PG_PHASE_ARG);
#else
        SA::copy(As + stage * SA::ELEMS, A, lda, m0, k0, M, K, vec_a, m_in && k_in, tid PG_PHASE_ARG);
#endif
#if PG_TRANS_B
        SB::copy(Bs + stage * SB::ELEMS, B, ldb, n0, k0, N, K, vec_b, n_in && k_in, tid PG_PHASE_ARG);
#else
        SB::copy(Bs + stage * SB::ELEMS, B, ldb, k0, n0, K, N, vec_b, n_in && k_in, tid PG_PHASE_ARG);
#endif
    };
#undef PG_PHASE_ARG
    const int nk = (K + BK - 1) / BK;
    if (nk > 0) {
#if PG_HALF
        PG_HALF_PROLOGUE_UNROLL   // (compat.h: ptxas differs by arch here)
#else
#pragma unroll
#endif
        for (int s = 0; s < ST - 1; ++s) {
            if (s < nk) {
                issue(s, s * BK, 0);
#if PG_HALF
                issue(s, s * BK, 1);
#endif
            }
            pg_cp_async_commit();
        }
        int rs = 0;                     // the stage read; written: the one before it
        for (int kt = 0; kt < nk; ++kt) {
            pg_cp_async_wait<ST - 2>();
            __syncthreads();
            const PG_T* as = As + rs * SA::ELEMS;
            const PG_T* bs = Bs + rs * SB::ELEMS;
            // Issued before this step's fragment reads (unlike pg_tile): after them, the
            // fragments of both MMA steps and the copies' addresses are live at once,
            // and under the 4-block cap (render.MIN_BLOCKS) that spilled the fp64 64x64
            // kind on sm_90.
            if (kt + ST - 1 < nk) issue(rs == 0 ? ST - 1 : rs - 1, (kt + ST - 1) * BK, 0);
            pg_cp_async_commit();
#pragma unroll
            for (int kk = 0; kk < BK; kk += KSTEP) step(as, bs, kk);
#if PG_HALF
            // The element copies (an odd leading dimension: no cp.async is narrow enough)
            // wait for their loads in this thread, so they go after the step's MMAs, which
            // then run while the loads are in flight; issued before, every k step waited
            // a global-memory latency first. Their stage is read ST - 1 barriers later.
            if (kt + ST - 1 < nk) issue(rs == 0 ? ST - 1 : rs - 1, (kt + ST - 1) * BK, 1);
#endif
            rs = rs + 1 == ST ? 0 : rs + 1;
        }
        pg_cp_async_wait<0>();
        __syncthreads();
    }
#else
    // Register staging, double-buffered, as pg_tile's register path.
    static_assert(2 * (SA::ELEMS + SB::ELEMS) <= PG_SMEM_TILE, "shared tiles exceed PG_SMEM_TILE");
    PG_T* As = smem;                   // [2][SA::ELEMS]
    PG_T* Bs = smem + 2 * SA::ELEMS;   // [2][SB::ELEMS]
    PG_T ra[SA::L][SA::W], rb[SB::L][SB::W];
    auto load = [&](int k0) {
#if PG_TRANS_A
        SA::Units::load(ra, A, lda, k0, m0, K, M, pg_vec16(vec_a), tid);
#else
        SA::Units::load(ra, A, lda, m0, k0, M, K, pg_vec16(vec_a), tid);
#endif
#if PG_TRANS_B
        SB::Units::load(rb, B, ldb, n0, k0, N, K, pg_vec16(vec_b), tid);
#else
        SB::Units::load(rb, B, ldb, k0, n0, K, N, pg_vec16(vec_b), tid);
#endif
    };
    if (K > 0) {
        load(0);
        SA::store(ra, As, tid);
        SB::store(rb, Bs, tid);
        __syncthreads();
        int buf = 0;
        for (int k0 = 0; k0 < K; k0 += BK) {
            const bool more = k0 + BK < K;
            if (more) load(k0 + BK);
#pragma unroll
            for (int kk = 0; kk < BK; kk += KSTEP) step(As + buf * SA::ELEMS, Bs + buf * SB::ELEMS, kk);
            if (more) {
                SA::store(ra, As + (buf ^ 1) * SA::ELEMS, tid);
                SB::store(rb, Bs + (buf ^ 1) * SB::ELEMS, tid);
            }
            __syncthreads();
            buf ^= 1;
        }
    }
#endif

}

#if !PG_HALF  // (clang checks a template's non-dependent code against PG_T even unused)
template <int BM, int BN, int BK, int NT, int WTM, int WTN>
__device__ __forceinline__ void pg_tile_mma(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    static_assert(sizeof(PG_T) == 8 && BM > 0, "the MMA kinds are fp64");  // BM: checked when used
    constexpr int WGN = BN / WTN;
    static_assert((BM / WTM) * WGN * 32 == NT, "one warp per sub-tile");
    static_assert(WTM % PgMmaF64::M == 0 && WTN % PgMmaF64::N == 0 && BK % PgMmaF64::K == 0,
                  "sub-tiles of whole fragments");
    constexpr int FM = WTM / PgMmaF64::M, FN = WTN / PgMmaF64::N;
    using SA = PgMmaStage<BK, BM, NT, !PG_TRANS_A>;
    using SB = PgMmaStage<BK, BN, NT, (bool)PG_TRANS_B>;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp / WGN) * WTM, wn = (warp % WGN) * WTN;
    // this lane's fragment elements (A: row, k; B: column, k), relative to the sub-tile
    const int ar = wm + PgMmaF64::a_row(lane), ak = PgMmaF64::a_k(lane);
    const int bc = wn + PgMmaF64::b_col(lane), bk = PgMmaF64::b_k(lane);

    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;   // alpha == 0 never reads A or B
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;
    const bool vec_a = pg_aligned16(A) && lda % PG_V == 0 && (PG_TRANS_A ? m0 : 0) % PG_V == 0;
    const bool vec_b = pg_aligned16(B) && ldb % PG_V == 0 && (PG_TRANS_B ? 0 : n0) % PG_V == 0;

    PG_T acc[FM][FN][2];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) acc[i][j][0] = acc[i][j][1] = PG_T(0);

    // A k step is BK / 4 MMA steps: read this lane's fragments of A and B, then multiply.
    auto fragments = [&](PG_T (&a)[FM], PG_T (&b)[FN], const PG_T* as, const PG_T* bs, int kk) {
#pragma unroll
        for (int i = 0; i < FM; ++i) a[i] = as[SA::at(ar + i * PgMmaF64::M, kk + ak)];
#pragma unroll
        for (int j = 0; j < FN; ++j) b[j] = bs[SB::at(bc + j * PgMmaF64::N, kk + bk)];
    };
    auto multiply = [&](const PG_T (&a)[FM], const PG_T (&b)[FN]) {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) pg_mma_f64_8x8x4(acc[i][j], a[i], b[j]);
    };

    pg_mma_k_loop<BM, BN, BK, NT, PgMmaF64::K, SA, SB>(
        A, B, lda, ldb, M, N, K, m0, n0, vec_a, vec_b, tid, smem,
        [&](const PG_T* as, const PG_T* bs, int kk) {
            PG_T a[FM], b[FN];
            fragments(a, b, as, bs, kk);
            multiply(a, b);
        });

    // Epilogue: a lane's two accumulators of a fragment are adjacent columns of one row,
    // starting at an even column (n0, wn and the fragment's offset are even), so they
    // move as one 16-byte access where C and ldc allow it. (It repeats pg_tile's store of
    // a run of columns: one helper for both cost the fp32 128x64/8x8 kind 18 registers on
    // sm_90, 165 -> 183, and 12-20 % of its speed on the H100.)
    const PG_T alpha = PG_T(gp->alpha), beta = PG_T(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc;
    const bool vec_c = pg_aligned16(C) && ldc % PG_V == 0;
    {
        // the lane's place again, read afresh (compat.h): kept from the prologue it was the
        // one value spilled under the 4-block cap (render.MIN_BLOCKS) on sm_90
        const int tid = pg_thread_index(), lane = tid & 31, warp = tid >> 5;
        const int wm = (warp / WGN) * WTM, wn = (warp % WGN) * WTN;
#pragma unroll
        for (int i = 0; i < FM; ++i) {
            const int r = m0 + wm + i * PgMmaF64::M + PgMmaF64::c_row(lane);
            if (r >= M) continue;
            PG_T* crow = C + r * ldc;
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                const int c0 = n0 + wn + j * PgMmaF64::N + PgMmaF64::c_col(lane, 0);
                if (vec_c && c0 + 1 < N) {
                    PG_T v[2];
                    if (beta != PG_T(0)) pg_get16(crow + c0, v);   // beta == 0 never reads C
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        PG_T x = alpha * acc[i][j][q];
                        if (beta != PG_T(0)) x += beta * v[q];
                        v[q] = x;
                    }
                    pg_put16(crow + c0, v);
                } else {
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
                        if (c0 + q >= N) continue;
                        PG_T x = alpha * acc[i][j][q];
                        if (beta != PG_T(0)) x += beta * crow[c0 + q];
                        crow[c0 + q] = x;
                    }
                }
            }
        }
    }
}

#endif  // !PG_HALF

// The MMA epilogues' store of one lane's two adjacent accumulators v[0], v[1] to columns
// c0, c0 + 1 of C's row crow, in fp32, rounded once to T: one 8-byte (fp32) or 4-byte
// (16-bit) access where pg_pair_aligned(C, ldc) and both columns are in the tile, else
// element by element. beta == 0 never reads C.
template <typename T>
__device__ __forceinline__ bool pg_pair_aligned(const T* C, int ldc)
{
    return ((unsigned long long)C & (2 * sizeof(T) - 1)) == 0 && ldc % 2 == 0;
}
template <typename T>
__device__ __forceinline__ void pg_store_pair(T* crow, int c0, int N, const float* v,
                                              float alpha, float beta, bool vec_c)
{
    if (vec_c && c0 + 1 < N) {
        float x0 = alpha * v[0], x1 = alpha * v[1];
        if constexpr (sizeof(T) == 4) {
            float2* p = reinterpret_cast<float2*>(crow + c0);
            if (beta != 0.0f) {                 // beta == 0 never reads C
                const float2 c = *p;
                x0 += beta * c.x;
                x1 += beta * c.y;
            }
            *p = make_float2(x0, x1);
        } else {
            unsigned* p = reinterpret_cast<unsigned*>(crow + c0);
            if (beta != 0.0f) {                 // beta == 0 never reads C
                const unsigned w = *p;
                T c[2];
                c[0].x = (unsigned short)(w & 0xffffu);
                c[1].x = (unsigned short)(w >> 16);
                x0 += beta * float(c[0]);
                x1 += beta * float(c[1]);
            }
            *p = pg_pack2(T(x0).x, T(x1).x);
        }
    } else {
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            if (c0 + q >= N) continue;
            float x = alpha * v[q];
            if (beta != 0.0f) x += beta * float(crow[c0 + q]);
            crow[c0 + q] = T(x);
        }
    }
}

#if PG_WGMMA_KINDS
// The wgmma kinds' epilogue (pg_tile_wgmma, both forms): this thread's accumulators of a
// warpgroup's 64 x WN sub-tile at (r0, c0) of C; register i holds row g + 8 ((i / 2) % 2)
// of the warp's 16, column 8 (i / 4) + 2 (t % 4) + i % 2 (compat.h): pairs of adjacent
// columns, one access where C and ldc keep it aligned. alpha and beta in fp32.
template <int WN>
__device__ __forceinline__ void pg_wgmma_epilogue(const PgGemm* __restrict__ gp, int r0, int c0,
                                                  const float* acc, int tid)
{
    const float alpha = float(gp->alpha), beta = float(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc, M = gp->M, N = gp->N;
    const bool vec_c = pg_pair_aligned(C, ldc);
    const int lane = tid & 31, warp = (tid >> 5) & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = r0 + 16 * warp + (lane >> 2) + 8 * h;
        if (r >= M) continue;
        PG_T* crow = C + r * ldc;
#pragma unroll
        for (int j = 0; j < WN / 8; ++j)
            pg_store_pair(crow, c0 + 8 * j + 2 * (lane & 3), N, acc + 4 * j + 2 * h, alpha,
                          beta, vec_c);
    }
}

#if PG_STAGED_C
// pg_wgmma_epilogue through shared memory (PG_STAGED_C: render.staged_c). Stored straight
// from the registers' layout, a warp's access covers 8 rows of 4 pairs of columns: 8
// sectors for 16 (16-bit) or 32 (fp32) bytes of each, and one element at a time where
// C's rows are not pair-aligned (an odd leading dimension). Here each warp passes its
// sub-tile through `ws`, its own 8 x 40 floats of shared memory, 8 rows x 32 columns at
// a time: alpha acc goes in as the registers hold it (two floats a lane, rows 40 words
// apart: each half warp's 16 lanes on the 32 banks once), and lane l then handles column
// l of each row, 32 consecutive elements an access whatever C's alignment, in the same
// fp32 operations (alpha acc + beta C, rounded once). Nsight Compute on the H100, a bf16
// batch of short K (1024/256 b256): the direct stores held the L2 at 82 % of its
// throughput with DRAM at 18 %; staged, the 128x128 kernel ran 1.43x faster at 50 %
// (bench/NOTES.md, session 14).
constexpr int PG_WG_EPI_S = 40;                          // ws's row stride, floats
constexpr int PG_WG_EPI_FLOATS = 8 * PG_WG_EPI_S;        // one warp's ws
template <int WN>
__device__ __forceinline__ void pg_wgmma_epilogue_staged(const PgGemm* __restrict__ gp, int r0,
                                                         int c0, const float* acc, float* ws,
                                                         int tid)
{
    const float alpha = float(gp->alpha), beta = float(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc, M = gp->M, N = gp->N;
    const int lane = tid & 31, warp = (tid >> 5) & 3, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int rb = r0 + 16 * warp + 8 * h;           // the chunk's first row
        if (rb >= M) break;                              // (the warp's rows ascend with h)
#pragma unroll
        for (int jq = 0; jq < WN / 32; ++jq) {
            const int cb = c0 + 32 * jq;
            if (cb >= N) break;
#pragma unroll
            for (int jj = 0; jj < 4; ++jj) {
                const float* v = acc + 4 * (4 * jq + jj) + 2 * h;
                *reinterpret_cast<float2*>(ws + g * PG_WG_EPI_S + 8 * jj + 2 * t) =
                    make_float2(alpha * v[0], alpha * v[1]);
            }
            pg_syncwarp();
            const int col = cb + lane;
            if (col < N) {
                PG_T* __restrict__ cp = C + (long long)rb * ldc + col;
                const float* w = ws + lane;
                const int rows = min(8, M - rb);
#pragma unroll 1
                for (int rr = 0; rr < rows; ++rr, cp += ldc, w += PG_WG_EPI_S) {
                    float x = *w;
                    if (beta != 0.0f) x += beta * float(*cp);
                    *cp = PG_T(x);
                }
            }
            pg_syncwarp();                               // ws is rewritten next
        }
    }
}
#endif

// A wgmma tile's epilogue, staged (PG_STAGED_C) or not. The staged one's ws: in the
// last cp.async stage, which a block's next tile first writes after its k loop's first
// barrier (its prologue fills the stages before it), and which this tile's wgmmas have
// stopped reading (the k loop ends on a barrier); a tile with no k steps takes no
// barrier, but then only epilogues touch it, each warp its own ws. Warps 0-3 in B's
// part of that stage, warps 4-7 (a second warpgroup) in A's.
template <int WN, int NT, class SA, class SB>
__device__ __forceinline__ void pg_wgmma_store(const PgGemm* __restrict__ gp, int r0, int c0,
                                               const float* acc, int tid, PG_T* smem)
{
#if PG_STAGED_C
    constexpr int ST = PG_STAGES;
    static_assert(NT <= 256 && 4 * PG_WG_EPI_FLOATS * 4 <= SB::ELEMS * (int)sizeof(PG_T) &&
                  (NT <= 128 || 4 * PG_WG_EPI_FLOATS * 4 <= SA::ELEMS * (int)sizeof(PG_T)),
                  "four warps' epilogue rows fit in each operand's part of a stage");
    const int w = tid >> 5;
    PG_T* part = w < 4 ? smem + ST * SA::ELEMS + (ST - 1) * SB::ELEMS   // B's last stage
                       : smem + (ST - 1) * SA::ELEMS;                   // A's last stage
    pg_wgmma_epilogue_staged<WN>(gp, r0, c0, acc,
                                 reinterpret_cast<float*>(part) + (w & 3) * PG_WG_EPI_FLOATS, tid);
#else
    pg_wgmma_epilogue<WN>(gp, r0, c0, acc, tid);
#endif
}
#endif

#if PG_TF32
// The TF32 kinds (fp32, precision "tf32" and "3xtf32", tiles.TF32_FAMILIES): as
// pg_tile_mma16, warps in a (BM / WTM) x (BN / WTN) grid, each a WTM x WTN sub-tile of C
// as (WTM / 16) x (WTN / 8) fragments of the 16x8x8 TF32 MMA (compat.h PgMmaTf32), fp32
// accumulators, through pg_mma_k_loop's stages. Each fp32 element read from a stage is
// rounded to TF32 in registers (pg_tf32: cvt.rna); SPLIT (3xTF32, as CUTLASS's
// fast-fp32 path) also keeps the remainder, x = big + small with big = tf32(x) and
// small = x - big (exact in fp32; the MMA reads it truncated to TF32, as CUTLASS's
// round-toward-zero small part: off by < 2^-21 |x|), and sums a_small b_big + a_big
// b_small before a_big b_big, the small terms first so they are not lost against the
// large ones (a_small b_small, below fp32's unit, is dropped).
//
// SPLIT sums each MMA step's three products into zeroed registers and adds them to the
// accumulators with an fp32 add: the tensor cores' own accumulation does not round to
// nearest (measured on the H100: accumulating in the MMA, 3xTF32's error grew linearly
// with K, 3.4e-5 of max |C| at K = 4096 against 1.3e-6 for the SIMT kinds), and an add
// that rounds keeps the error of the long sum at fp32's.
//
// The stage layout (PgTf32Stage) is PgMmaStage's, padded for 4-byte fragment reads:
// lane l reads element (x0 + l / 4, k0 + l % 4) of an x-major stage (A, B^T; A's
// registers also + 8 rows, + 4 k) and (x0 + l / 4, k0 + l % 4) of a k-major one at
// (k0 + l % 4) S + x0 + l / 4 words. With x-major rows of S = 4 mod 8 words, (l / 4) S
// + l % 4 covers the 32 banks once (S / 4 is odd, so (l / 4) S / 4 mod 8 is a
// permutation of l / 4); with k-major rows of S = 8 mod 32 words (BX a multiple of 32,
// padded by 8), (l % 4) 8 + l / 4 does. Every fragment read is one wavefront, which
// tests/test_tf32_kernel.py checks over the kinds' strides. Both paddings keep the rows
// 16-byte aligned for cp.async's units.
// PADDED false: rows of CONT elements (k-major ones + 4, for the windows below), for a
// stage no fragment reads (pg_tile_wgmma's B).
//
// WINDOWS (pg_tile_wgmma's stages): rows not 16-byte aligned are copied in aligned
// windows (WIN: the cp.async path, rows with 4 spare elements): 16-byte units from the
// row's first element rounded down to 16 bytes, CONT / 4 + 1 of them, so element (o, c)
// lands at o S + c + off(o), off(o) being how many elements past a 16-byte boundary
// row o starts in global memory. A 4-byte cp.async per element made these stages
// LSU-bound (bench/NOTES.md, session 11: 1.27-1.45x slower than on aligned rows).
// off(o) depends only on o mod 4 (rows 4 apart start 4 ld elements apart), and a
// slice's rows keep their offsets from one k step to the next (the slice moves by BK
// rows or columns, multiples of 4), so a tile's offsets are one packed word
// (offsets()), which the readers add to at(). Only a slice whose first window would
// start before the matrix (its first 3 elements) takes pg_copy_units' element copies, to
// the same places; aligned rows keep pg_copy_units' 16-byte path (through the windows'
// loop, without the unit after, they ran 5-7 % slower: bench/NOTES.md, session 12). (The
// mma.sync TF32 kinds measured no gain from windows and keep pg_copy_units.)
template <int BK, int BX, int NT, bool KCONT, bool PADDED = true, bool WINDOWS = false>
struct PgTf32Stage {
    using Units = PgStage<BK, BX, NT, KCONT>;   // the same units, CONT = KCONT ? BK : BX
    static constexpr int CONT = Units::CONT;
    static constexpr int W = Units::W, L = Units::L, UNITS = Units::UNITS;
    static constexpr int S = CONT + (PADDED ? (KCONT ? 4 : 8) : (KCONT ? 0 : 4));   // row stride
    static constexpr int ELEMS = (KCONT ? BX : BK) * S;      // one stage
    // windows where rows have room and a thread's units are a column of rows 4k apart
    static constexpr bool WIN = WINDOWS && PG_ASYNC && W == 4 && S >= CONT + 4 && UNITS % NT == 0 &&
                                NT % (CONT / 4) == 0 && (NT / (CONT / 4)) % 4 == 0;
    static_assert(S % PG_V == 0 && (!PADDED || (KCONT ? S % 8 == 4 : S % 32 == 8)),
                  "16-byte rows, conflict-free fragment reads");

    static __device__ __forceinline__ int at(int x, int k) { return KCONT ? x * S + k : k * S + x; }
    // The stored row of (x, k), and its offset among `offs` (offsets())
    static __device__ __forceinline__ int row(int x, int k) { return KCONT ? x : k; }
    static __device__ __forceinline__ int row_off(unsigned offs, int o)
    {
        return (int)((offs >> (8 * (o & 3))) & 3);
    }
    // How many elements past a 16-byte boundary stored row r starts from column c
    static __device__ __forceinline__ unsigned off_at(const PG_T* X, int ld, int r, int c)
    {
        return ((unsigned)((unsigned long long)X >> 2) + r * ld + c) & 3u;
    }
    // The offsets of stored rows rbase .. rbase + 3 from column cbase, a byte each (0
    // where the stage has no windows).
    static __device__ __forceinline__ unsigned offsets(const PG_T* X, int ld, int rbase, int cbase)
    {
        if (!WIN) return 0;
        unsigned r = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) r |= off_at(X, ld, rbase + q, cbase) << (8 * q);
        return r;
    }

    // Registers (PgStage::load) -> one stage.
    static __device__ __forceinline__ void store(const PG_T (&r)[L][W], PG_T* xs, int tid)
    {
#pragma unroll
        for (int l = 0; l < L; ++l) {
            const int u = tid + l * NT;
            if (UNITS % NT != 0 && u >= UNITS) continue;
            int o, c;
            Units::unit(u, o, c);
            if (W > 1) pg_put16(xs + o * S + c, r[l]);
            else xs[o * S + c] = r[l][0];
        }
    }
#if PG_ASYNC
    static __device__ __forceinline__ void copy(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int rlim, int clim,
                                                bool vec, bool inside, int tid)
    {
        if (!WIN || vec) {
            pg_copy_units<W, L, UNITS, CONT, NT>([&](int o, int c) { return xs + o * S + c; },
                                                 X, ld, rbase, cbase, rlim, clim, vec, inside, tid);
            return;
        }
        constexpr int R = KCONT ? BX : BK;      // stored rows in a stage
        const PG_T* x0 = X + rbase * ld + cbase;
        if (rbase * ld + cbase >= 3) {          // no window starts before the matrix
            // A thread's units are those of pg_copy_units (UNITS % NT == 0): one column c
            // of rows o + l RS, and RS ld elements are whole 16-byte steps (RS % 4 == 0),
            // so one rounded pointer serves them all; the thread of a row's last unit
            // also copies the unit after it.
            constexpr int PR = CONT / 4, RS = NT / PR;
            const int o = tid / PR, c = (tid % PR) * 4;
            const PG_T* w = reinterpret_cast<const PG_T*>(
                (unsigned long long)(x0 + o * ld) & ~15ull) + c;
            const bool last = c == CONT - 4;
            // (destinations as one shared address and constant steps: a pointer a unit
            // cost 4 instructions of address arithmetic each)
            const unsigned d = pg_smem_addr(xs + o * S + c);
            constexpr unsigned STEP = RS * S * sizeof(PG_T);
            if (inside && (rbase + R - 1) * ld + cbase + CONT + 4 <= (rlim - 1) * ld + clim) {
#pragma unroll
                for (int l = 0; l < UNITS / NT; ++l) {
                    pg_cp_async16(d + l * STEP, w + l * RS * ld, 16);
                    if (last) pg_cp_async16(d + l * STEP + 16, w + l * RS * ld + 4, 16);
                }
                return;
            }
            // Across an edge: a unit copies its elements left of clim (the elements before
            // the row's first lie inside the matrix) and zero-fills the rest; rows from
            // rlim on are zeros. Only a cut unit of the matrix's last row would take
            // bytes past its last element into its 16 (which compute-sanitizer counts as
            // read, zero-filled or not). A thread's units share their columns, so it has
            // at most one such unit, at step lc (c, or c + 4 for lc4); that one copies
            // element by element after the loop (flags for every unit in the loop cost
            // the short-K batches 4-8 %: bench/NOTES.md, session 12).
            const int nv = clim - cbase + (int)off_at(X, ld, rbase + o, cbase) - c;
            const int rows = rlim - rbase - o;
            const int lr = rows > 0 && (rows - 1) % RS == 0 ? (rows - 1) / RS : -1;
            const int lc = nv > 0 && nv < 4 ? lr : -1, lc4 = last && nv > 4 && nv < 8 ? lr : -1;
#pragma unroll
            for (int l = 0; l < UNITS / NT; ++l) {
                const PG_T* src = w + l * RS * ld;
                const bool live = l * RS < rows;
                const int n = live ? max(0, min(4, nv)) : 0, n2 = live ? max(0, min(4, nv - 4)) : 0;
                if (l != lc) pg_cp_async16(d + l * STEP, n > 0 ? src : X, 4 * n);
                if (last && l != lc4) pg_cp_async16(d + l * STEP + 16, n2 > 0 ? src + 4 : X, 4 * n2);
            }
            const int lx = max(lc, lc4);
            if (lx >= 0 && lx < UNITS / NT) {
                const int h = lc4 >= 0 ? 4 : 0;
                PG_T* dst = xs + (o + lx * RS) * S + c + h;
                const PG_T* src = w + lx * RS * ld + h;
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    pg_cp_async_elem<4>(dst + j, j < nv - h ? src + j : X, j < nv - h ? 4 : 0);
            }
            return;
        }
        const unsigned offs = offsets(X, ld, rbase, cbase);
        pg_copy_units<W, L, UNITS, CONT, NT>(
            [&](int o, int c) { return xs + o * S + c + row_off(offs, o); },
            X, ld, rbase, cbase, rlim, clim, false, inside, tid);
    }
#endif
};

template <int BM, int BN, int BK, int NT, int WTM, int WTN, bool SPLIT>
__device__ __forceinline__ void pg_tile_tf32x(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    using F = PgMmaTf32;
    static_assert(sizeof(PG_T) == 4 && BM > 0, "the TF32 kinds are fp32");
    constexpr int WGN = BN / WTN;
    static_assert((BM / WTM) * WGN * 32 == NT, "one warp per sub-tile");
    static_assert(WTM % F::M == 0 && WTN % F::N == 0 && BK % F::K == 0,
                  "sub-tiles of whole fragments");
    constexpr int FM = WTM / F::M, FN = WTN / F::N;
    constexpr int P = SPLIT ? 2 : 1;            // parts of each operand: big (, small)
    using SA = PgTf32Stage<BK, BM, NT, !PG_TRANS_A>;
    using SB = PgTf32Stage<BK, BN, NT, (bool)PG_TRANS_B>;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp / WGN) * WTM, wn = (warp % WGN) * WTN;

    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;   // alpha == 0 never reads A or B
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;
    const bool vec_a = pg_aligned16(A) && lda % PG_V == 0 && (PG_TRANS_A ? m0 : 0) % PG_V == 0;
    const bool vec_b = pg_aligned16(B) && ldb % PG_V == 0 && (PG_TRANS_B ? 0 : n0) % PG_V == 0;

    float acc[FM][FN][F::CE];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int q = 0; q < F::CE; ++q) acc[i][j][q] = 0.0f;

    // x as TF32 parts: p[0] = tf32(x), p[1] = x - p[0] (SPLIT, pg_tf32_split). SPLIT
    // rounds big by adding half a TF32 unit to x's bits (pg_tf32_big): the MMA reads the
    // register truncated, so it sees cvt.rna's value for every finite x, in one integer
    // add where sm_90 emulates cvt.rna in three instructions.
    auto parts = [](unsigned (&p)[P], float x) {
        float small;
        p[0] = SPLIT ? pg_tf32_split(x, small) : pg_tf32(x);
        if (SPLIT) p[P - 1] = __float_as_uint(small);
    };
    // SPLIT: a stage's sums (BK / 8 MMA steps of three products each), added to acc once
    // the stage is done (module comment above)
    float d[SPLIT ? FM : 1][SPLIT ? FN : 1][F::CE];
    // One MMA step (8 k values): this lane's B fragments, then row by row of fragments
    // its A fragment and the MMAs (one row of A parts live at a time, not FM).
    auto step = [&](const PG_T* as, const PG_T* bs, int kk) {
        unsigned b[P][FN][F::BR];
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int r = 0; r < F::BR; ++r) {
                unsigned p[P];
                parts(p, float(bs[SB::at(wn + j * F::N + F::b_col(lane), kk + F::b_k(lane, r))]));
#pragma unroll
                for (int s = 0; s < P; ++s) b[s][j][r] = p[s];
            }
#pragma unroll
        for (int i = 0; i < FM; ++i) {
            unsigned a[P][F::AR];
#pragma unroll
            for (int r = 0; r < F::AR; ++r) {
                unsigned p[P];
                parts(p, float(as[SA::at(wm + i * F::M + F::a_row(lane, r), kk + F::a_k(lane, r))]));
#pragma unroll
                for (int s = 0; s < P; ++s) a[s][r] = p[s];
            }
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                if (SPLIT) {
                    float (&e)[F::CE] = d[SPLIT ? i : 0][SPLIT ? j : 0];
                    if (kk == 0)
#pragma unroll
                        for (int q = 0; q < F::CE; ++q) e[q] = 0.0f;
                    pg_mma_16x8x8_tf32(e, a[P - 1], b[0][j]);   // a_small b_big
                    pg_mma_16x8x8_tf32(e, a[0], b[P - 1][j]);   // a_big b_small
                    pg_mma_16x8x8_tf32(e, a[0], b[0][j]);       // a_big b_big
                    if (kk + F::K == BK)
#pragma unroll
                        for (int q = 0; q < F::CE; ++q) acc[i][j][q] += e[q];
                } else {
                    pg_mma_16x8x8_tf32(acc[i][j], a[0], b[0][j]);
                }
            }
        }
    };

    pg_mma_k_loop<BM, BN, BK, NT, F::K, SA, SB>(A, B, lda, ldb, M, N, K, m0, n0, vec_a, vec_b,
                                                tid, smem, step);

    // Epilogue in fp32, as pg_tile's: a lane's accumulators q = 0, 1 (and 2, 3) are
    // adjacent columns 2 (l % 4) (+1) of one row, an even column, so they move as one
    // 8-byte access where C and ldc keep it aligned.
    const float alpha = float(gp->alpha), beta = float(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc;
    const bool vec_c = pg_pair_aligned(C, ldc);
    // the lane's place read afresh (compat.h pg_thread_index): kept from the prologue, it
    // was spilled (4-16 bytes) by the 128-thread 3xTF32 kinds on sm_80 and sm_90
    {
    const int lane = pg_thread_index() & 31, warp = pg_thread_index() >> 5;
    const int wm = (warp / WGN) * WTM, wn = (warp % WGN) * WTN;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {           // rows g and g + 8 of the fragment
            const int r = m0 + wm + i * F::M + F::c_row(lane, 2 * h);
            if (r >= M) continue;
            PG_T* crow = C + r * ldc;
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                const int c0 = n0 + wn + j * F::N + F::c_col(lane, 0);
                pg_store_pair(crow, c0, N, acc[i][j] + 2 * h, alpha, beta, vec_c);
            }
        }
    }
}

// The tile functions of engines 3 (TF32) and 4 (3xTF32) under PG_KINDS's parameters.
template <int BM, int BN, int BK, int NT, int WTM, int WTN>
__device__ __forceinline__ void pg_tile_tf32(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    pg_tile_tf32x<BM, BN, BK, NT, WTM, WTN, false>(gp, m0, n0, smem);
}
template <int BM, int BN, int BK, int NT, int WTM, int WTN>
__device__ __forceinline__ void pg_tile_3xtf32(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    pg_tile_tf32x<BM, BN, BK, NT, WTM, WTN, true>(gp, m0, n0, smem);
}

#if PG_WGMMA_KINDS
#if !PG_WGMMA
#error "the wgmma kinds (tiles.py wgmma-* families) compile for sm_90a only (kernels/nvrtc.py)"
#endif
// 3xTF32 on Hopper's warpgroup MMA (family wgmma-3xtf32, engine E 6 with fp32 operands,
// sm_90a): warpgroups of 128 threads in a (BM / WM) x (BN / WN) grid, each a 64 x WN
// sub-tile of C (WN 128 or 64) as the fp32 accumulators of m64nWNk8 TF32 wgmmas
// (compat.h pg_wgmma_tf32). The operands arrive as
// pg_tile_tf32x's do (PgTf32Stage cp.async stages through pg_mma_k_loop, so any leading
// dimension and transpose), and each element is split once, x = big + small as there:
// - B by the whole block into one K-major stage per part (TF32 wgmma reads no other
//   layout), rows of BK = 32 floats (128 bytes) with 16-byte chunk c of row n at
//   c ^ (n % 8), wgmma's 128-byte swizzle; a thread's units are 4 k-adjacent floats, read
//   as one 16-byte load (B^T) or four of consecutive n across the warp (B), both
//   conflict-free, and written with 16-byte stores of whole swizzled rows;
// - A by each thread into the registers wgmma reads A from, PgMmaTf32's fragment of its
//   warp's 16 rows (the warps of a warpgroup own disjoint rows: each element once).
// A stage's 3 x BK / 8 wgmmas sum a_small b_big + a_big b_small + a_big b_big into d,
// which starts at zero (scale-d 0), and d is added to the accumulators in fp32 once
// the stage is done: the tensor cores' additions do not round to nearest, so a sum
// carried through them for all of K loses accuracy linearly in K (pg_tile_tf32x).
// A stage runs: split B and A, fence the split stage into the async proxy, barrier,
// wgmmas, wait, add; the k loop's barrier before the next split keeps the split stage
// from being rewritten while any warpgroup's wgmmas read it.
template <int BM, int BN, int BK, int NT, int WM, int WN>
__device__ __forceinline__ void pg_tile_wgmma(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    using F = PgMmaTf32;
    static_assert(sizeof(PG_T) == 4, "the fp32 wgmma kinds are 3xTF32");
    static_assert(WM == 64 && (WN == 128 || WN == 64) && BK == 32,
                  "m64n128k8 or m64n64k8 wgmmas, split stages of 128-byte rows");
    constexpr int WGN = BN / WN;
    static_assert((BM / WM) * WGN * 128 == NT, "one warpgroup per sub-tile");
    using SA = PgTf32Stage<BK, BM, NT, !PG_TRANS_A, true, true>;
    using SB = PgTf32Stage<BK, BN, NT, (bool)PG_TRANS_B, false, true>;   // read by the split only
    // the split stage after the cp.async stages, 1 KiB aligned (render.smem_elems_async)
    constexpr int SPLIT_AT = (PG_STAGES * (SA::ELEMS + SB::ELEMS) + 255) / 256 * 256;
    constexpr int PART = BN * BK;
    static_assert(SPLIT_AT + 2 * PART <= PG_SMEM_TILE, "shared tiles exceed PG_SMEM_TILE");
    PG_T* const bsplit = smem + SPLIT_AT;       // [2][BN][BK]: big, small

    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = (tid >> 5) & 3;
    const int wm = (wg / WGN) * WM, wn = (wg % WGN) * WN;
    static_assert(!(PG_TRANS_B && SB::WIN), "B^T's split reads whole 16-byte units");
    // the stages' row offsets (PgTf32Stage: unaligned rows), as their copies' first slice
    // A's rows: this lane's all lie 4k apart (rows g + 8i, or k values t + 4i), one offset;
    // B's (nn): k rows 4c + e, offset e
    const unsigned offs_a = PG_TRANS_A ? SA::offsets(gp->A, gp->lda, 0, m0)
                                       : SA::offsets(gp->A, gp->lda, m0, 0);
    const int off_a = SA::row_off(offs_a, SA::row(F::a_row(lane, 0), F::a_k(lane, 0)));
    const unsigned offs_b = PG_TRANS_B ? 0u : SB::offsets(gp->B, gp->ldb, 0, n0);
    int off_b[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) off_b[e] = SB::row_off(offs_b, e);
    float acc[WN / 2], d[WN / 2];
#pragma unroll
    for (int i = 0; i < WN / 2; ++i) acc[i] = 0.0f;

    // x's parts (pg_tf32_split): big = x rounded to TF32 (low bits cleared), small = x - big
    auto split = [](float x, float& big, float& small) {
        big = pg_tf32_float(pg_tf32_split(x, small));
    };
    auto step = [&](const PG_T* as, const PG_T* bs, int) {
        constexpr int UNITS = BN * BK / 4, CH = BK / 4;
        // unit u = tid + l NT is (n, c) = (u / CH, u % CH) (B^T) or (u % BN, u / BN) (B):
        // one c, or one n, a thread, so its reads are one base and constant steps
        static_assert(NT % BN == 0 && NT % CH == 0, "a thread keeps its c (B^T) or n (B)");
        const int nt = PG_TRANS_B ? tid / CH : tid % BN, ct = PG_TRANS_B ? tid % CH : tid / BN;
#pragma unroll
        for (int l = 0; l < UNITS / NT; ++l) {
            const int n = nt + (PG_TRANS_B ? l * (NT / CH) : 0);
            const int c = ct + (PG_TRANS_B ? 0 : l * (NT / BN));
            float x[4], big[4], small[4];
            if (PG_TRANS_B) {               // rows of BK, no windows (SB::WIN false)
                pg_get16(bs + SB::at(n, 4 * c), x);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) x[e] = bs[SB::at(n, 4 * c + e) + off_b[e]];
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) split(x[e], big[e], small[e]);
            const int o = n * BK + ((c ^ (n & 7)) << 2);
            pg_put16(bsplit + o, big);
            pg_put16(bsplit + PART + o, small);
        }
        unsigned a[BK / F::K][2][F::AR];            // per k step: big, small
#pragma unroll
        for (int kf = 0; kf < BK / F::K; ++kf)
#pragma unroll
            for (int r = 0; r < F::AR; ++r) {
                float big, small;
                split(as[SA::at(wm + 16 * warp + F::a_row(lane, r), kf * F::K + F::a_k(lane, r)) + off_a],
                      big, small);
                a[kf][0][r] = __float_as_uint(big);
                a[kf][1][r] = __float_as_uint(small);
            }
        pg_fence_proxy_async();
        __syncthreads();
        pg_wgmma_fence();
#pragma unroll
        for (int kf = 0; kf < BK / F::K; ++kf) {
            const PG_T* b = bsplit + wn * BK + kf * F::K;
            const unsigned long long big = pg_wgmma_desc(b, 16, 8 * BK * 4, 1);
            const unsigned long long small = pg_wgmma_desc(b + PART, 16, 8 * BK * 4, 1);
            pg_wgmma_tf32<WN>(d, a[kf][1], big, kf > 0);   // a_small b_big
            pg_wgmma_tf32<WN>(d, a[kf][0], small, 1);      // a_big b_small
            pg_wgmma_tf32<WN>(d, a[kf][0], big, 1);        // a_big b_big
        }
        pg_wgmma_commit();
        pg_wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < WN / 2; ++i) {
            pg_wgmma_reg_fence(d[i]);
            acc[i] += d[i];
        }
    };
    pg_mma_k_loop<BM, BN, BK, NT, BK, SA, SB>(gp->A, gp->B, gp->lda, gp->ldb, gp->M, gp->N,
                                              pg_k_of(gp), m0, n0, pg_vec_a(gp, m0),
                                              pg_vec_b(gp, n0), tid, smem, step);

    pg_wgmma_store<WN, NT, SA, SB>(gp, m0 + wm, n0 + wn, acc, tid, smem);
}
#endif  // PG_WGMMA_KINDS
#endif  // PG_TF32

#if PG_HALF
// The 16-bit MMA kinds (float16 / bfloat16, engine "mma" in tiles.py): as pg_tile_mma,
// warps in a (BM / WTM) x (BN / WTN) grid, each a WTM x WTN sub-tile of C, here as
// (WTM / 16) x (WTN / 8) fragments of the 16x8x16 warp MMA (compat.h PgMmaHalf: mma.sync
// on sm_80+), fp32 accumulators, staged through the same PgMmaStage layouts (padded or,
// for 64-byte rows, skewed) by the widest copy each operand's alignment allows
// (pg_align_of, pg_copy16). A lane's A and B registers hold k-adjacent pairs.
template <int BM, int BN, int BK, int NT, int WTM, int WTN>
__device__ __forceinline__ void pg_tile_mma16(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    using F = PgMmaHalf;
    static_assert(sizeof(PG_T) == 2 && BM > 0, "the 16-bit MMA kinds are float16 / bfloat16");
    constexpr int WGN = BN / WTN;
    static_assert((BM / WTM) * WGN * 32 == NT, "one warp per sub-tile");
    static_assert(WTM % F::M == 0 && WTN % F::N == 0 && BK % F::K == 0,
                  "sub-tiles of whole fragments");
    constexpr int FM = WTM / F::M, FN = WTN / F::N;
    using SA = PgMmaStage<BK, BM, NT, !PG_TRANS_A>;
    using SB = PgMmaStage<BK, BN, NT, (bool)PG_TRANS_B>;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = (warp / WGN) * WTM, wn = (warp % WGN) * WTN;

    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;   // alpha == 0 never reads A or B
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;
    // the widest copy each operand's rows allow (pg_align_of; fp64 has a bool here)
    const int vec_a = pg_align_of(A, lda, PG_TRANS_A ? m0 : 0);
    const int vec_b = pg_align_of(B, ldb, PG_TRANS_B ? 0 : n0);

    float acc[FM][FN][F::CE];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int q = 0; q < F::CE; ++q) acc[i][j][q] = 0.0f;

    // One MMA step (16 k values): this lane's fragment registers, then FM x FN MMAs.
    auto step = [&](const PG_T* as, const PG_T* bs, int kk) {
        unsigned a[FM][F::AR], b[FN][F::BR];
#if PG_MMA_HALF
        // ldmatrix (compat.h): one x4 load per A fragment and per pair of B fragments.
        // Lane l addresses row l % 8 of matrix q = l / 8; A's matrices are (rows, k)
        // blocks (0, 0), (8, 0), (0, 8), (8, 8), B's pairs (k 0 | 8, fragment j | j + 1).
        // A k-major stage (A^T, B) is read transposed. Rows are 16-byte aligned and 8 rows
        // fall on distinct 16-byte bank groups (PgMmaStage: S = 8 mod 16 elements, or
        // 64-byte rows skewed in pairs).
        static_assert(FN % 2 == 0, "B fragments load in pairs");
        const int q = lane >> 3, r8 = lane & 7;
#pragma unroll
        for (int i = 0; i < FM; ++i) {
            const int x = wm + i * F::M + 8 * (q & 1), k = kk + 8 * (q >> 1);   // + r8 on the rows
            pg_ldmatrix_x4<!SA::K_CONTIGUOUS>(
                a[i], as + (SA::K_CONTIGUOUS ? SA::pos8(x, r8, k) : SA::pos8(k, r8, x)));
        }
#pragma unroll
        for (int j = 0; j < FN; j += 2) {
            const int x = wn + (j + (q >> 1)) * F::N, k = kk + 8 * (q & 1);   // + r8 on the rows
            unsigned r[4];
            pg_ldmatrix_x4<!SB::K_CONTIGUOUS>(
                r, bs + (SB::K_CONTIGUOUS ? SB::pos8(x, r8, k) : SB::pos8(k, r8, x)));
            b[j][0] = r[0]; b[j][1] = r[1]; b[j + 1][0] = r[2]; b[j + 1][1] = r[3];
        }
#else
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int r = 0; r < F::AR; ++r)
                a[i][r] = SA::pair(as, wm + i * F::M + F::a_row(lane, r), kk + F::a_k(lane, r));
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int r = 0; r < F::BR; ++r)
                b[j][r] = SB::pair(bs, wn + j * F::N + F::b_col(lane), kk + F::b_k(lane, r));
#endif
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) pg_mma_16x8x16(acc[i][j], a[i], b[j], PG_T());
    };

    pg_mma_k_loop<BM, BN, BK, NT, F::K, SA, SB>(A, B, lda, ldb, M, N, K, m0, n0, vec_a, vec_b,
                                                tid, smem, step);

    // Epilogue in fp32, rounded once to PG_T: a lane's accumulators q = 0, 1 (and 2, 3)
    // are adjacent columns 2 (l % 4) (+1) of one row, so they move as one 4-byte access
    // where C and ldc keep it aligned.
    const float alpha = float(gp->alpha), beta = float(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc;
    const bool vec_c = pg_pair_aligned(C, ldc);
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {           // rows g and g + 8 of the fragment
            const int r = m0 + wm + i * F::M + F::c_row(lane, 2 * h);
            if (r >= M) continue;
            PG_T* crow = C + r * ldc;
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                const int c0 = n0 + wn + j * F::N + F::c_col(lane, 0);
                pg_store_pair(crow, c0, N, acc[i][j] + 2 * h, alpha, beta, vec_c);
            }
        }
}


#if PG_WGMMA_KINDS
#if !PG_WGMMA
#error "the wgmma kinds (tiles.py wgmma-* families) compile for sm_90a only (kernels/nvrtc.py)"
#endif
// One operand's BK x BX stage of the wgmma kinds (pg_tile_wgmma) in one of wgmma's
// canonical shared-memory layouts. The operand's stored rows (global memory, row-major)
// are CONT elements long: BK when k is contiguous (A, B^T: K-major), BX when x is (A^T,
// B: M- or N-major).
//   PG_WG_SWIZZLE 1 (render.WGMMA_SWIZZLE): K-major stages keep each stored row whole,
//     BK * 2 bytes (32, 64 or 128: the swizzle width), 8-row groups one after another
//     (SBO = 8 rows); MN-major stages are atoms of 8 k rows x 64 x (128 bytes a row,
//     1 KiB), the atoms along x LBO = 1 KiB apart, the 8-row groups along k SBO = BX / 64
//     KiB apart. The 16-byte chunk j of the 128-byte line L of a stage is stored at
//     chunk j ^ (L % (width / 16)): the wgmma swizzle modes (32, 64, 128 bytes), which
//     let the tensor cores read whole 128-byte lines, so the stage base must be 1 KiB
//     aligned (PG_SMEM_ALIGN). Copies in row order fill whole lines: conflict-free.
//   PG_WG_SWIZZLE 0: the no-swizzle ("interleaved") layout, core matrices of 8 stored rows
//     x 16 bytes (128 contiguous bytes) in the order of the stored rows. Measured 1.8-2x
//     slower on the H100 (bench/NOTES.md, session 8): the tensor cores read it 16 bytes a
//     row.
#define PG_WG_ELEM_UNROLL _Pragma("unroll 4")
template <int BK, int BX, bool KCONT>
struct PgWgStage {
    static constexpr int CONT = KCONT ? BK : BX;
    static constexpr int ELEMS = BK * BX;           // one stage, no padding
    static constexpr int UNITS = ELEMS / 8;
    static constexpr int RG = 8 * CONT;             // interleaved: elements per 8-row group
    static_assert(BK % 16 == 0 && BX % 64 == 0, "whole wgmma k steps and 64-row blocks");
    static_assert(!PG_WG_SWIZZLE || !KCONT || BK == 16 || BK == 32 || BK == 64,
                  "K-major rows of one swizzle width (32, 64 or 128 bytes)");
    static constexpr unsigned WIDTH = PG_WG_SWIZZLE ? (KCONT ? 2 * BK : 128) : 16;
    // Descriptor fields: byte offsets between core-matrix groups along K (leading) and
    // along M or N (stride); layout type (bits 62-63): 0 none, 1 128 B, 2 64 B, 3 32 B.
    static constexpr unsigned LBO = PG_WG_SWIZZLE ? (KCONT ? 16u : 1024u) : (KCONT ? 128u : 2u * RG);
    static constexpr unsigned SBO = PG_WG_SWIZZLE ? (KCONT ? 16u * BK : 16u * BX) : (KCONT ? 2u * RG : 128u);
    static constexpr unsigned MODE = WIDTH == 128 ? 1u : WIDTH == 64 ? 2u : WIDTH == 32 ? 3u : 0u;

    // Stored row o, column c: its byte offset before the swizzle.
    static __device__ __forceinline__ int lin(int o, int c)
    {
        if (!PG_WG_SWIZZLE) return 2 * ((o >> 3) * RG + (c >> 3) * 64 + (o & 7) * 8 + (c & 7));
        if (KCONT) return o * 2 * BK + 2 * c;
        return (o >> 3) * (int)SBO + (c >> 6) * 1024 + (o & 7) * 128 + 2 * (c & 63);
    }
    // ... and its element offset where it is stored (swizzled).
    static __device__ __forceinline__ int off(int o, int c)
    {
        const int b = lin(o, c);
        return (b ^ (((b >> 7) & (int)(WIDTH / 16 - 1)) << 4)) >> 1;
    }
    // The descriptor's start of the block of core matrices at (x, k) (x a multiple of 64,
    // k of 16): its offset before the swizzle, in elements (the hardware swizzles).
    static __device__ __forceinline__ int at(int x, int k) { return (KCONT ? lin(x, k) : lin(k, x)) >> 1; }

    // The 16-byte copies of a slice that lies wholly inside the matrix (pg_tile_wgmma's
    // interior tiles, whole k steps), with no per-unit arithmetic: thread t's units are
    // stored rows R = NT / (CONT / 8) apart (a multiple of 8, so every one has its first's
    // swizzle phase), its l-th unit l R rows after its first in the source and l R CONT
    // elements after it in the stage, in every layout. `src`: the first unit's source at
    // this k step; `dst`: its place in this step's stage (first_unit).
    template <int NT>
    static __device__ __forceinline__ void copy_inside(PG_T* dst, const PG_T* src, int ld)
    {
        constexpr int R = NT / (CONT / 8);
        static_assert(UNITS % NT == 0 && NT % (CONT / 8) == 0 && R % 8 == 0,
                      "whole rounds of units, 8 stored rows apart");
#pragma unroll
        for (int l = 0; l < UNITS / NT; ++l)
            pg_cp_async16(dst + l * R * CONT, src + (long long)l * R * ld, 16);
    }
    // Thread t's first unit: (stored row, column) in the slice, and its place in a stage.
    static __device__ __forceinline__ int first_row(int tid) { return tid / (CONT / 8); }
    static __device__ __forceinline__ int first_col(int tid) { return (tid % (CONT / 8)) * 8; }
    static __device__ __forceinline__ int first_unit(int tid) { return off(first_row(tid), first_col(tid)); }

    // This thread's copies of the slice (stored rows rbase.. below rlim, columns cbase..
    // below clim) by the widest width the operand's alignment allows (pg_align_of):
    // phase 0 the cp.async copies (16 or 4 bytes), phase 1 the 2-byte element copies
    // (plain loads and stores: pg_tile_wgmma fences them into the async proxy). Copies
    // past the matrix edge are zero-filled. Consecutive threads take consecutive units
    // of a stored row, so a warp's global reads are whole sectors.
    template <int NT>
    static __device__ __forceinline__ void copy(PG_T* xs, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int rlim, int clim,
                                                int align, int tid, int phase)
    {
        if (phase == 0 && align >= 16) {
#pragma unroll
            for (int l = 0; l < (UNITS + NT - 1) / NT; ++l) {
                const int u = tid + l * NT;
                if (UNITS % NT != 0 && u >= UNITS) continue;
                const int o = u / (CONT / 8), c = (u % (CONT / 8)) * 8;
                const int row = rbase + o, col = cbase + c;
                const int n = row < rlim ? max(0, min(8, clim - col)) : 0;
                pg_cp_async16(xs + off(o, c), n > 0 ? X + row * ld + col : X, 2 * n);
            }
        } else if (phase == 0 && align >= 4) {
            // 4-byte rows: pairs of elements by cp.async, PG_WG_ELEM_UNROLL at a time
            // (fully unrolled, the hoisted addresses cost the kinds their register cap)
            PG_WG_ELEM_UNROLL
            for (int i = 0; i < ELEMS / 2 / NT; ++i) {
                const int e = 2 * (tid + i * NT);
                const int o = e / CONT, c = e % CONT;
                const int row = rbase + o, col = cbase + c;
                const int n = row < rlim ? max(0, min(2, clim - col)) : 0;
                pg_cp_async_elem<4>(xs + off(o, c), n > 0 ? X + row * ld + col : X, 2 * n);
            }
        } else if (phase == 1 && align < 4) {
            // 2-byte rows: the thread loads and stores each element itself (fully
            // unrolled, the loaded elements held 40-80 registers more)
            PG_WG_ELEM_UNROLL
            for (int i = 0; i < ELEMS / NT; ++i) {
                const int e = tid + i * NT;
                const int o = e / CONT, c = e % CONT;
                const int row = rbase + o, col = cbase + c;
                xs[off(o, c)].x = row < rlim && col < clim ? PG_LDG(&X[row * ld + col].x)
                                                           : (unsigned short)0;
            }
        }
    }
};

// One k step of a wgmma tile (pg_tile_wgmma, pg_wgmma_windows): this warpgroup's BK / 16
// wgmmas on stages as (A) and bs (B) issued as one group, then a wait for the group before
// it, so this one stays in flight while the block goes on.
template <int BK, int TA, int TB, class SA, class SB>
__device__ __forceinline__ void pg_wgmma_step(float (&acc)[64], const PG_T* as, const PG_T* bs,
                                              int wm, int wn)
{
#pragma unroll
    for (int i = 0; i < 64; ++i) pg_wgmma_reg_fence(acc[i]);
    pg_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16)
        pg_wgmma_64x128x16<TA, TB>(
            acc, pg_wgmma_desc(as + SA::at(wm, kk), SA::LBO, SA::SBO, SA::MODE),
            pg_wgmma_desc(bs + SB::at(wn, kk), SB::LBO, SB::SBO, SB::MODE), PG_T());
    pg_wgmma_commit();
    pg_wgmma_wait<1>();
#pragma unroll
    for (int i = 0; i < 64; ++i) pg_wgmma_reg_fence(acc[i]);
}

#if PG_WG_WINDOWS
// A value the compiler must take as new here: what is computed from it is not hoisted out
// of the loop around (to keep those values out of registers across it).
__device__ __forceinline__ void pg_opaque(int& x) { asm volatile("" : "+r"(x)); }

// Rows that are not 16-byte aligned reach a wgmma stage (SX, a PgWgStage) in two moves,
// so that both stay as wide as aligned rows' copies (abdelfattah2020's staging of
// arbitrary leading dimensions, done per k step inside the tile):
// - copy: each stored row's CONT elements are fetched as the RU = CONT / 8 + 1 aligned
//   16-byte units that cover them, from the row's first element rounded down to 16
//   bytes, by cp.async into a raw slot (RX rows of RU units). A unit's source size stops
//   at the row's last element (or at the matrix edge, clim): no byte past it is read,
//   and the rest is zero-filled, as are rows from rlim on. The bytes before a row's
//   first element are the row's own earlier columns, the row above, or (the matrix's
//   first element) the start of the same aligned 16 bytes, which lie in the allocation
//   (allocations start 256-byte aligned), as pg_copy_shift16 argues.
// - shift: a thread moves Q = 4 output units of one row from raw units g Q .. g Q + Q
//   (one 16-byte shared load each) into the stage, shifted down by the row's phase b (its
//   first element's byte offset within 16 bytes: a word select by b / 4, a funnel shift
//   by (b & 2) * 8 bits), and stores them where SX keeps them (swizzled).
// Bank conflicts: RU is odd, so 8 consecutive rows' units at the same column (a quarter
// warp's 16-byte loads: items go rows first) fall on 8 different 16-byte bank groups, and
// the stores on 8 different lines' swizzled groups; the copies write a row's units from
// consecutive lanes (2 ways at most where a quarter warp's units span two rows).
template <class SX>
struct PgWgWindow {
    static constexpr int CONT = SX::CONT, NB = CONT / 8, RU = NB + 1;
    static constexpr int RX = SX::ELEMS / CONT;     // stored rows in a slice
    static constexpr int ELEMS = RX * RU * 8;       // one raw slot
    static constexpr int Q = 4;                     // output units a shift item makes
    static constexpr int ITEMS = RX * (NB / Q);
    static_assert(NB % Q == 0 && RU % 2 == 1, "whole items, an odd unit stride");

    // The byte offset within 16 bytes of stored row r's element at column c.
    static __device__ __forceinline__ unsigned phase(const PG_T* X, int ld, int r, int c)
    {
        return ((unsigned)(unsigned long long)X + 2u * ((unsigned)r * (unsigned)ld + (unsigned)c)) & 15u;
    }

    // This thread's cp.async copies of the slice (stored rows rbase.. below rlim, columns
    // cbase.. below clim) into raw slot `raw`: unit c = tid % NB of rows o + l RS (o = tid /
    // NB, RS = NT / NB), and the thread of a row's last unit also the unit after it. Rows 8
    // apart share their phase, so one source pointer and one size per unit serve every
    // round, stepped by constants (a division and a phase per unit cost ~50 instructions).
    template <int NT>
    static __device__ __forceinline__ void copy(PG_T* raw, const PG_T* __restrict__ X, int ld,
                                                int rbase, int cbase, int rlim, int clim, int tid)
    {
        constexpr int RS = NT / NB;
        static_assert(NT % NB == 0 && RS % 8 == 0 && RX % RS == 0, "rounds of whole rows, 8k apart");
        pg_opaque(tid);   // recomputed each k step, not held across the loop (registers)
        const int o = tid / NB, c = tid % NB;
        const int nc = 2 * max(0, min(CONT, clim - cbase));          // bytes of a live row
        const int b = (int)phase(X, ld, rbase + o, cbase);
        const int n = nc > 0 ? max(0, min(16, b + nc - 16 * c)) : 0;
        const int n2 = c == NB - 1 && nc > 0 ? max(0, min(16, b + nc - 16 * NB)) : 0;
        const int rows = rlim - rbase - o;                          // round l live: l RS < rows
        const char* src = reinterpret_cast<const char*>(X + (long long)(rbase + o) * ld + cbase)
                          - b + 16 * c;
        const char* none = reinterpret_cast<const char*>(X);
        const long long step = 2LL * RS * ld;
        const unsigned d = pg_smem_addr(raw) + 16u * (unsigned)(o * RU + c);
        constexpr unsigned DSTEP = 16u * RS * RU;
#pragma unroll
        for (int l = 0; l < RX / RS; ++l) {
            const int m = l * RS < rows ? n : 0, m2 = l * RS < rows ? n2 : 0;
            pg_cp_async16(d + l * DSTEP, m > 0 ? src + l * step : none, m);
            if (c == NB - 1)
                pg_cp_async16(d + l * DSTEP + 16, m2 > 0 ? src + l * step + 16 : none, m2);
        }
    }

    // Shift item i (row i % RX, output units (i / RX) Q ..) of raw slot `raw` into stage xs.
    static __device__ __forceinline__ void shift(PG_T* xs, const PG_T* raw, const PG_T* X, int ld,
                                                 int rbase, int cbase, int i)
    {
        pg_opaque(i);
        const int r = i % RX, g = i / RX;
        const unsigned b = phase(X, ld, rbase + r, cbase), q = b >> 2, h = (b & 2u) * 8u;
        const uint4* w = reinterpret_cast<const uint4*>(raw) + r * RU + g * Q;
        uint4 cur = w[0];
#pragma unroll
        for (int m = 0; m < Q; ++m) {
            const uint4 nxt = w[m + 1];
            const unsigned v[8] = {cur.x, cur.y, cur.z, cur.w, nxt.x, nxt.y, nxt.z, nxt.w};
            unsigned t[7], s[5];
#pragma unroll
            for (int x = 0; x < 7; ++x) t[x] = (q & 1u) ? v[x + 1] : v[x];
#pragma unroll
            for (int x = 0; x < 5; ++x) s[x] = (q & 2u) ? t[x + 2] : t[x];
            *reinterpret_cast<uint4*>(xs + SX::off(r, 8 * (g * Q + m))) =
                make_uint4(__funnelshift_r(s[0], s[1], h), __funnelshift_r(s[1], s[2], h),
                           __funnelshift_r(s[2], s[3], h), __funnelshift_r(s[3], s[4], h));
            cur = nxt;
        }
    }
};
#endif  // PG_WG_WINDOWS

#if PG_WG_WINDOWS
// pg_tile_wgmma's k loop for a tile whose A or B rows are not 16-byte aligned: both
// operands go through PgWgWindow (an aligned operand beside them too: its phases are 0).
// Two raw slots (cp.async, one k step ahead of the shift) and two stages (the shift's
// output, one k step ahead of the wgmmas), after the raw slots, 1 KiB aligned. Step kt:
// fence the shift's plain stores into the async proxy, barrier; the wgmmas of stage kt
// (in flight while the block goes on); wait for the previous step's wgmmas and for raw
// slice kt + 1, barrier (every warpgroup's reads of stage kt - 1 and every thread's
// copies of slice kt + 1 done); copies of slice kt + 2 into raw slot kt; shift raw slice
// kt + 1 into stage kt + 1. Raw slot 0 is the only memory a tile writes before its first
// barrier, and it lies clear of the staged epilogue's parts (pg_wgmma_store: A's and B's
// last aligned stage), which the tile before may still be writing.
template <int BM, int BN, int BK, int NT, int WM, int WN, class SA, class SB>
__device__ __forceinline__ void pg_wgmma_windows(const PG_T* __restrict__ A, const PG_T* __restrict__ B,
                                                 int lda, int ldb, int M, int N, int K, int m0, int n0,
                                                 int wm, int wn, float (&acc)[WN / 2], int tid, PG_T* smem)
{
    using WA = PgWgWindow<SA>;
    using WB = PgWgWindow<SB>;
    constexpr int RAW = WA::ELEMS + WB::ELEMS, FS = SA::ELEMS + SB::ELEMS;
    constexpr int FIN = (2 * RAW + 511) / 512 * 512;     // the stages, 1 KiB (512 elements) on
    static_assert(FIN + 2 * FS <= PG_SMEM_TILE, "windows exceed PG_SMEM_TILE (render.smem_elems_async)");
    static_assert(!PG_STAGED_C || RAW <= (PG_STAGES - 1) * SA::ELEMS,
                  "raw slot 0 clear of the staged epilogue's parts");
    constexpr int TA = PG_TRANS_A ? 1 : 0, TB = PG_TRANS_B ? 0 : 1;
    // (stored rows, columns) of A's and B's slices at k0
#if PG_TRANS_A
#define PG_WIN_A(k0) (k0), m0, K, M
#else
#define PG_WIN_A(k0) m0, (k0), M, K
#endif
#if PG_TRANS_B
#define PG_WIN_B(k0) n0, (k0), N, K
#else
#define PG_WIN_B(k0) (k0), n0, K, N
#endif
    auto copy = [&](int slot, int k0) {
        WA::template copy<NT>(smem + slot * RAW, A, lda, PG_WIN_A(k0), tid);
        WB::template copy<NT>(smem + slot * RAW + WA::ELEMS, B, ldb, PG_WIN_B(k0), tid);
    };
    auto shift = [&](int slot, int k0) {
        const PG_T* raw = smem + slot * RAW;
        PG_T* xs = smem + FIN + slot * FS;
#pragma unroll
        for (int l = 0; l < (WA::ITEMS + WB::ITEMS + NT - 1) / NT; ++l) {
            const int i = tid + l * NT;
#if PG_TRANS_A
            if (i < WA::ITEMS) WA::shift(xs, raw, A, lda, k0, m0, i);
#else
            if (i < WA::ITEMS) WA::shift(xs, raw, A, lda, m0, k0, i);
#endif
#if PG_TRANS_B
            else if (i < WA::ITEMS + WB::ITEMS)
                WB::shift(xs + SA::ELEMS, raw + WA::ELEMS, B, ldb, n0, k0, i - WA::ITEMS);
#else
            else if (i < WA::ITEMS + WB::ITEMS)
                WB::shift(xs + SA::ELEMS, raw + WA::ELEMS, B, ldb, k0, n0, i - WA::ITEMS);
#endif
        }
    };
#undef PG_WIN_A
#undef PG_WIN_B
    const int nk = (K + BK - 1) / BK;
    if (nk == 0) return;
    copy(0, 0);
    pg_cp_async_commit();
    pg_cp_async_wait<0>();
    __syncthreads();
    if (nk > 1) copy(1, BK);
    pg_cp_async_commit();
    shift(0, 0);
#pragma unroll 1
    for (int kt = 0; kt < nk; ++kt) {
        pg_fence_proxy_async();
        __syncthreads();
        const PG_T* as = smem + FIN + (kt & 1) * FS;
        pg_wgmma_step<BK, TA, TB, SA, SB>(acc, as, as + SA::ELEMS, wm, wn);
        pg_cp_async_wait<0>();
        __syncthreads();
        if (kt + 2 < nk) copy(kt & 1, (kt + 2) * BK);
        pg_cp_async_commit();
        if (kt + 1 < nk) shift((kt + 1) & 1, (kt + 1) * BK);
    }
    pg_wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < WN / 2; ++i) pg_wgmma_reg_fence(acc[i]);
    __syncthreads();
}
#endif  // PG_WG_WINDOWS

// The wgmma kinds (families wgmma-f16 / wgmma-bf16, engine E 6, sm_90a): warpgroups of
// 128 threads in a (BM / WM) x (BN / WN) grid, each a WM x WN = 64 x 128 sub-tile of C as
// the fp32 accumulators of m64n128k16 wgmmas (compat.h), A and B read by the tensor cores
// straight from PG_STAGES cp.async stages (PgWgStage; no ldmatrix, no fragments in
// registers). A stage is waited for (cp.async.wait_group) and published by one barrier; the warpgroup issues its BK / 16 wgmmas on it as one
// group and, while that group runs, waits for the previous step's, then (after a second
// barrier where several warpgroups share the block) refills that step's stage with the
// copies PG_STAGES - 1 steps ahead. So the tensor cores always hold the next group while
// the block synchronises (one group of 2 wgmmas is only ~128 cycles of an SM's tensor
// work at BK 32).
// Epilogue as pg_tile_mma16's: alpha and beta in fp32, beta == 0 never reads C.
template <int BM, int BN, int BK, int NT, int WM, int WN>
__device__ __forceinline__ void pg_tile_wgmma(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    static_assert(sizeof(PG_T) == 2, "the wgmma kinds are float16 / bfloat16");
    static_assert(WM == 64 && WN == 128, "one m64n128k16 wgmma per warpgroup and k step");
    constexpr int WGN = BN / WN;
    static_assert((BM / WM) * WGN * 128 == NT, "one warpgroup per sub-tile");
    constexpr int ST = PG_STAGES;
    using SA = PgWgStage<BK, BM, !PG_TRANS_A>;
    using SB = PgWgStage<BK, BN, (bool)PG_TRANS_B>;
    static_assert(ST >= 2 && ST * (SA::ELEMS + SB::ELEMS) <= PG_SMEM_TILE,
                  "shared tiles exceed PG_SMEM_TILE");
    // wgmma's transpose immediates: 1 where the operand is M- (N-) major in its stage
    constexpr int TA = PG_TRANS_A ? 1 : 0, TB = PG_TRANS_B ? 0 : 1;

    const int tid = threadIdx.x, wg = tid >> 7;
    const int wm = (wg / WGN) * WM, wn = (wg % WGN) * WN;
    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;   // alpha == 0 never reads A or B
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;
    const int align_a = pg_align_of(A, lda, PG_TRANS_A ? m0 : 0);
    const int align_b = pg_align_of(B, ldb, PG_TRANS_B ? 0 : n0);

    float acc[WN / 2];
#pragma unroll
    for (int i = 0; i < WN / 2; ++i) acc[i] = 0.0f;

    PG_T* As = smem;                    // [ST][SA::ELEMS]
    PG_T* Bs = smem + ST * SA::ELEMS;   // [ST][SB::ELEMS]
    // A tile wholly inside both operands' x ranges with 16-byte rows copies its whole k
    // steps by PgWgStage::copy_inside: its first units' sources and places are computed
    // afresh each step (held across the loop, they cost the 128x128 kind spills under its
    // register cap); at k0 a K-major operand's source is k0 elements on, an M/N-major
    // one's k0 rows.
    const bool inside = align_a >= 16 && align_b >= 16 && m0 + BM <= M && n0 + BN <= N;
    auto issue = [&](int stage, int k0, int phase) {
        if (inside && k0 + BK <= K) {
            if (phase == 0) {
#if PG_TRANS_A
                const PG_T* a0 = A + (long long)(k0 + SA::first_row(tid)) * lda + m0 + SA::first_col(tid);
#else
                const PG_T* a0 = A + (long long)(m0 + SA::first_row(tid)) * lda + k0 + SA::first_col(tid);
#endif
#if PG_TRANS_B
                const PG_T* b0 = B + (long long)(n0 + SB::first_row(tid)) * ldb + k0 + SB::first_col(tid);
#else
                const PG_T* b0 = B + (long long)(k0 + SB::first_row(tid)) * ldb + n0 + SB::first_col(tid);
#endif
                SA::template copy_inside<NT>(As + stage * SA::ELEMS + SA::first_unit(tid), a0, lda);
                SB::template copy_inside<NT>(Bs + stage * SB::ELEMS + SB::first_unit(tid), b0, ldb);
            }
            return;
        }
#if PG_TRANS_A
        SA::template copy<NT>(As + stage * SA::ELEMS, A, lda, k0, m0, K, M, align_a, tid, phase);
#else
        SA::template copy<NT>(As + stage * SA::ELEMS, A, lda, m0, k0, M, K, align_a, tid, phase);
#endif
#if PG_TRANS_B
        SB::template copy<NT>(Bs + stage * SB::ELEMS, B, ldb, n0, k0, N, K, align_b, tid, phase);
#else
        SB::template copy<NT>(Bs + stage * SB::ELEMS, B, ldb, k0, n0, K, N, align_b, tid, phase);
#endif
    };
    const int nk = (K + BK - 1) / BK;
#if PG_WG_WINDOWS
    if (min(align_a, align_b) < 16)      // rows not 16-byte aligned: the windows' k loop
        pg_wgmma_windows<BM, BN, BK, NT, WM, WN, SA, SB>(A, B, lda, ldb, M, N, K, m0, n0, wm, wn,
                                                         acc, tid, smem);
    else
#endif
    if (nk > 0) {
#pragma unroll 1
        for (int s = 0; s < ST - 1; ++s) {
            if (s < nk) {
                issue(s, s * BK, 0);
                issue(s, s * BK, 1);
            }
            pg_cp_async_commit();
        }
        int rs = 0;                     // the stage read; refilled: the one before it
#pragma unroll 1
        for (int kt = 0; kt < nk; ++kt) {
            pg_cp_async_wait<ST - 2>();
            // The 2-byte element copies are plain stores: fenced into the async proxy
            // before the barrier. The cp.async copies are not (as CUTLASS's cp.async
            // wgmma mainloop): a proxy fence here also waited for the copies still in
            // flight for later stages and emptied the pipeline at every step.
            if (min(align_a, align_b) < 4) pg_fence_proxy_async();
            __syncthreads();
            // This step's group stays in flight (pg_wgmma_step); the previous step's is
            // finished here, in every warpgroup once the barrier (one warpgroup: its own
            // wait) has passed, so its stage takes the copies PG_STAGES - 1 steps ahead
            // while the tensor cores work on this one.
            pg_wgmma_step<BK, TA, TB, SA, SB>(acc, As + rs * SA::ELEMS, Bs + rs * SB::ELEMS, wm, wn);
            if (NT > 128) __syncthreads();
            const int ws = rs == 0 ? ST - 1 : rs - 1;
            if (kt + ST - 1 < nk) issue(ws, (kt + ST - 1) * BK, 0);
            pg_cp_async_commit();
            if (kt + ST - 1 < nk) issue(ws, (kt + ST - 1) * BK, 1);
            rs = rs + 1 == ST ? 0 : rs + 1;
        }
        pg_wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < WN / 2; ++i) pg_wgmma_reg_fence(acc[i]);
        pg_cp_async_wait<0>();
        __syncthreads();
    }

    pg_wgmma_store<WN, NT, SA, SB>(gp, m0 + wm, n0 + wn, acc, tid, smem);
}
#endif  // PG_WGMMA_KINDS
#endif  // PG_HALF

#if PG_MFMA_KINDS
#if !PG_MFMA || (!PG_HALF && !PG_MFMA_F64)
#error "the MFMA kinds (tiles.py mfma-* families) compile for gfx908 / gfx90a / gfx94x only (fp64: gfx90a / gfx94x)"
#endif
// The AMD MFMA kinds (families mfma-f16, mfma-bf16, mfma-f64; engine "mma", 64-lane
// waves): waves in a (BM / WTM) x (BN / WTN) grid, each a WTM x WTN sub-tile of C as
// (WTM / 16) x (WTN / 16) blocks of the 16x16 MFMA (compat.h PgMfmaHalf: 16x16x16, fp32
// accumulators; PgMfmaF64: 16x16x4), staged through the MMA kinds' PgMmaStage layouts and
// k loop (pg_mma_k_loop: the register double buffer; AMD has no cp.async), so any
// leading dimension and transpose goes through the same element path. Only AMD compiles
// it (the #error above; tiles.built_for keeps the families off other targets).
#if PG_HALF
struct PgMfmaOps {
    using F = PgMfmaHalf;
    using Acc = PgF32x4;
    using Scalar = float;
    struct Frag { unsigned r[2]; };
    // elements 0-1 and 2-3 of this lane's fragment: k-adjacent pairs (compat.h)
    template <class S>
    static __device__ __forceinline__ Frag a_frag(const PG_T* xs, int x, int kk, int l)
    {
        return {{S::pair(xs, x, kk + F::a_k(l, 0)), S::pair(xs, x, kk + F::a_k(l, 2))}};
    }
    template <class S>
    static __device__ __forceinline__ Frag b_frag(const PG_T* xs, int x, int kk, int l)
    {
        return {{S::pair(xs, x, kk + F::b_k(l, 0)), S::pair(xs, x, kk + F::b_k(l, 2))}};
    }
    static __device__ __forceinline__ void mma(Acc& c, const Frag& a, const Frag& b)
    {
        pg_mfma_16x16x16(c, a.r, b.r, PG_T());
    }
};
#else
struct PgMfmaOps {
    using F = PgMfmaF64;
    using Acc = PgF64x4;
    using Scalar = double;
    using Frag = double;
    template <class S>
    static __device__ __forceinline__ Frag a_frag(const PG_T* xs, int x, int kk, int l)
    {
        return xs[S::at(x, kk + F::a_k(l, 0))];
    }
    template <class S>
    static __device__ __forceinline__ Frag b_frag(const PG_T* xs, int x, int kk, int l)
    {
        return xs[S::at(x, kk + F::b_k(l, 0))];
    }
    static __device__ __forceinline__ void mma(Acc& c, Frag a, Frag b)
    {
        pg_mfma_f64_16x16x4(c, a, b);
    }
};
#endif

template <int BM, int BN, int BK, int NT, int WTM, int WTN>
__device__ __forceinline__ void pg_tile_mfma(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    using O = PgMfmaOps;
    using F = O::F;
    using Acc = O::Acc;
    using Scalar = O::Scalar;
    constexpr int WGN = BN / WTN;
    static_assert((BM / WTM) * WGN * F::LANES == NT, "one wave per sub-tile");
    static_assert(WTM % F::M == 0 && WTN % F::N == 0 && BK % F::K == 0,
                  "sub-tiles of whole fragments");
    constexpr int FM = WTM / F::M, FN = WTN / F::N;
    using SA = PgMmaStage<BK, BM, NT, !PG_TRANS_A>;
    using SB = PgMmaStage<BK, BN, NT, (bool)PG_TRANS_B>;

    const int tid = threadIdx.x, lane = tid % F::LANES, wave = tid / F::LANES;
    const int wm = (wave / WGN) * WTM, wn = (wave % WGN) * WTN;

    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;   // alpha == 0 never reads A or B
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;
    const bool vec_a = pg_aligned16(A) && lda % PG_V == 0 && (PG_TRANS_A ? m0 : 0) % PG_V == 0;
    const bool vec_b = pg_aligned16(B) && ldb % PG_V == 0 && (PG_TRANS_B ? 0 : n0) % PG_V == 0;

    Acc acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
#pragma unroll
            for (int q = 0; q < F::CE; ++q) acc[i][j][q] = Scalar(0);

    // One MFMA step (F::K k values): this lane's fragments of A and B, then FM x FN MFMAs.
    pg_mma_k_loop<BM, BN, BK, NT, F::K, SA, SB>(
        A, B, lda, ldb, M, N, K, m0, n0, vec_a, vec_b, tid, smem,
        [&](const PG_T* as, const PG_T* bs, int kk) {
            typename O::Frag a[FM], b[FN];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                a[i] = O::template a_frag<SA>(as, wm + i * F::M + F::a_row(lane), kk, lane);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                b[j] = O::template b_frag<SB>(bs, wn + j * F::N + F::b_col(lane), kk, lane);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) O::mma(acc[i][j], a[i], b[j]);
        });

    // Epilogue in the accumulator type, rounded once to PG_T: a lane holds one column of
    // each block (16 lanes, 16 adjacent columns: one contiguous run per row).
    const Scalar alpha = Scalar(gp->alpha), beta = Scalar(gp->beta);
    PG_T* __restrict__ C = gp->C;
    const int ldc = gp->ldc;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int q = 0; q < F::CE; ++q) {
            const int r = m0 + wm + i * F::M + F::c_row(lane, q);
            if (r >= M) continue;
            PG_T* crow = C + r * ldc;
#pragma unroll
            for (int j = 0; j < FN; ++j) {
                const int c = n0 + wn + j * F::N + F::c_col(lane);
                if (c >= N) continue;
                Scalar x = alpha * acc[i][j][q];
                if (beta != Scalar(0)) x += beta * Scalar(crow[c]);   // beta == 0 never reads C
                crow[c] = PG_T(x);
            }
        }
}
#endif  // PG_MFMA_KINDS

// A variant with pipeline stages takes its hint only where the pipeline runs: the
// register path (B^T, pre-sm_80) keeps more registers live and spilled under the caps
// measured for the pipeline. The k-major pipeline's kinds (PG_KPIPE) are capped for
// their register path (B^T), which they ran before it, and take the cap everywhere.
#if PG_MIN_BLOCKS > 0 && (PG_STAGES == 0 || PG_PIPELINE || PG_MMA || PG_KPIPE)
#define PG_BOUNDS PG_LAUNCH_BOUNDS_MIN(PG_THREADS, PG_MIN_BLOCKS)
#else
#define PG_BOUNDS __launch_bounds__(PG_THREADS)
#endif

// Kind -> tile function by engine E (0: SIMT pg_tile, 1: fp64 MMA pg_tile_mma, 2: 16-bit
// MMA pg_tile_mma16, 3 / 4: TF32 / 3xTF32 pg_tile_tf32 / pg_tile_3xtf32, 5: AMD MFMA
// pg_tile_mfma), pasted so the
// SIMT kinds call pg_tile as directly as before the MMA kinds (a template wrapper in
// between changed hiprtc's register allocation: a 24-byte spill in a gfx90a fused kernel).
#define PG_TILE_E0 pg_tile
#define PG_TILE_E1 pg_tile_mma
#define PG_TILE_E2 pg_tile_mma16
#define PG_TILE_E3 pg_tile_tf32     // E 3, 4: fp32 TF32 MMA kinds (PG_TF32)
#define PG_TILE_E4 pg_tile_3xtf32
#define PG_TILE_E5 pg_tile_mfma     // the AMD MFMA kinds (PG_MFMA_KINDS)
#define PG_TILE_E6 pg_tile_wgmma    // the Hopper wgmma kinds (PG_WGMMA_KINDS, sm_90a)
#define PG_TILE_OF(e) PG_TILE_E##e

#if PG_CARRY_ON
#if PG_RAGGED || PG_GRIDZ
#error "PG_CARRY: the flat tile-list entry point only (render.carry)"
#endif
// Runs tiles[t ..] while they are of kind ID (below t1), each with the next one's first
// k step prefetched (PgCarry); returns the first tile it did not run. SIMT kinds only
// (render.carry): pg_tile_mma stages through its own fragments.
template <int ID, int BM, int BN, int BK, int NT, int RM, int RN>
__device__ __forceinline__ int pg_run(const PgGemm* __restrict__ gemms,
                                      const PgTile* __restrict__ tiles, int t, int t1, PG_T* smem)
{
    PgCarry<BM, BN, BK, NT> carry;
    carry.reset();
    PgTile tl = tiles[t];
    for (; t < t1 && tl.kind == ID; ++t) {
        const PgTile nx = t + 1 < t1 ? tiles[t + 1] : PgTile{0, 0, 0, -1};
        // A tile of another kind is not prefetched: its stage layout differs.
        const bool has_next = nx.kind == ID;
        pg_tile<BM, BN, BK, NT, RM, RN>(gemms + tl.gemm, tl.m0, tl.n0, smem, carry,
                                        has_next ? gemms + nx.gemm : nullptr, nx.m0, nx.n0);
        tl = nx;
    }
    return t;
}

#define PG_CASE(id, bm, bn, bk, nt, rm, rn, e)                                   \
    case id: {                                                                 \
        static_assert(e == 0, "PG_CARRY: SIMT kinds only");                    \
        t = pg_run<id, bm, bn, bk, nt, rm, rn>(gemms, tiles, t, t1, smem);     \
    } break;
#else
// One tile at a time, nothing carried: fused entry points (holding every kind's carried
// step made them spill), float64 and MMA kinds, and AMD (compat.h).
#define PG_CASE(id, bm, bn, bk, nt, rm, rn, e) \
    case id: PG_TILE_OF(e)<bm, bn, bk, nt, rm, rn>(g, m0, n0, smem); break;
#endif
#define PG_THREADS_OF(id, bm, bn, bk, nt, rm, rn, e) case id: return nt;

__device__ __forceinline__ int pg_threads_of(int kind)
{
    switch (kind) { PG_KINDS(PG_THREADS_OF) }
    return 0;
}

#if PG_RAGGED && PG_HALF
// The 16-bit ragged entry points run their tile (`run`: a closure over shared memory
// only, of any engine) as a called function, not inlined (CUDA; compat.h
// PG_RAGGED_TILE_CALL): ptxas then allocates the tile function as it does inside the
// tile-list entry points. Inlined after the slot lookup, the same tile functions took
// 60-90 more registers (128x64: 228-252 against 162-168) or spilled 12-184 bytes under
// the 128x128 kind's 2-block cap on sm_90, however the slot was handed over (registers,
// shared memory, an opaque loop). The call saves 2 registers on the stack (no spill),
// once per block.
template <class Run>
__device__ PG_RAGGED_TILE_CALL void pg_ragged_tile16(Run run)
{
    run();
}
#endif
#if PG_RAGGED
// Ragged M, device offsets (pg_ragged_slot): block `blockIdx.x` is one slot of the
// upper-bound tile list; one kind (id 0).
extern "C" __global__ void PG_BOUNDS
PG_NAME(const int* __restrict__ offs, int groups, int rows, int tiles_n, const PG_T* A,
        const PG_T* B, PG_T* C, long long a_step, long long b_stride, int lda, int ldb,
        int ldc, int N, int K, double alpha, double beta, const double* __restrict__ alphas,
        const double* __restrict__ betas)
{
    PG_SMEM_DECL(smem);
#if PG_HALF
    // The 16-bit kinds (pg_ragged_tile16): every thread finds the same slot; thread 0
    // writes it to shared memory for the call, and the barrier publishes it.
    __shared__ PgGemm gs;
    __shared__ int origin[2];
// The wgmma kinds (E 6) run their tile inline: ptxas serializes every wgmma of a
// pipeline that crosses a call boundary (C7510), and their cap holds them at 128
// registers either way.
#define PG_RG_CALL0(tile) pg_ragged_tile16([] { tile; });
#define PG_RG_CALL1 PG_RG_CALL0
#define PG_RG_CALL2 PG_RG_CALL0
#define PG_RG_CALL3 PG_RG_CALL0
#define PG_RG_CALL4 PG_RG_CALL0
#define PG_RG_CALL5 PG_RG_CALL0
#define PG_RG_CALL6(tile) tile;
#define PG_RG_CALL(e) PG_RG_CALL##e
#define PG_RG_RUN(bm, bn, bk, nt, rm, rn, e)                                            \
    if (threadIdx.x == 0) { gs = g; origin[0] = m0; origin[1] = n0; }                   \
    __syncthreads();                                                                    \
    PG_RG_CALL(e)((PG_TILE_OF(e)<bm, bn, bk, nt, rm, rn>(&gs, origin[0], origin[1], smem)))
#else
#define PG_RG_RUN(bm, bn, bk, nt, rm, rn, e) PG_TILE_OF(e)<bm, bn, bk, nt, rm, rn>(&g, m0, n0, smem);
#endif
#define PG_RG(id, bm, bn, bk, nt, rm, rn, e)                                            \
    case id: {                                                                          \
        PgGemm g;                                                                       \
        int m0, n0;                                                                     \
        if (!pg_ragged_slot(offs, groups, rows, bm, bn, tiles_n, blockIdx.x, A, B, C,   \
                            a_step, b_stride, lda, ldb, ldc, N, K, alpha, beta, alphas, \
                            betas, g, m0, n0))                                          \
            return;                                                                     \
        PG_RG_RUN(bm, bn, bk, nt, rm, rn, e)                                            \
    } break;
    const int kind = 0;
    switch (kind) { PG_KINDS(PG_RG) }
}
#elif PG_GRIDZ
// MAGMA layout: grid (tiles along M, tiles along N, GEMMs); blocks past a GEMM's edge
// leave at once (early termination). `base` offsets blockIdx.z, so batches beyond the
// 65535 grid.z limit run as several launches.
extern "C" __global__ void PG_BOUNDS
PG_NAME(const PgGemm* __restrict__ gemms, const PgTile* __restrict__ tiles,
        const int* __restrict__ block_ptr, int base)
{
    PG_SMEM_DECL(smem);
    const PgGemm* g = gemms + base + blockIdx.z;
    const int kind = 0;
    switch (kind) {
#define PG_GZ(id, bm, bn, bk, nt, rm, rn, e)                                \
    case id: {                                                              \
        const int m0 = blockIdx.x * bm, n0 = blockIdx.y * bn;               \
        if (m0 >= g->M || n0 >= g->N) return;                               \
        PG_TILE_OF(e)<bm, bn, bk, nt, rm, rn>(g, m0, n0, smem);               \
    } break;
        PG_KINDS(PG_GZ)
    }
}
#else
// Flat tile list: block `base + blockIdx.x` runs tiles[block_ptr[b] .. block_ptr[b+1]),
// which all share one thread count, so threads a smaller tile does not need leave at once
// (the paper's multi-thread kernel; barriers only count the threads still running).
extern "C" __global__ void PG_BOUNDS
PG_NAME(const PgGemm* __restrict__ gemms, const PgTile* __restrict__ tiles,
        const int* __restrict__ block_ptr, int base)
{
    PG_SMEM_DECL(smem);
    const int b = base + blockIdx.x;
    const int t0 = block_ptr[b], t1 = block_ptr[b + 1];
    if ((int)threadIdx.x >= pg_threads_of(tiles[t0].kind)) return;
#if PG_CARRY_ON
    for (int t = t0; t < t1;) {
        switch (tiles[t].kind) {
            PG_KINDS(PG_CASE)
            default: return;        // no such kind: never written by the host
        }
    }
#else
    for (int t = t0; t < t1; ++t) {
        const PgTile tl = tiles[t];
        if (tl.gemm < 0) continue;  // an unused slot of a ragged upper-bound list
        const PgGemm* g = gemms + tl.gemm;
        const int m0 = tl.m0, n0 = tl.n0;
        switch (tl.kind) { PG_KINDS(PG_CASE) }
    }
#endif
}
#endif
#endif  // PG_TILE_EXPAND, PG_SPLIT_REDUCE / PG_STAGE_COPY, the GEMM

#if PG_SPLIT_REDUCE || PG_STAGE_COPY
// The record a block of a table-driven launch serves (split-K's reduction, the staging
// copy): the last g with block_start[g] <= b, by binary search over the n entries.
__device__ __forceinline__ int pg_record_of(const int* __restrict__ block_start, int n, int b)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (block_start[mid] <= b) lo = mid; else hi = mid - 1;
    }
    return lo;
}
#endif

#if PG_SPLIT_REDUCE
// Split-K's reduction: GEMM i was computed as s_i partial products W_ij (its K slices,
// backends/split.py) in a workspace, slice j at W + j M N with leading dimension N. This
// writes C_i = alpha_i * (W_i0 + W_i1 + ...) + beta_i * C_i, the sum always in slice
// order, so results do not depend on scheduling (no atomics). beta == 0 never reads C;
// alpha == 0 never reads W. One entry per split GEMM; its blocks are consecutive, from
// block_start[g], each taking PG_REDUCE_CHUNK consecutive elements of the row-major
// M x N (threads stride by PG_REDUCE_THREADS, so a warp's accesses are contiguous). A
// block finds its GEMM by a binary search over block_start. backends/split.py builds
// the table and emulates this kernel on the host; keep the two in step.
struct PgReduce {               // layout mirrored by render.REDUCE_DTYPE
    PG_T* C;
    const PG_T* W;
    int ldc, M, N, s;
    double alpha, beta;
};

extern "C" __global__ void __launch_bounds__(PG_REDUCE_THREADS)
PG_NAME(const PgReduce* __restrict__ red, const int* __restrict__ block_start, int n_red)
{
    const int b = blockIdx.x;
    const int lo = pg_record_of(block_start, n_red, b);
    const PgReduce r = red[lo];
    const int mn = r.M * r.N;       // < 2^31: validation bounds every C's span
    const int e0 = (b - block_start[lo]) * PG_REDUCE_CHUNK;
    const int n = min(PG_REDUCE_CHUNK, mn - e0);   // never past mn, so e cannot overflow
    const PG_T alpha = PG_T(r.alpha), beta = PG_T(r.beta);
    for (int t = threadIdx.x; t < n; t += PG_REDUCE_THREADS) {
        const int e = e0 + t;
        const int row = e / r.N, col = e - row * r.N;
        PG_T* c = r.C + (long long)row * r.ldc + col;
        PG_T x = PG_T(0);
        if (alpha != PG_T(0)) {
            const PG_T* w = r.W + e;
            PG_T sum = w[0];
            for (int j = 1; j < r.s; ++j) sum += w[(long long)j * mn];
            x = alpha * sum;
        }
        if (beta != PG_T(0)) x += beta * *c;
        *c = x;
    }
}
#endif  // PG_SPLIT_REDUCE

#if PG_STAGE_COPY
// Alignment staging (planner/staging.py, backends/stage.py): copies each listed operand,
// stored `rows` x `cols` with row stride `src_ld` (any alignment), to `dst` with row
// stride `dst_ld` (a multiple of 16 bytes, `dst` 16-byte aligned), so the GEMM that
// follows takes its 16-byte copies. One record per staged operand; its blocks are
// consecutive, from block_start[g], each taking PG_STAGE_CHUNK consecutive 16-byte units
// of the destination in row order (threads stride by PG_STAGE_THREADS: a warp reads
// consecutive source bytes and writes consecutive 16-byte units). A unit is PG_SV
// elements written as one 16-byte store; the elements of a row's last unit past `cols`
// are written as zeros (padding the GEMM never reads: its copies stop at the logical
// columns). Reads are as wide as the unit's source address allows: 16 bytes, 4-byte
// words, or (16-bit elements on a 2-byte boundary, inside the row) the five 4-byte
// words around the unit, shifted by one element; else element by element. Only the
// bits move, so the entry point depends on the element size alone. Indices are 32-bit:
// a copy spans at most 2^31 - 1 elements (planner/staging.py), so its units fit.
// backends/stage.py builds the table and emulates this kernel on the host; keep the two
// in step.
template <int S> struct PgRawOf;
template <> struct PgRawOf<2> { typedef unsigned short T; };
template <> struct PgRawOf<4> { typedef unsigned int T; };
template <> struct PgRawOf<8> { typedef unsigned long long T; };
typedef PgRawOf<(int)sizeof(PG_T)>::T PgRaw;
constexpr int PG_SV = 16 / (int)sizeof(PG_T);   // elements in a 16-byte unit
union alignas(16) PgUnit16 {
    PgRaw e[PG_SV];
    unsigned int w[4];
    uint4 v;
};

struct PgStageRec {             // layout mirrored by render.STAGE_DTYPE
    const PgRaw* src;
    uint4* dst;
    int src_ld, dst_ld, rows, cols;
};

// One unit of PG_SV elements from `src` (row column `col`, `cols` in the row).
__device__ __forceinline__ void pg_stage_unit(PgUnit16& u, const PgRaw* src, int col, int cols)
{
    const unsigned long long a = (unsigned long long)src;
    if (col + PG_SV <= cols && (a & 15ull) == 0) {
        u.v = PG_LDG(reinterpret_cast<const uint4*>(src));
    } else if (col + PG_SV <= cols && (a & 3ull) == 0) {
        const unsigned int* p = reinterpret_cast<const unsigned int*>(src);
#pragma unroll
        for (int j = 0; j < 4; ++j) u.w[j] = PG_LDG(p + j);
    } else if (sizeof(PgRaw) == 2 && col > 0 && col + PG_SV < cols) {
        // 2-byte boundary: the words from one element before to one after the unit (both
        // inside the row), each output word the high half of one and the low of the next
        const unsigned int* p = reinterpret_cast<const unsigned int*>(src - 1);
        unsigned int x[5];
#pragma unroll
        for (int j = 0; j < 5; ++j) x[j] = PG_LDG(p + j);
#pragma unroll
        for (int j = 0; j < 4; ++j) u.w[j] = (x[j] >> 16) | (x[j + 1] << 16);
    } else {
#pragma unroll
        for (int j = 0; j < PG_SV; ++j) u.e[j] = col + j < cols ? PG_LDG(src + j) : PgRaw(0);
    }
}

extern "C" __global__ void __launch_bounds__(PG_STAGE_THREADS)
PG_NAME(const PgStageRec* __restrict__ rec, const int* __restrict__ block_start, int n_rec)
{
    const int b = blockIdx.x;
    const int lo = pg_record_of(block_start, n_rec, b);
    const PgStageRec r = rec[lo];
    const int per_row = r.dst_ld / PG_SV;            // units in a destination row
    const int units = r.rows * per_row;              // <= the copy's span / PG_SV
    const int e0 = (b - block_start[lo]) * PG_STAGE_CHUNK;
    const int n = min(PG_STAGE_CHUNK, units - e0);
    for (int t = threadIdx.x; t < n; t += PG_STAGE_THREADS) {
        const int e = e0 + t;
        const int row = e / per_row;
        const int col = (e - row * per_row) * PG_SV;
        PgUnit16 u;
        pg_stage_unit(u, r.src + (long long)row * r.src_ld + col, col, r.cols);
        r.dst[e] = u.v;              // row * per_row + col / PG_SV
    }
}
#endif  // PG_STAGE_COPY
