// Ray marching on the GPU; same samples and packing as ray_marching_cpu.h. One thread per
// ray counts its kept samples, a single thread turns the counts into offsets (R is at most a
// few hundred thousand), and one thread per ray writes its samples.
#pragma once

#include <cuda_runtime.h>

#include "ray_marching_common.h"
#include "unbounded_common.h"

namespace tensorf_kernels {

__global__ void march_count_kernel(RaySteps m, const float* aabb, AlphaVolume alpha, long n_rays, int* ray_offsets) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    int count = 0;
    for (int k = 0; k < m.n_samples; ++k) {
        float xyz[3];
        sample_point(m, r, sample_depth(m, r, k), xyz);
        count += keep_sample(aabb, alpha, xyz);
    }
    ray_offsets[r + 1] = count;
}

__global__ void prefix_sum_kernel(int* ray_offsets, long n_rays) {
    ray_offsets[0] = 0;
    for (long r = 0; r < n_rays; ++r) ray_offsets[r + 1] += ray_offsets[r];
}

__global__ void march_write_kernel(RaySteps m, const float* aabb, AlphaVolume alpha, long n_rays,
                                   const int* ray_offsets, float* xyz_out, float* z_out, float* dist_out,
                                   int* ray_index_out) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    long slot = ray_offsets[r];
    const int S = m.n_samples;
    for (int k = 0; k < S; ++k) {
        float z = sample_depth(m, r, k), xyz[3];
        sample_point(m, r, z, xyz);
        if (!keep_sample(aabb, alpha, xyz)) continue;
        for (int a = 0; a < 3; ++a) xyz_out[3 * slot + a] = xyz[a];
        z_out[slot] = z;
        dist_out[slot] = k + 1 < S ? sample_depth(m, r, k + 1) - z : 0.0f;
        ray_index_out[slot] = (int)r;
        ++slot;
    }
}

__global__ void rays_hit_alpha_kernel(RaySteps m, AlphaVolume alpha, long n_rays, bool* hit) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    bool any = false;
    for (int k = 0; k < m.n_samples && !any; ++k) {
        float xyz[3];
        sample_point(m, r, sample_depth(m, r, k), xyz);
        any = alpha_at(alpha, xyz) > 0.0f;
    }
    hit[r] = any;
}

__global__ void unbounded_count_kernel(UnboundedSteps s, AlphaVolume alpha, long n_rays, int* ray_offsets) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    UnboundedRay ray = unbounded_ray(s, r);
    int count = 0;
    for (int i = 0; i < ray.kept_linear + s.n_background; ++i) {
        float z, dist, y[3];
        unbounded_sample(s, ray, r, i, &z, &dist, y);
        count += alpha.data == nullptr || alpha_at(alpha, y) > 0.0f;
    }
    ray_offsets[r + 1] = count;
}

__global__ void unbounded_write_kernel(UnboundedSteps s, AlphaVolume alpha, long n_rays, const int* ray_offsets,
                                       float* xyz_out, float* z_out, float* dist_out, int* ray_index_out) {
    long r = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n_rays) return;
    UnboundedRay ray = unbounded_ray(s, r);
    long slot = ray_offsets[r];
    for (int i = 0; i < ray.kept_linear + s.n_background; ++i) {
        float z, dist, y[3];
        unbounded_sample(s, ray, r, i, &z, &dist, y);
        if (alpha.data != nullptr && !(alpha_at(alpha, y) > 0.0f)) continue;
        for (int a = 0; a < 3; ++a) xyz_out[3 * slot + a] = y[a];
        z_out[slot] = z;
        dist_out[slot] = dist;
        ray_index_out[slot] = (int)r;
        ++slot;
    }
}

__global__ void alpha_lookup_kernel(AlphaVolume volume, const float* xyz, long n, float* alpha) {
    long p = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n) alpha[p] = alpha_at(volume, xyz + 3 * p);
}

// Returns the number of kept samples (copied back to the host to size the outputs).
inline long march_rays_cuda(const RaySteps& m, const float* aabb, const AlphaVolume& alpha, long n_rays,
                            float* xyz_out, float* z_out, float* dist_out, int* ray_index_out, int* ray_offsets) {
    const unsigned blocks = (unsigned)((n_rays + 127) / 128);
    march_count_kernel<<<blocks, 128>>>(m, aabb, alpha, n_rays, ray_offsets);
    prefix_sum_kernel<<<1, 1>>>(ray_offsets, n_rays);
    march_write_kernel<<<blocks, 128>>>(m, aabb, alpha, n_rays, ray_offsets, xyz_out, z_out, dist_out, ray_index_out);
    int kept = 0;
    cudaMemcpy(&kept, ray_offsets + n_rays, sizeof(int), cudaMemcpyDeviceToHost);
    return kept;
}

inline long march_unbounded_cuda(const UnboundedSteps& s, const AlphaVolume& alpha, long n_rays, float* xyz_out,
                                 float* z_out, float* dist_out, int* ray_index_out, int* ray_offsets) {
    const unsigned blocks = (unsigned)((n_rays + 127) / 128);
    unbounded_count_kernel<<<blocks, 128>>>(s, alpha, n_rays, ray_offsets);
    prefix_sum_kernel<<<1, 1>>>(ray_offsets, n_rays);
    unbounded_write_kernel<<<blocks, 128>>>(s, alpha, n_rays, ray_offsets, xyz_out, z_out, dist_out,
                                            ray_index_out);
    int kept = 0;
    cudaMemcpy(&kept, ray_offsets + n_rays, sizeof(int), cudaMemcpyDeviceToHost);
    return kept;
}

inline void rays_hit_alpha_cuda(const RaySteps& m, const AlphaVolume& alpha, long n_rays, bool* hit) {
    if (n_rays == 0) return;
    rays_hit_alpha_kernel<<<(unsigned)((n_rays + 127) / 128), 128>>>(m, alpha, n_rays, hit);
}

inline void alpha_lookup_cuda(const AlphaVolume& volume, const float* xyz, long n, float* alpha) {
    if (n == 0) return;
    alpha_lookup_kernel<<<(unsigned)((n + 255) / 256), 256>>>(volume, xyz, n, alpha);
}

}  // namespace tensorf_kernels
