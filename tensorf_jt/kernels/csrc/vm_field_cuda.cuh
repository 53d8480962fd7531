// VM field lookups on the GPU; same results as vm_field_cpu.h. Products mode runs one thread
// per (point, component), density mode one thread per point; the backward pass scatters with
// atomicAdd into zeroed gradients.
#pragma once

#include <cuda_runtime.h>

#include "vm_common.h"

namespace tensorf_kernels {

// Which axis a component of the concatenated products belongs to, and its index within it.
__device__ __forceinline__ void split_component(const VMGrids& g, int component, int* axis, int* channel) {
    int i = 0;
    while (i < 2 && component >= g.channels[i]) component -= g.channels[i++];
    *axis = i;
    *channel = component;
}

__device__ __forceinline__ float axis_product(const AxisLookup& a, const VMGrids& g, int i, int c, float* plane_value,
                                              float* line_value) {
    const float* P = g.plane[i];
    const float* L = g.line[i];
    float pv = 0.0f;
    for (int k = 0; k < 4; ++k) pv += a.corner_weight[k] * P[a.texel[k] + c];
    float lv = a.line_weight[0] * L[a.line_texel[0] + c] + a.line_weight[1] * L[a.line_texel[1] + c];
    *plane_value = pv;
    *line_value = lv;
    return pv * lv;
}

__global__ void vm_products_kernel(const float* xyz, long n, VMGrids g, float* result) {
    const int total = total_channels(g);
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * total) return;
    long p = idx / total;
    int axis, channel;
    split_component(g, (int)(idx % total), &axis, &channel);
    float pv, lv;
    result[idx] = axis_product(axis_lookup(xyz + 3 * p, g, axis), g, axis, channel, &pv, &lv);
}

__global__ void vm_density_kernel(const float* xyz, long n, VMGrids g, float* result) {
    long p = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n) return;
    float density = 0.0f, pv, lv;
    for (int i = 0; i < 3; ++i) {
        AxisLookup a = axis_lookup(xyz + 3 * p, g, i);
        for (int c = 0; c < g.channels[i]; ++c) density += axis_product(a, g, i, c, &pv, &lv);
    }
    result[p] = density;
}

__global__ void vm_backward_kernel(const float* xyz, long n, VMGrids g, bool density_mode, const float* grad_out,
                                   float* grad_plane0, float* grad_plane1, float* grad_plane2,
                                   float* grad_line0, float* grad_line1, float* grad_line2) {
    const int total = total_channels(g);
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n * total) return;
    long p = idx / total;
    int axis, channel;
    split_component(g, (int)(idx % total), &axis, &channel);
    AxisLookup a = axis_lookup(xyz + 3 * p, g, axis);
    float pv, lv;
    axis_product(a, g, axis, channel, &pv, &lv);
    float upstream = density_mode ? grad_out[p] : grad_out[idx];
    float* gp = axis == 0 ? grad_plane0 : (axis == 1 ? grad_plane1 : grad_plane2);
    float* gl = axis == 0 ? grad_line0 : (axis == 1 ? grad_line1 : grad_line2);
    for (int k = 0; k < 4; ++k) atomicAdd(gp + a.texel[k] + channel, a.corner_weight[k] * upstream * lv);
    for (int k = 0; k < 2; ++k) atomicAdd(gl + a.line_texel[k] + channel, a.line_weight[k] * upstream * pv);
}

inline unsigned blocks_for(long work, int threads) { return (unsigned)((work + threads - 1) / threads); }

inline void vm_forward_cuda(const float* xyz, long n, const VMGrids& g, bool density_mode, float* result) {
    if (n == 0) return;
    const int threads = 256;
    if (density_mode) vm_density_kernel<<<blocks_for(n, threads), threads>>>(xyz, n, g, result);
    else vm_products_kernel<<<blocks_for(n * total_channels(g), threads), threads>>>(xyz, n, g, result);
}

inline void vm_backward_cuda(const float* xyz, long n, const VMGrids& g, bool density_mode, const float* grad_out,
                             float* const grad_plane[3], float* const grad_line[3]) {
    for (int i = 0; i < 3; ++i) {
        cudaMemsetAsync(grad_plane[i], 0, sizeof(float) * g.height[i] * g.width[i] * g.channels[i]);
        cudaMemsetAsync(grad_line[i], 0, sizeof(float) * g.length[i] * g.channels[i]);
    }
    if (n == 0) return;
    const int threads = 256;
    vm_backward_kernel<<<blocks_for(n * total_channels(g), threads), threads>>>(
        xyz, n, g, density_mode, grad_out, grad_plane[0], grad_plane[1], grad_plane[2],
        grad_line[0], grad_line[1], grad_line[2]);
}

}  // namespace tensorf_kernels
