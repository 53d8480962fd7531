// Ray marching on the CPU (OpenMP): fixed-step samples from each ray's box entry, kept where
// they lie inside the box and (when an alpha grid is given) where the grid is occupied,
// written packed: only kept samples, grouped by ray, with per-ray offsets.
#pragma once

#include <omp.h>
#include <vector>

#include "ray_marching_common.h"
#include "unbounded_common.h"

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

// Unbounded rays (unbounded_common.h), packed as march_rays_cpu packs them. Samples are kept
// where the alpha grid (if any) is occupied.
inline long march_unbounded_cpu(const UnboundedSteps& s, const AlphaVolume& alpha, long n_rays, float* xyz_out,
                                float* z_out, float* dist_out, int* ray_index_out, int* ray_offsets) {
    const int S = s.n_linear + s.n_background;
    std::vector<unsigned char> kept((size_t)n_rays * S);
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        UnboundedRay ray = unbounded_ray(s, r);
        int count = 0;
        for (int i = 0; i < ray.kept_linear + s.n_background; ++i) {
            float z, dist, y[3];
            unbounded_sample(s, ray, r, i, &z, &dist, y);
            bool keep = alpha.data == nullptr || alpha_at(alpha, y) > 0.0f;
            kept[(size_t)r * S + i] = keep;
            count += keep;
        }
        ray_offsets[r + 1] = count;
    }
    ray_offsets[0] = 0;
    for (long r = 0; r < n_rays; ++r) ray_offsets[r + 1] += ray_offsets[r];

    #pragma omp parallel for schedule(static)
    for (long r = 0; r < n_rays; ++r) {
        UnboundedRay ray = unbounded_ray(s, r);
        long slot = ray_offsets[r];
        for (int i = 0; i < ray.kept_linear + s.n_background; ++i) {
            if (!kept[(size_t)r * S + i]) continue;
            unbounded_sample(s, ray, r, i, z_out + slot, dist_out + slot, xyz_out + 3 * slot);
            ray_index_out[slot] = (int)r;
            ++slot;
        }
    }
    return ray_offsets[n_rays];
}

inline void alpha_lookup_cpu(const AlphaVolume& volume, const float* xyz, long n, float* alpha) {
    #pragma omp parallel for schedule(static)
    for (long p = 0; p < n; ++p) alpha[p] = alpha_at(volume, xyz + 3 * p);
}

}  // namespace tensorf_kernels
