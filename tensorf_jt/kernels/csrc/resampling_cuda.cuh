// Importance resampling of packed samples on the GPU, one thread per ray (resampling_common.h).
#pragma once

#include <cuda_runtime.h>

#include "resampling_common.h"

namespace tensorf_kernels {

__global__ void importance_edges_kernel(const float* z, const float* dist, const float* weights, const int* offsets,
                                        const float* jitter, long n_rays, int n_bins, float padding, float* edges) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n_rays)
        importance_edges_of_ray(z, dist, weights, offsets[r], offsets[r + 1], jitter[r], n_bins, padding,
                                edges + r * (long)(n_bins + 1));
}

inline void importance_edges_cuda(const float* z, const float* dist, const float* weights, const int* offsets,
                                  const float* jitter, long n_rays, int n_bins, float padding, float* edges) {
    if (n_rays > 0)
        importance_edges_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(z, dist, weights, offsets, jitter, n_rays,
                                                                          n_bins, padding, edges);
}

}  // namespace tensorf_kernels
