// CP field lookups on the CPU (OpenMP): per point and component, the product of three
// linear line samples.
//   products mode:  out[n, c] = line_0(z)[c] * line_1(y)[c] * line_2(x)[c]   ([N, C])
//   density mode:   out[n] = sum over c of the same products                ([N])
// The backward pass scatters into per-thread copies of the gradients, then sums them.
#pragma once

#include <omp.h>
#include <cstring>
#include <vector>

#include "cp_common.h"

namespace tensorf_kernels {

inline void cp_forward_cpu(const float* __restrict__ xyz, long n, const CPLines& g, bool density_mode,
                           float* __restrict__ result) {
    const int C = g.channels;
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < n; ++p) {
        const CPLookup a = cp_lookup(xyz + 3 * p, g);
        float density = 0.0f, value[3];
        for (int c = 0; c < C; ++c) {
            cp_values(a, g, c, value);
            const float product = value[0] * value[1] * value[2];
            if (density_mode) density += product;
            else result[p * C + c] = product;
        }
        if (density_mode) result[p] = density;
    }
}

inline void cp_backward_cpu(const float* __restrict__ xyz, long n, const CPLines& g, bool density_mode,
                            const float* __restrict__ grad_out, float* const grad_line[3]) {
    const int C = g.channels;
    long size[3], buffer_size = 0;
    for (int i = 0; i < 3; ++i) {
        size[i] = (long)g.length[i] * C;
        buffer_size += size[i];
        std::memset(grad_line[i], 0, sizeof(float) * size[i]);
    }
    const int n_threads = omp_get_max_threads();
    // Thread 0 accumulates straight into the outputs; the others into private copies.
    std::vector<float> private_copies((size_t)(n_threads - 1) * buffer_size, 0.0f);

    #pragma omp parallel num_threads(n_threads)
    {
        const int thread = omp_get_thread_num();
        float* mine[3];
        float* cursor = thread == 0 ? nullptr : private_copies.data() + (size_t)(thread - 1) * buffer_size;
        for (int i = 0; i < 3; ++i) {
            mine[i] = thread == 0 ? grad_line[i] : cursor;
            if (thread != 0) cursor += size[i];
        }
        #pragma omp for schedule(static)
        for (long p = 0; p < n; ++p) {
            const CPLookup a = cp_lookup(xyz + 3 * p, g);
            float value[3];
            for (int c = 0; c < C; ++c) {
                cp_values(a, g, c, value);
                const float upstream = density_mode ? grad_out[p] : grad_out[p * C + c];
                const float others[3] = {value[1] * value[2], value[0] * value[2], value[0] * value[1]};
                for (int i = 0; i < 3; ++i)
                    for (int k = 0; k < 2; ++k) mine[i][a.texel[i][k] + c] += a.weight[i][k] * upstream * others[i];
            }
        }
    }

    if (n_threads > 1) {
        long base = 0;
        for (int i = 0; i < 3; ++i) {
            float* __restrict__ target = grad_line[i];
            #pragma omp parallel for schedule(static)
            for (long e = 0; e < size[i]; ++e) {
                float sum = target[e];
                for (int t = 0; t < n_threads - 1; ++t) sum += private_copies[(size_t)t * buffer_size + base + e];
                target[e] = sum;
            }
            base += size[i];
        }
    }
}

}  // namespace tensorf_kernels
