// mip-NeRF 360's distortion loss of packed samples on the CPU (OpenMP), one ray per loop
// iteration, in O(N) (rendering/distortion.py has the formula). With s_i = (ordinal_i + 1/2) / S,
// d = 1 / S, prefix sums W_<i, (ws)_<i and suffix sums W_>i, (ws)_>i:
//   L      = sum_i 2 w_i (s_i W_<i - (ws)_<i) + w_i^2 d / 3
//   dL/dw_i = 2 (s_i W_<i - (ws)_<i + (ws)_>i - s_i W_>i) + 2 w_i d / 3
#pragma once

namespace tensorf_kernels {

inline void distortion_forward_cpu(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                   int n_samples, float* loss) {
    const float inv = 1.0f / (float)n_samples;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        float before = 0.0f, ws_before = 0.0f, total = 0.0f;
        for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
            float w = weights[i], s = ((float)ordinal[i] + 0.5f) * inv;
            total += 2.0f * w * (s * before - ws_before) + w * w * inv / 3.0f;
            before += w;
            ws_before += w * s;
        }
        loss[r] = total;
    }
}

inline void distortion_backward_cpu(const float* weights, const int* ordinal, const int* offsets, long n_rays,
                                    int n_samples, const float* grad_loss, float* grad_weights) {
    const float inv = 1.0f / (float)n_samples;
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        float all = 0.0f, ws_all = 0.0f;
        for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
            all += weights[i];
            ws_all += weights[i] * (((float)ordinal[i] + 0.5f) * inv);
        }
        float before = 0.0f, ws_before = 0.0f;
        for (long i = offsets[r]; i < offsets[r + 1]; ++i) {
            float w = weights[i], s = ((float)ordinal[i] + 0.5f) * inv;
            float after = all - before - w, ws_after = ws_all - ws_before - w * s;
            grad_weights[i] = grad_loss[r] * (2.0f * (s * before - ws_before + ws_after - s * after)
                                              + 2.0f * w * inv / 3.0f);
            before += w;
            ws_before += w * s;
        }
    }
}

}  // namespace tensorf_kernels
