// Importance resampling of packed samples on the CPU (OpenMP), one ray per loop iteration
// (resampling_common.h).
#pragma once

#include "resampling_common.h"

namespace tensorf_kernels {

inline void importance_edges_cpu(const float* z, const float* dist, const float* weights, const int* offsets,
                                 const float* jitter, long n_rays, int n_bins, float padding, float* edges) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r)
        importance_edges_of_ray(z, dist, weights, offsets[r], offsets[r + 1], jitter[r], n_bins, padding,
                                edges + r * (long)(n_bins + 1));
}

}  // namespace tensorf_kernels
