// Ray marching on the CPU (OpenMP): fixed-step samples from each ray's box entry, kept where
// they lie inside the box and (when an alpha grid is given) where the grid is occupied,
// written packed: only kept samples, grouped by ray, with per-ray offsets.
#pragma once

#include <omp.h>
#include <vector>

#include "ray_marching_common.h"

namespace tensorf_kernels {

// Returns the number of kept samples; outputs have room for R * n_samples entries.
// dist is the gap to the ray's next sample (0 after the last one), as the reference's.
inline long march_rays_cpu(const RaySteps& m, const float* aabb, const AlphaVolume& alpha, long n_rays,
                           float* xyz_out, float* z_out, float* dist_out, int* ray_index_out, int* ray_offsets) {
    const int S = m.n_samples;
    std::vector<unsigned char> kept((size_t)n_rays * S);
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        int count = 0;
        for (int k = 0; k < S; ++k) {
            float xyz[3];
            sample_point(m, r, sample_depth(m, r, k), xyz);
            bool keep = keep_sample(aabb, alpha, xyz);
            kept[(size_t)r * S + k] = keep;
            count += keep;
        }
        ray_offsets[r + 1] = count;
    }
    ray_offsets[0] = 0;
    for (long r = 0; r < n_rays; ++r) ray_offsets[r + 1] += ray_offsets[r];

    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        long slot = ray_offsets[r];
        for (int k = 0; k < S; ++k) {
            if (!kept[(size_t)r * S + k]) continue;
            float z = sample_depth(m, r, k);
            sample_point(m, r, z, xyz_out + 3 * slot);
            z_out[slot] = z;
            dist_out[slot] = k + 1 < S ? sample_depth(m, r, k + 1) - z : 0.0f;
            ray_index_out[slot] = (int)r;
            ++slot;
        }
    }
    return ray_offsets[n_rays];
}

// Whether any of the n_samples samples of each ray meets the alpha grid (training-ray
// filtering); a ray stops at its first hit.
inline void rays_hit_alpha_cpu(const RaySteps& m, const AlphaVolume& alpha, long n_rays, bool* hit) {
    #pragma omp parallel for schedule(dynamic, 64)
    for (long r = 0; r < n_rays; ++r) {
        bool any = false;
        for (int k = 0; k < m.n_samples && !any; ++k) {
            float xyz[3];
            sample_point(m, r, sample_depth(m, r, k), xyz);
            any = alpha_at(alpha, xyz) > 0.0f;
        }
        hit[r] = any;
    }
}

inline void alpha_lookup_cpu(const AlphaVolume& volume, const float* xyz, long n, float* alpha) {
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < n; ++p) alpha[p] = alpha_at(volume, xyz + 3 * p);
}

}  // namespace tensorf_kernels
