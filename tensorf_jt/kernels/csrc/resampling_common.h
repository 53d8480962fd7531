// Importance resampling of one ray's packed samples, shared by the CPU and CUDA kernels
// (rendering/resampling.py has the method and the reference). The ray's intervals
// [z_i, z_i + dist_i] carry weights w_i, padded by an even share of `padding` times their sum;
// the edges are the inverse CDF of that distribution at the levels
// u_k = clamp((k + jitter - 1/2) / n_bins, 0, 1 - 1e-5), k = 0 .. n_bins, found in one merged
// pass over intervals and levels (both ascending). Levels past the distribution's end (float
// rounding) take the end of its last interval; a ray without intervals gets edges at 0.
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

TJT_HD float importance_level(int k, float jitter, int n_bins) {
    float u = ((float)k + jitter - 0.5f) / (float)n_bins;
    return fminf(fmaxf(u, 0.0f), 1.0f - 1e-5f);
}

// Edges [n_bins + 1] of the ray whose samples are [begin, end).
TJT_HD void importance_edges_of_ray(const float* z, const float* dist, const float* weights, long begin, long end,
                                    float jitter, int n_bins, float padding, float* edges) {
    float total = 0.0f;
    long n_valid = 0;
    for (long i = begin; i < end; ++i) {
        if (dist[i] > 0.0f) {
            total += fmaxf(weights[i], 0.0f);
            ++n_valid;
        }
    }
    int k = 0;
    float last_end = 0.0f;
    if (n_valid > 0) {
        const float extra = (padding * total + 1e-12f) / (float)n_valid;
        const float scale = 1.0f / (total + (padding * total + 1e-12f));
        float cdf = 0.0f;
        for (long i = begin; i < end && k <= n_bins; ++i) {
            if (!(dist[i] > 0.0f)) continue;
            const float share = (fmaxf(weights[i], 0.0f) + extra) * scale;
            const float next = cdf + share;
            for (float u = importance_level(k, jitter, n_bins); k <= n_bins && u < next;
                 u = importance_level(++k, jitter, n_bins)) {
                const float fraction = fminf(fmaxf((u - cdf) / fmaxf(share, 1e-12f), 0.0f), 1.0f);
                edges[k] = z[i] + dist[i] * fraction;
            }
            cdf = next;
            last_end = z[i] + dist[i];
        }
    }
    for (; k <= n_bins; ++k) edges[k] = last_end;
}

}  // namespace tensorf_kernels
