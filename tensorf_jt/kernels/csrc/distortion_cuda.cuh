// mip-NeRF 360's distortion loss of packed samples on the GPU, one thread per ray; the same
// formulas as distortion_cpu.h.
#pragma once

#include <cuda_runtime.h>

namespace tensorf_kernels {

__global__ void distortion_forward_kernel(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                          int n_samples, float* loss) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    const float inv = 1.0f / (float)n_samples;
    float before = 0.0f, ws_before = 0.0f, total = 0.0f;
    for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
        float w = weights[i], s = ((float)ordinal[i] + 0.5f) * inv;
        total += 2.0f * w * (s * before - ws_before) + w * w * inv / 3.0f;
        before += w;
        ws_before += w * s;
    }
    loss[r] = total;
}

__global__ void distortion_backward_kernel(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                           int n_samples, const float* grad_loss, float* grad_weights) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    const float inv = 1.0f / (float)n_samples;
    float all = 0.0f, ws_all = 0.0f;
    for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
        all += weights[i];
        ws_all += weights[i] * (((float)ordinal[i] + 0.5f) * inv);
    }
    float before = 0.0f, ws_before = 0.0f;
    for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
        float w = weights[i], s = ((float)ordinal[i] + 0.5f) * inv;
        float after = all - before - w, ws_after = ws_all - ws_before - w * s;
        grad_weights[i] = grad_loss[r] * (2.0f * (s * before - ws_before + ws_after - s * after) + 2.0f * w * inv / 3.0f);
        before += w;
        ws_before += w * s;
    }
}

inline void distortion_forward_cuda(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                    int n_samples, float* loss) {
    if (n_rays > 0)
        distortion_forward_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(weights, ordinal, offsets, n_rays,
                                                                             n_samples, loss);
}

inline void distortion_backward_cuda(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                     int n_samples, const float* grad_loss, float* grad_weights) {
    if (n_rays > 0)
        distortion_backward_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(weights, ordinal, offsets, n_rays,
                                                                              n_samples, grad_loss, grad_weights);
}

}  // namespace tensorf_kernels
