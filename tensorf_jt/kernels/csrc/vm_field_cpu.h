// VM field lookups on the CPU (OpenMP): for each point, bilinear samples of three
// channel-last planes times linear samples of three lines, per component.
//   products mode:  out[n, offset_i + c] = plane_i(u, v)[c] * line_i(w)[c]   ([N, C0+C1+C2])
//   density mode:   out[n] = sum over i, c of the same products             ([N])
// The backward pass scatters into per-thread copies of the gradients, then sums them:
// atomics would serialise on the shared texels.
#pragma once

#include <omp.h>
#include <cstring>
#include <vector>

#include "vm_common.h"

namespace tensorf_kernels {

// plane_value[c] and line_value[c] of one axis at one point.
inline void axis_values(const AxisLookup& a, const float* __restrict__ plane, const float* __restrict__ line, int C,
                        float* __restrict__ plane_value, float* __restrict__ line_value) {
    const float* __restrict__ c0 = plane + a.texel[0];
    const float* __restrict__ c1 = plane + a.texel[1];
    const float* __restrict__ c2 = plane + a.texel[2];
    const float* __restrict__ c3 = plane + a.texel[3];
    const float* __restrict__ t0 = line + a.line_texel[0];
    const float* __restrict__ t1 = line + a.line_texel[1];
    const float w0 = a.corner_weight[0], w1 = a.corner_weight[1], w2 = a.corner_weight[2], w3 = a.corner_weight[3];
    const float v0 = a.line_weight[0], v1 = a.line_weight[1];
    for (int c = 0; c < C; ++c) {
        plane_value[c] = w0 * c0[c] + w1 * c1[c] + w2 * c2[c] + w3 * c3[c];
        line_value[c] = v0 * t0[c] + v1 * t1[c];
    }
}

template <bool kDensity>
inline void vm_forward_impl(const float* __restrict__ xyz, long n, const VMGrids& g, float* __restrict__ result) {
    const int total = total_channels(g), widest = max_channels(g);
    #pragma omp parallel
    {
        std::vector<float> plane_value(widest), line_value(widest);
        #pragma omp for schedule(static)
        for (long p = 0; p < n; ++p) {
            float density = 0.0f;
            int offset = 0;
            for (int i = 0; i < 3; ++i) {
                const int C = g.channels[i];
                axis_values(axis_lookup(xyz + 3 * p, g, i), g.plane[i], g.line[i], C, plane_value.data(), line_value.data());
                if (kDensity) {
                    for (int c = 0; c < C; ++c) density += plane_value[c] * line_value[c];
                } else {
                    float* __restrict__ row = result + p * total + offset;
                    for (int c = 0; c < C; ++c) row[c] = plane_value[c] * line_value[c];
                }
                offset += C;
            }
            if (kDensity) result[p] = density;
        }
    }
}

inline void vm_forward_cpu(const float* xyz, long n, const VMGrids& g, bool density_mode, float* result) {
    if (density_mode) vm_forward_impl<true>(xyz, n, g, result);
    else vm_forward_impl<false>(xyz, n, g, result);
}

template <bool kDensity>
inline void vm_backward_impl(const float* __restrict__ xyz, long n, const VMGrids& g, const float* __restrict__ grad_out,
                             float* const grad_plane[3], float* const grad_line[3]) {
    const int total = total_channels(g), widest = max_channels(g);
    long plane_size[3], line_size[3], buffer_size = 0;
    for (int i = 0; i < 3; ++i) {
        plane_size[i] = (long)g.height[i] * g.width[i] * g.channels[i];
        line_size[i] = (long)g.length[i] * g.channels[i];
        buffer_size += plane_size[i] + line_size[i];
    }
    const int n_threads = omp_get_max_threads();
    // Thread 0 accumulates straight into the outputs; the others into private copies.
    std::vector<float> private_copies((size_t)(n_threads - 1) * buffer_size, 0.0f);
    for (int i = 0; i < 3; ++i) {
        std::memset(grad_plane[i], 0, sizeof(float) * plane_size[i]);
        std::memset(grad_line[i], 0, sizeof(float) * line_size[i]);
    }

    #pragma omp parallel num_threads(n_threads)
    {
        const int thread = omp_get_thread_num();
        float* my_plane[3];
        float* my_line[3];
        if (thread == 0) {
            for (int i = 0; i < 3; ++i) { my_plane[i] = grad_plane[i]; my_line[i] = grad_line[i]; }
        } else {
            float* cursor = private_copies.data() + (size_t)(thread - 1) * buffer_size;
            for (int i = 0; i < 3; ++i) { my_plane[i] = cursor; cursor += plane_size[i]; }
            for (int i = 0; i < 3; ++i) { my_line[i] = cursor; cursor += line_size[i]; }
        }
        std::vector<float> plane_value(widest), line_value(widest), to_plane(widest), to_line(widest);

        #pragma omp for schedule(static)
        for (long p = 0; p < n; ++p) {
            int offset = 0;
            for (int i = 0; i < 3; ++i) {
                const int C = g.channels[i];
                AxisLookup a = axis_lookup(xyz + 3 * p, g, i);
                axis_values(a, g.plane[i], g.line[i], C, plane_value.data(), line_value.data());
                const float* __restrict__ upstream = grad_out + (kDensity ? p : p * total + offset);
                for (int c = 0; c < C; ++c) {
                    float u = kDensity ? upstream[0] : upstream[c];
                    to_plane[c] = u * line_value[c];
                    to_line[c] = u * plane_value[c];
                }
                for (int k = 0; k < 4; ++k) {
                    float* __restrict__ dst = my_plane[i] + a.texel[k];
                    const float w = a.corner_weight[k];
                    for (int c = 0; c < C; ++c) dst[c] += w * to_plane[c];
                }
                for (int k = 0; k < 2; ++k) {
                    float* __restrict__ dst = my_line[i] + a.line_texel[k];
                    const float w = a.line_weight[k];
                    for (int c = 0; c < C; ++c) dst[c] += w * to_line[c];
                }
                offset += C;
            }
        }
    }

    if (n_threads > 1) {
        long base = 0;
        for (int part = 0; part < 6; ++part) {
            const int i = part % 3;
            const long size = part < 3 ? plane_size[i] : line_size[i];
            float* __restrict__ target = part < 3 ? grad_plane[i] : grad_line[i];
            #pragma omp parallel for schedule(static)
            for (long e = 0; e < size; ++e) {
                float sum = target[e];
                for (int t = 0; t < n_threads - 1; ++t) sum += private_copies[(size_t)t * buffer_size + base + e];
                target[e] = sum;
            }
            base += size;
        }
    }
}

inline void vm_backward_cpu(const float* xyz, long n, const VMGrids& g, bool density_mode, const float* grad_out,
                            float* const grad_plane[3], float* const grad_line[3]) {
    if (density_mode) vm_backward_impl<true>(xyz, n, g, grad_out, grad_plane, grad_line);
    else vm_backward_impl<false>(xyz, n, g, grad_out, grad_plane, grad_line);
}

}  // namespace tensorf_kernels
