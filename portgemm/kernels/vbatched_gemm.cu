// portgemm: the one variable-size batched GEMM kernel source, CUDA dialect, compiled by
// NVRTC and hiprtc alike. render.py prepends the #defines that specialise it:
//   PG_T            float | double
//   PG_TRANS_A/_B   0 | 1: op(X) = X^T
//   PG_THREADS      block size (max over the kinds)
//   PG_MIN_BLOCKS   minimum resident blocks per compute unit (caps registers); 0: no hint
//   PG_NAME         extern "C" entry point
//   PG_GRIDZ        0: flat tile list (block -> tiles via block_ptr); 1: MAGMA grid.z layout
//   PG_SMEM_ELEMS   shared-memory elements (max over the kinds)
//   PG_PAD          shared-memory row padding in elements (keeps 16-byte alignment)
//   PG_KINDS(X)     X(id, BM, BN, BK, NT, RM, RN) for every tile kind this entry point runs
//   PG_RAGGED_PROLOGUE  1: render only the ragged-M prologue (needs PG_T, PG_NAME); the
//                   GEMM defines above are then absent
//   PG_TILE_EXPAND  1: render only the tile-list expansion (needs PG_T, PG_NAME)
//
// C_i = alpha_i * op(A_i) @ op(B_i) + beta_i * C_i, all matrices row-major with
// leading dimensions (row strides, in elements). beta == 0 never reads C; alpha == 0
// never reads A or B (BLAS semantics).

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

#if PG_RAGGED_PROLOGUE
// Ragged M with the group ends on the device, in torch._grouped_mm's convention: group g
// is rows [offs[g-1], offs[g]) of A and C (offs[-1] = 0 implied). It runs before the GEMM
// kernel on the same stream, so nothing goes back to the host and a graph replay reads
// the offsets current at replay time. One thread per slot of an upper-bound tile list of
// rows / tm + groups row slots (times tiles_n column tiles). Group g owns the row slots
// from first(g) = start(g) / tm + g up to first(g + 1); its real row tiles come first and
// never reach first(g + 1), so no scan is needed: a slot finds its group by a binary
// search over first(). Slots past a group's rows get gemm = -1, on which the GEMM
// kernel's block leaves at once. Threads t < groups also write group t's descriptor.
// backends/ragged.py emulates this logic on the host; keep the two in step.
// Offsets are clamped into [0, rows], so bad ones give wrong results, never an access
// outside A or C.
__device__ __forceinline__ int pg_group_start(const int* offs, int g, int rows)
{
    const int s = g > 0 ? offs[g - 1] : 0;
    return min(max(s, 0), rows);
}

extern "C" __global__ void __launch_bounds__(256)
PG_NAME(const int* __restrict__ offs, int groups, int rows, int tm, int tn, int tiles_n,
        int n_tiles, const PG_T* A, const PG_T* B, PG_T* C, long long a_step,
        long long b_stride, int lda, int ldb, int ldc, int N, int K, double alpha,
        double beta, const double* __restrict__ alphas, const double* __restrict__ betas,
        PgGemm* __restrict__ gemms, PgTile* __restrict__ tiles)
{
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < groups) {
        const int s = pg_group_start(offs, t, rows);
        const int e = min(max(offs[t], s), rows);
        PgGemm g;
        g.A = A + s * a_step;
        g.B = B + t * b_stride;
        g.C = C + (long long)s * ldc;
        g.lda = lda; g.ldb = ldb; g.ldc = ldc;
        g.M = e - s; g.N = N; g.K = K;
        g.alpha = alphas ? alphas[t] : alpha;
        g.beta = betas ? betas[t] : beta;
        gemms[t] = g;
    }
    if (t < n_tiles) {
        const int r = t / tiles_n, j = t - r * tiles_n;
        int lo = 0, hi = groups - 1;    // the last group with first(g) <= r; first(0) = 0
        while (lo < hi) {
            const int mid = (lo + hi + 1) >> 1;
            if (pg_group_start(offs, mid, rows) / tm + mid <= r) lo = mid; else hi = mid - 1;
        }
        const int s = pg_group_start(offs, lo, rows);
        const int e = min(max(offs[lo], s), rows);
        const int m0 = (r - (s / tm + lo)) * tm;
        PgTile tile;
        const bool real = m0 >= 0 && m0 < e - s;
        tile.gemm = real ? lo : -1;
        tile.m0 = real ? m0 : 0;
        tile.n0 = j * tn;
        tile.kind = 0;
        tiles[t] = tile;
    }
}
#elif PG_TILE_EXPAND
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
#else

// One workgroup computes one BM x BN tile of C. Thread (ty, tx) holds an RM x RN
// micro-tile of contiguous rows/columns (so shared-memory reads can be vectorised).
// Global -> register -> shared staging is double-buffered: the next K-step's loads are
// in flight while the current one is multiplied, with one barrier per step.
template <int BM, int BN, int BK, int NT, int RM, int RN>
__device__ __forceinline__ void pg_tile(const PgGemm* __restrict__ gp, int m0, int n0, PG_T* smem)
{
    constexpr int TX = BN / RN;
    constexpr int TY = BM / RM;
    static_assert(TX * TY == NT, "micro-tile layout must use every thread");
    constexpr int LA = (BM * BK + NT - 1) / NT;  // A elements each thread stages per step
    constexpr int LB = (BK * BN + NT - 1) / NT;
    constexpr int SA = BM + PG_PAD;             // row stride of As[k][m]
    constexpr int SB = BN + PG_PAD;             // row stride of Bs[k][n]

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    PG_T* As = smem;                 // [2][BK][SA]
    PG_T* Bs = smem + 2 * BK * SA;   // [2][BK][SB]

    // What the main loop needs is read here; C, ldc, alpha and beta only in the epilogue,
    // so they hold no registers across the loop.
    const int M = gp->M, N = gp->N;
    const int K = (gp->alpha == 0.0) ? 0 : gp->K;
    const PG_T* __restrict__ A = gp->A;
    const PG_T* __restrict__ B = gp->B;
    const int lda = gp->lda, ldb = gp->ldb;

    PG_T acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < RN; ++j) acc[i][j] = PG_T(0);

    PG_T ra[LA], rb[LB];

    // Element e of the staged A tile is op(A)[m0 + m][k0 + k]; the index split follows
    // the stored layout so consecutive threads read consecutive addresses.
    auto load = [&](int k0) {
#pragma unroll
        for (int l = 0; l < LA; ++l) {
            const int e = tid + l * NT;
#if PG_TRANS_A
            const int m = e % BM, k = e / BM;
            const bool ok = e < BM * BK && m0 + m < M && k0 + k < K;
            ra[l] = ok ? PG_LDG(A + (k0 + k) * lda + (m0 + m)) : PG_T(0);
#else
            const int k = e % BK, m = e / BK;
            const bool ok = e < BM * BK && m0 + m < M && k0 + k < K;
            ra[l] = ok ? PG_LDG(A + (m0 + m) * lda + (k0 + k)) : PG_T(0);
#endif
        }
#pragma unroll
        for (int l = 0; l < LB; ++l) {
            const int e = tid + l * NT;
#if PG_TRANS_B
            const int k = e % BK, n = e / BK;
            const bool ok = e < BK * BN && n0 + n < N && k0 + k < K;
            rb[l] = ok ? PG_LDG(B + (n0 + n) * ldb + (k0 + k)) : PG_T(0);
#else
            const int n = e % BN, k = e / BN;
            const bool ok = e < BK * BN && n0 + n < N && k0 + k < K;
            rb[l] = ok ? PG_LDG(B + (k0 + k) * ldb + (n0 + n)) : PG_T(0);
#endif
        }
    };
    auto store = [&](int buf) {
        PG_T* as = As + buf * BK * SA;
        PG_T* bs = Bs + buf * BK * SB;
#pragma unroll
        for (int l = 0; l < LA; ++l) {
            const int e = tid + l * NT;
#if PG_TRANS_A
            const int m = e % BM, k = e / BM;
#else
            const int k = e % BK, m = e / BK;
#endif
            if (e < BM * BK) as[k * SA + m] = ra[l];
        }
#pragma unroll
        for (int l = 0; l < LB; ++l) {
            const int e = tid + l * NT;
#if PG_TRANS_B
            const int k = e % BK, n = e / BK;
#else
            const int n = e % BN, k = e / BN;
#endif
            if (e < BK * BN) bs[k * SB + n] = rb[l];
        }
    };

    if (K > 0) {
        load(0);
        store(0);
        __syncthreads();
        int buf = 0;
        for (int k0 = 0; k0 < K; k0 += BK) {
            const bool more = k0 + BK < K;
            if (more) load(k0 + BK);
            const PG_T* as = As + buf * BK * SA + ty * RM;
            const PG_T* bs = Bs + buf * BK * SB + tx * RN;
            PG_UNROLL_K
            for (int kk = 0; kk < BK; ++kk) {
                PG_T a[RM], b[RN];
#pragma unroll
                for (int i = 0; i < RM; ++i) a[i] = as[kk * SA + i];
#pragma unroll
                for (int j = 0; j < RN; ++j) b[j] = bs[kk * SB + j];
#pragma unroll
                for (int i = 0; i < RM; ++i)
#pragma unroll
                    for (int j = 0; j < RN; ++j) acc[i][j] += a[i] * b[j];
            }
            if (more) store(buf ^ 1);
            // One barrier per step: the buffer just filled was last read before the
            // previous barrier, and the next step reads it only after this one.
            __syncthreads();
            buf ^= 1;
        }
    }

    const PG_T alpha = PG_T(gp->alpha), beta = PG_T(gp->beta);
    PG_T* __restrict__ C = gp->C;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
        const int r = m0 + ty * RM + i;
        if (r >= M) continue;
        PG_T* crow = C + r * gp->ldc;
#pragma unroll
        for (int j = 0; j < RN; ++j) {
            const int c = n0 + tx * RN + j;
            if (c >= N) continue;
            PG_T v = alpha * acc[i][j];
            if (beta != PG_T(0)) v += beta * crow[c];
            crow[c] = v;
        }
    }
}

#if PG_MIN_BLOCKS > 0
#define PG_BOUNDS PG_LAUNCH_BOUNDS_MIN(PG_THREADS, PG_MIN_BLOCKS)
#else
#define PG_BOUNDS __launch_bounds__(PG_THREADS)
#endif

#define PG_CASE(id, bm, bn, bk, nt, rm, rn) \
    case id: pg_tile<bm, bn, bk, nt, rm, rn>(g, m0, n0, smem); break;
#define PG_THREADS_OF(id, bm, bn, bk, nt, rm, rn) case id: return nt;

__device__ __forceinline__ int pg_threads_of(int kind)
{
    switch (kind) { PG_KINDS(PG_THREADS_OF) }
    return 0;
}

#if PG_GRIDZ
// MAGMA layout: grid (tiles along M, tiles along N, GEMMs); blocks past a GEMM's edge
// leave at once (early termination). `base` offsets blockIdx.z, so batches beyond the
// 65535 grid.z limit run as several launches.
extern "C" __global__ void PG_BOUNDS
PG_NAME(const PgGemm* __restrict__ gemms, const PgTile* __restrict__ tiles,
        const int* __restrict__ block_ptr, int base)
{
    alignas(16) __shared__ PG_T smem[PG_SMEM_ELEMS];  // alignas first: clang (HIP) rejects it after __shared__
    const PgGemm* g = gemms + base + blockIdx.z;
    const int kind = 0;
    switch (kind) {
#define PG_GZ(id, bm, bn, bk, nt, rm, rn)                                   \
    case id: {                                                              \
        const int m0 = blockIdx.x * bm, n0 = blockIdx.y * bn;               \
        if (m0 >= g->M || n0 >= g->N) return;                                 \
        pg_tile<bm, bn, bk, nt, rm, rn>(g, m0, n0, smem);                   \
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
    alignas(16) __shared__ PG_T smem[PG_SMEM_ELEMS];  // alignas first: clang (HIP) rejects it after __shared__
    const int b = base + blockIdx.x;
    const int t0 = block_ptr[b], t1 = block_ptr[b + 1];
    if ((int)threadIdx.x >= pg_threads_of(tiles[t0].kind)) return;
    for (int t = t0; t < t1; ++t) {
        const PgTile tl = tiles[t];
        if (tl.gemm < 0) continue;  // an unused slot of a ragged upper-bound list
        const PgGemm* g = gemms + tl.gemm;
        const int m0 = tl.m0, n0 = tl.n0;
        switch (tl.kind) { PG_KINDS(PG_CASE) }
    }
}
#endif
#endif  // PG_RAGGED_PROLOGUE
