// mip-NeRF 360's distortion loss of one ray's packed samples, in O(N), shared by the CPU and
// CUDA kernels (rendering/distortion.py has the formula). With s_i = (ordinal_i + 1/2) / S,
// d = 1 / S, prefix sums W_<i, (ws)_<i and suffix sums W_>i, (ws)_>i:
//   L       = sum_i 2 w_i (s_i W_<i - (ws)_<i) + w_i^2 d / 3
//   dL/dw_i = 2 (s_i W_<i - (ws)_<i + (ws)_>i - s_i W_>i) + 2 w_i d / 3
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

TJT_HD float sample_position(int ordinal, float inv_samples) {
    return ((float)ordinal + 0.5f) * inv_samples;
}

// The loss of the ray whose samples are [begin, end).
TJT_HD float distortion_of_ray(const float* weights, const int* ordinal, long begin, long end, float inv_samples) {
    float before = 0.0f, ws_before = 0.0f, total = 0.0f;
    for (long i = begin; i < end; ++i) {
        float w = weights[i], s = sample_position(ordinal[i], inv_samples);
        total += 2.0f * w * (s * before - ws_before) + w * w * inv_samples / 3.0f;
        before += w;
        ws_before += w * s;
    }
    return total;
}

// grad_weights[i] for the ray's samples [begin, end), its loss having gradient grad_loss.
TJT_HD void distortion_grad_of_ray(const float* weights, const int* ordinal, long begin, long end, float inv_samples,
                                   float grad_loss, float* grad_weights) {
    float all = 0.0f, ws_all = 0.0f;
    for (long i = begin; i < end; ++i) {
        all += weights[i];
        ws_all += weights[i] * sample_position(ordinal[i], inv_samples);
    }
    float before = 0.0f, ws_before = 0.0f;
    for (long i = begin; i < end; ++i) {
        float w = weights[i], s = sample_position(ordinal[i], inv_samples);
        float after = all - before - w, ws_after = ws_all - ws_before - w * s;
        grad_weights[i] = grad_loss * (2.0f * (s * before - ws_before + ws_after - s * after)
                                       + 2.0f * w * inv_samples / 3.0f);
        before += w;
        ws_before += w * s;
    }
}

}  // namespace tensorf_kernels
