// Source of the AMD code-object test fixture (tests/test_amd_parser.py). Regenerate with:
//   clang++-15 -x hip --offload-arch=gfx90a --cuda-device-only --no-gpu-bundle-output -c -O3 \
//     --rocm-path=/usr --rocm-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode \
//     -Rpass-analysis=kernel-resource-usage -o amd_fixture_gfx90a.co amd_fixture.hip \
//     2> amd_fixture_gfx90a.remarks.txt
#include <hip/hip_runtime.h>

// 1 KiB of LDS, a barrier, 256 threads.
extern "C" __global__ void __launch_bounds__(256) fixture_lds(float* x, int n)
{
    __shared__ float s[256];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) x[i] = 2.0f * s[255 - threadIdx.x];
}

typedef float f32x16 __attribute__((ext_vector_type(16)));

// A matrix-core accumulator: puts AGPRs (and the unified-file arithmetic) in the note.
extern "C" __global__ void __launch_bounds__(64) fixture_mfma(const float* a, const float* b,
                                                              float* c)
{
    f32x16 acc = {};
    for (int k = 0; k < 8; ++k)
        acc = __builtin_amdgcn_mfma_f32_16x16x1f32(a[k * 64 + threadIdx.x], b[k * 64 + threadIdx.x],
                                                   acc, 0, 0, 0);
    for (int j = 0; j < 16; ++j) c[j * 64 + threadIdx.x] = acc[j];
}
