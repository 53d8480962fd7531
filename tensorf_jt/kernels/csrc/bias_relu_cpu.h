// Bias and ReLU of a hidden layer on the CPU (OpenMP; bias_relu_common.h). The backward pass
// sums the bias gradient per thread over its rows, then adds the threads' sums.
#pragma once

#include <omp.h>

#include <vector>

#include "bias_relu_common.h"

namespace tensorf_kernels {

inline void bias_relu_forward_cpu(const float* z, const float* bias, long rows, int C, float* h) {
    #pragma omp parallel for schedule(static)
    for (long n = 0; n < rows; ++n) {
        const float* __restrict__ z_row = z + n * C;
        float* __restrict__ h_row = h + n * C;
        for (int c = 0; c < C; ++c) h_row[c] = bias_relu(z_row[c], bias[c]);
    }
}

inline void bias_relu_backward_cpu(const float* h, const float* grad_h, long rows, int C, float* grad_z,
                                   float* grad_bias) {
    const int n_threads = omp_get_max_threads();
    std::vector<float> partial((size_t)n_threads * C, 0.0f);
    #pragma omp parallel num_threads(n_threads)
    {
        float* __restrict__ sums = partial.data() + (size_t)omp_get_thread_num() * C;
        #pragma omp for schedule(static)
        for (long n = 0; n < rows; ++n) {
            const float* __restrict__ h_row = h + n * C;
            const float* __restrict__ dh_row = grad_h + n * C;
            float* __restrict__ dz_row = grad_z + n * C;
            for (int c = 0; c < C; ++c) {
                const float dz = relu_grad(h_row[c], dh_row[c]);
                dz_row[c] = dz;
                sums[c] += dz;
            }
        }
    }
    for (int c = 0; c < C; ++c) {
        float total = 0.0f;
        for (int t = 0; t < n_threads; ++t) total += partial[(size_t)t * C + c];
        grad_bias[c] = total;
    }
}

}  // namespace tensorf_kernels
