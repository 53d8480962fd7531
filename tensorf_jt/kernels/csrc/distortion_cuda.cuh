// The distortion loss of packed samples on the GPU, one thread per ray (distortion_common.h).
#pragma once

#include <cuda_runtime.h>

#include "distortion_common.h"

namespace tensorf_kernels {

__global__ void distortion_forward_kernel(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                          float inv_samples, float* loss) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n_rays) loss[r] = distortion_of_ray(weights, ordinal, offsets[r], offsets[r + 1], inv_samples);
}

__global__ void distortion_backward_kernel(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                           float inv_samples, const float* grad_loss, float* grad_weights) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r < n_rays)
        distortion_grad_of_ray(weights, ordinal, offsets[r], offsets[r + 1], inv_samples, grad_loss[r], grad_weights);
}

inline void distortion_forward_cuda(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                    int n_samples, float* loss) {
    if (n_rays > 0)
        distortion_forward_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(weights, ordinal, offsets, n_rays,
                                                                             1.0f / (float)n_samples, loss);
}

inline void distortion_backward_cuda(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                     int n_samples, const float* grad_loss, float* grad_weights) {
    if (n_rays > 0)
        distortion_backward_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(
            weights, ordinal, offsets, n_rays, 1.0f / (float)n_samples, grad_loss, grad_weights);
}

}  // namespace tensorf_kernels
