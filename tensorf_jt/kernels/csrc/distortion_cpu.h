// The distortion loss of packed samples on the CPU (OpenMP), one ray per loop iteration
// (distortion_common.h).
#pragma once

#include "distortion_common.h"

namespace tensorf_kernels {

inline void distortion_forward_cpu(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                   int n_samples, float* loss) {
    const float inv = 1.0f / (float)n_samples;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) loss[r] = distortion_of_ray(weights, ordinal, offsets[r], offsets[r + 1], inv);
}

inline void distortion_backward_cpu(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                    int n_samples, const float* grad_loss, float* grad_weights) {
    const float inv = 1.0f / (float)n_samples;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r)
        distortion_grad_of_ray(weights, ordinal, offsets[r], offsets[r + 1], inv, grad_loss[r], grad_weights);
}

}  // namespace tensorf_kernels
