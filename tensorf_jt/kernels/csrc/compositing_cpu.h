// Volume compositing over packed samples on the CPU (OpenMP), one ray per loop iteration:
//   alpha_i = 1 - exp(-sigma_i * dist_i),  T_i = prod_{j<i} (1 - alpha_j + 1e-10),  w_i = alpha_i T_i.
// Samples the packing left out have sigma = 0, so their factor 1 + 1e-10 is exactly 1 in float32:
// skipping them changes nothing.
//
// Backward, with g_i = dL/dw_i and S_i = sum_{j>i} g_j w_j:
//   dL/dsigma_i = dist_i (1 - alpha_i) [ g_i T_i - S_i / (1 - alpha_i + 1e-10) ].
#pragma once

#include <cmath>

namespace tensorf_kernels {

// Also writes T_i (transmittance in front of each sample), which the backward pass needs.
inline void composite_forward_cpu(const float* sigma, const float* dist, const int* offsets, long n_rays,
                                  float* weights, float* transmittance) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        float t = 1.0f;
        for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
            float alpha = 1.0f - std::exp(-sigma[i] * dist[i]);
            transmittance[i] = t;
            weights[i] = alpha * t;
            t *= 1.0f - alpha + 1e-10f;
        }
    }
}

inline void composite_backward_cpu(const float* sigma, const float* dist, const int* offsets, long n_rays,
                                   const float* weights, const float* transmittance, const float* grad_weights,
                                   float* grad_sigma) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        float later = 0.0f;  // S_i, accumulated back to front
        for (long i = offsets[r + 1] - 1; i >= offsets[r]; --i) {
            float alpha = 1.0f - std::exp(-sigma[i] * dist[i]);
            float keep = 1.0f - alpha + 1e-10f;
            float d_alpha = grad_weights[i] * transmittance[i] - later / keep;
            grad_sigma[i] = d_alpha * dist[i] * (1.0f - alpha);
            later += grad_weights[i] * weights[i];
        }
    }
}

}  // namespace tensorf_kernels
