// Volume compositing over packed samples on the GPU, one thread per ray; same formulas and
// results as compositing_cpu.h.
#pragma once

#include <cuda_runtime.h>

namespace tensorf_kernels {

__global__ void composite_forward_kernel(const float* sigma, const float* dist, const int* offsets, long n_rays,
                                         float* weights, float* transmittance) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    float t = 1.0f;
    for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
        float alpha = 1.0f - expf(-sigma[i] * dist[i]);
        transmittance[i] = t;
        weights[i] = alpha * t;
        t *= 1.0f - alpha + 1e-10f;
    }
}

__global__ void composite_backward_kernel(const float* sigma, const float* dist, const int* offsets, long n_rays,
                                          const float* weights, const float* transmittance,
                                          const float* grad_weights, float* grad_sigma) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    float later = 0.0f;
    for (long i = offsets[r + 1] - 1; i >= offsets[r]; --i) {
        float alpha = 1.0f - expf(-sigma[i] * dist[i]);
        float keep = 1.0f - alpha + 1e-10f;
        float d_alpha = grad_weights[i] * transmittance[i] - later / keep;
        grad_sigma[i] = d_alpha * dist[i] * (1.0f - alpha);
        later += grad_weights[i] * weights[i];
    }
}

inline void composite_forward_cuda(const float* sigma, const float* dist, const int* offsets, long n_rays,
                                   float* weights, float* transmittance) {
    if (n_rays == 0) return;
    composite_forward_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(sigma, dist, offsets, n_rays, weights, transmittance);
}

inline void composite_backward_cuda(const float* sigma, const float* dist, const int* offsets, long n_rays,
                                    const float* weights, const float* transmittance, const float* grad_weights,
                                    float* grad_sigma) {
    if (n_rays == 0) return;
    composite_backward_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(
        sigma, dist, offsets, n_rays, weights, transmittance, grad_weights, grad_sigma);
}

}  // namespace tensorf_kernels
