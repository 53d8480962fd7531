// Grid lookup arithmetic shared by the CPU and CUDA kernels (host and device).
// Conventions match F.grid_sample(align_corners=True, padding_mode="zeros"): a normalised
// coordinate c in [-1, 1] lands on texel (c + 1) / 2 * (size - 1); texels outside the grid
// contribute zero. Plain C++ so that the same text compiles with g++ and nvcc.
#pragma once

#include <cmath>

#ifdef __CUDACC__
#define TJT_HD __host__ __device__ __forceinline__
#else
#define TJT_HD inline
#endif

namespace tensorf_kernels {

// a * b rounded to float32 on its own: never contracted with a following add into an FMA
// (compilers do that under -Ofast / --fmad), so that sums match PyTorch's separate kernels.
TJT_HD float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    volatile float product = a * b;
    return product;
#endif
}

// The two texels around a normalised coordinate along an axis of `size` texels: their
// indices (clamped into the grid) and weights (zero for texels outside the grid).
struct Span {
    int index[2];
    float weight[2];
};

TJT_HD Span span_of(float coord, int size) {
    float pixel = (coord + 1.0f) * (0.5f * (float)(size - 1));
    // Far-outside points only ever read zeros; clamping keeps the int conversion defined.
    pixel = pixel < -2.0f ? -2.0f : (pixel > (float)size + 1.0f ? (float)size + 1.0f : pixel);
    float lower = floorf(pixel);
    float frac = pixel - lower;
    int i0 = (int)lower;
    Span s;
    for (int k = 0; k < 2; ++k) {
        int i = i0 + k;
        bool inside = i >= 0 && i < size;
        s.index[k] = inside ? i : 0;
        s.weight[k] = inside ? (k == 0 ? 1.0f - frac : frac) : 0.0f;
    }
    return s;
}

// Plane i of the VM decomposition spans axes (kMat0[i], kMat1[i]) -- width, height -- and
// its line runs along kVec[i] (the reference's matMode / vecMode).
TJT_HD int mat0(int i) { return i == 2 ? 1 : 0; }
TJT_HD int mat1(int i) { return i == 0 ? 1 : 2; }
TJT_HD int vec_axis(int i) { return 2 - i; }

}  // namespace tensorf_kernels
