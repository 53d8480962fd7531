// CP field lookups on the GPU; same results as cp_field_cpu.h. Products mode and the backward
// pass run one thread per (point, component), density mode one thread per point; the
// backward pass scatters with atomicAdd into zeroed gradients.
#pragma once

#include <cuda_runtime.h>

#include "cp_common.h"

namespace tensorf_kernels {

__global__ void cp_products_kernel(const float* xyz, long n, CPLines g, float* result) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * g.channels) return;
    float value[3];
    cp_values(cp_lookup(xyz + 3 * (idx / g.channels), g), g, (int)(idx % g.channels), value);
    result[idx] = value[0] * value[1] * value[2];
}

__global__ void cp_density_kernel(const float* xyz, long n, CPLines g, float* result) {
    long p = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    const CPLookup a = cp_lookup(xyz + 3 * p, g);
    float density = 0.0f, value[3];
    for (int c = 0; c < g.channels; ++c) {
        cp_values(a, g, c, value);
        density += value[0] * value[1] * value[2];
    }
    result[p] = density;
}

__global__ void cp_backward_kernel(const float* xyz, long n, CPLines g, bool density_mode, const float* grad_out,
                                   float* grad_line0, float* grad_line1, float* grad_line2) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * g.channels) return;
    const long p = idx / g.channels;
    const int c = (int)(idx % g.channels);
    const CPLookup a = cp_lookup(xyz + 3 * p, g);
    float value[3];
    cp_values(a, g, c, value);
    const float upstream = density_mode ? grad_out[p] : grad_out[idx];
    const float others[3] = {value[1] * value[2], value[0] * value[2], value[0] * value[1]};
    float* grads[3] = {grad_line0, grad_line1, grad_line2};
    for (int i = 0; i < 3; ++i)
        for (int k = 0; k < 2; ++k) atomicAdd(grads[i] + a.texel[i][k] + c, a.weight[i][k] * upstream * others[i]);
}

inline unsigned cp_blocks_for(long work, int threads) { return (unsigned)((work + threads - 1) / threads); }

inline void cp_forward_cuda(const float* xyz, long n, const CPLines& g, bool density_mode, float* result) {
    if (n == 0) return;
    const int threads = 256;
    if (density_mode) cp_density_kernel<<<cp_blocks_for(n, threads), threads>>>(xyz, n, g, result);
    else cp_products_kernel<<<cp_blocks_for(n * g.channels, threads), threads>>>(xyz, n, g, result);
}

inline void cp_backward_cuda(const float* xyz, long n, const CPLines& g, bool density_mode, const float* grad_out,
                             float* const grad_line[3]) {
    for (int i = 0; i < 3; ++i) cudaMemsetAsync(grad_line[i], 0, sizeof(float) * g.length[i] * g.channels);
    if (n == 0) return;
    const int threads = 256;
    cp_backward_kernel<<<cp_blocks_for(n * g.channels, threads), threads>>>(
        xyz, n, g, density_mode, grad_out, grad_line[0], grad_line[1], grad_line[2]);
}

}  // namespace tensorf_kernels
