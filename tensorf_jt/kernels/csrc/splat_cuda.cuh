// 3D Gaussian splatting on the GPU: the same stages and results as splat_cpu.h, one thread per
// splat (projection, binning) or per pixel (compositing, a 16 x 16 block per tile); the
// compositing's backward adds its gradients atomically.
#pragma once

#include <cuda_runtime.h>

#include "splat_common.h"

namespace tensorf_kernels {

__global__ void splat_project_forward_kernel(const float* means, const float* log_scales, const float* quats,
                                             const float* logits, const float* sh, long n, int degree,
                                             const float* camera, int width, int height, float* uv, float* conic,
                                             float* depth, int* radius, int* rect, float* rgb, float* opacity,
                                             int* tiles) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const SplatCamera cam = splat_camera(camera, width, height);
    const int K = (degree + 1) * (degree + 1);
    SplatProjection f;
    splat_project_one(cam, means + 3 * i, log_scales + 3 * i, quats + 4 * i, logits[i], sh + 3 * K * i, degree, f);
    uv[2 * i] = f.visible ? f.u : 0.0f;
    uv[2 * i + 1] = f.visible ? f.v : 0.0f;
    for (int k = 0; k < 3; ++k) {
        conic[3 * i + k] = f.visible ? f.conic[k] : 0.0f;
        rgb[3 * i + k] = f.visible ? f.rgb[k] : 0.0f;
    }
    depth[i] = f.visible ? f.p[2] : 0.0f;
    radius[i] = f.visible ? f.radius : 0;
    for (int k = 0; k < 4; ++k) rect[4 * i + k] = f.visible ? f.rect[k] : 0;
    opacity[i] = f.visible ? f.opacity : 0.0f;
    tiles[i] = f.visible ? (f.rect[1] - f.rect[0]) * (f.rect[3] - f.rect[2]) : 0;
}

__global__ void splat_project_backward_kernel(const float* means, const float* log_scales, const float* quats,
                                              const float* logits, const float* sh, long n, int degree,
                                              const float* camera, int width, int height, const float* g_uv,
                                              const float* g_conic, const float* g_rgb, const float* g_opacity,
                                              float* g_means, float* g_log_scales, float* g_quats, float* g_sh,
                                              float* g_logits) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const SplatCamera cam = splat_camera(camera, width, height);
    const int K = (degree + 1) * (degree + 1);
    SplatProjection f;
    splat_project_one(cam, means + 3 * i, log_scales + 3 * i, quats + 4 * i, logits[i], sh + 3 * K * i, degree, f);
    splat_project_one_backward(cam, means + 3 * i, sh + 3 * K * i, degree, f, g_uv + 2 * i, g_conic + 3 * i,
                               g_rgb + 3 * i, g_opacity[i], g_means + 3 * i, g_log_scales + 3 * i, g_quats + 4 * i,
                               g_sh + 3 * K * i, g_logits + i);
}

__global__ void splat_bin_kernel(const int* rect, const float* depth, const int* tiles, const int* offsets, long n,
                                 int gx, double* keys, int* ids) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || tiles[i] == 0) return;
    long at = offsets[i];
    for (int ty = rect[4 * i + 2]; ty < rect[4 * i + 3]; ++ty)
        for (int tx = rect[4 * i]; tx < rect[4 * i + 1]; ++tx) {
            keys[at] = splat_sort_key(ty * gx + tx, depth[i]);
            ids[at] = (int)i;
            ++at;
        }
}

__global__ void splat_tile_starts_kernel(const double* sorted_keys, long m, int* tile_offsets) {
    long k = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= m) return;
    const int tile = splat_key_tile(sorted_keys[k]);
    if (k == 0 || splat_key_tile(sorted_keys[k - 1]) != tile) tile_offsets[tile] = (int)k;
}

__global__ void splat_fill_kernel(int* values, long count, int value) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) values[i] = value;
}

__global__ void splat_tile_fill_kernel(int* tile_offsets, int n_tiles) {
    for (int t = n_tiles - 1; t >= 0; --t)
        if (tile_offsets[t] > tile_offsets[t + 1]) tile_offsets[t] = tile_offsets[t + 1];
}

__global__ void splat_render_forward_kernel(const float* uv, const float* conic, const float* rgb,
                                            const float* opacity, const float* depth, const int* ids,
                                            const int* tile_offsets, const float* background, int width,
                                            int height, float* image, float* depth_image, float* transmittance,
                                            int* n_contrib) {
    const int x = blockIdx.x * SPLAT_TILE + threadIdx.x, y = blockIdx.y * SPLAT_TILE + threadIdx.y;
    if (x >= width || y >= height) return;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    const int begin = tile_offsets[tile], end = tile_offsets[tile + 1];
    const float px = (float)x + 0.5f, py = (float)y + 0.5f;
    float T = 1.0f, C[3] = {0.0f, 0.0f, 0.0f}, D = 0.0f;
    int last = 0;
    for (int k = begin; k < end; ++k) {
        const int g = ids[k];
        float dx, dy, G, alpha;
        bool clamped;
        if (!splat_alpha(uv, conic, opacity, g, px, py, dx, dy, G, alpha, clamped)) continue;
        const float next = T * (1.0f - alpha);
        if (next < SPLAT_MIN_TRANSMITTANCE) break;
        for (int c = 0; c < 3; ++c) C[c] += rgb[3 * g + c] * alpha * T;
        D += depth[g] * alpha * T;
        T = next;
        last = k - begin + 1;
    }
    const long pixel = (long)y * width + x;
    for (int c = 0; c < 3; ++c) image[3 * pixel + c] = C[c] + T * background[c];
    depth_image[pixel] = D;
    transmittance[pixel] = T;
    n_contrib[pixel] = last;
}

__global__ void splat_render_backward_kernel(const float* uv, const float* conic, const float* rgb,
                                             const float* opacity, const int* ids, const int* tile_offsets,
                                             const float* background, int width, int height,
                                             const float* transmittance, const int* n_contrib, const float* g_image,
                                             float* g_uv, float* g_conic, float* g_rgb, float* g_opacity) {
    const int x = blockIdx.x * SPLAT_TILE + threadIdx.x, y = blockIdx.y * SPLAT_TILE + threadIdx.y;
    if (x >= width || y >= height) return;
    const int tile = blockIdx.y * gridDim.x + blockIdx.x;
    const int begin = tile_offsets[tile];
    const long pixel = (long)y * width + x;
    const float px = (float)x + 0.5f, py = (float)y + 0.5f;
    const float T_final = transmittance[pixel];
    const float* g_pix = g_image + 3 * pixel;
    const float bg_dot = background[0] * g_pix[0] + background[1] * g_pix[1] + background[2] * g_pix[2];
    float T = T_final, behind[3] = {0.0f, 0.0f, 0.0f}, last_alpha = 0.0f, last_rgb[3] = {0.0f, 0.0f, 0.0f};
    for (int k = begin + n_contrib[pixel] - 1; k >= begin; --k) {
        const int g = ids[k];
        float dx, dy, G, alpha;
        bool clamped;
        if (!splat_alpha(uv, conic, opacity, g, px, py, dx, dy, G, alpha, clamped)) continue;
        T = T / (1.0f - alpha);
        const float weight = alpha * T;
        float g_alpha = 0.0f;
        for (int c = 0; c < 3; ++c) {
            behind[c] = last_alpha * last_rgb[c] + (1.0f - last_alpha) * behind[c];
            last_rgb[c] = rgb[3 * g + c];
            g_alpha += (rgb[3 * g + c] - behind[c]) * g_pix[c];
            atomicAdd(g_rgb + 3 * g + c, weight * g_pix[c]);
        }
        g_alpha = g_alpha * T - T_final / (1.0f - alpha) * bg_dot;
        last_alpha = alpha;
        if (clamped) continue;
        const float g_G = opacity[g] * g_alpha;
        const float gdx = G * dx, gdy = G * dy;
        const float* con = conic + 3 * g;
        atomicAdd(g_opacity + g, G * g_alpha);
        atomicAdd(g_uv + 2 * g, g_G * (-gdx * con[0] - gdy * con[1]));
        atomicAdd(g_uv + 2 * g + 1, g_G * (-gdy * con[2] - gdx * con[1]));
        atomicAdd(g_conic + 3 * g, -0.5f * gdx * dx * g_G);
        atomicAdd(g_conic + 3 * g + 1, -gdx * dy * g_G);
        atomicAdd(g_conic + 3 * g + 2, -0.5f * gdy * dy * g_G);
    }
}

inline unsigned splat_blocks(long count) { return (unsigned)((count + 255) / 256); }

inline void splat_project_forward_cuda(const float* means, const float* log_scales, const float* quats,
                                       const float* logits, const float* sh, long n, int degree, const float* camera,
                                       int width, int height, float* uv, float* conic, float* depth, int* radius,
                                       int* rect, float* rgb, float* opacity, int* tiles) {
    if (n == 0) return;
    splat_project_forward_kernel<<<splat_blocks(n), 256>>>(means, log_scales, quats, logits, sh, n, degree, camera,
                                                           width, height, uv, conic, depth, radius, rect, rgb,
                                                           opacity, tiles);
}

inline void splat_project_backward_cuda(const float* means, const float* log_scales, const float* quats,
                                        const float* logits, const float* sh, long n, int degree, const float* camera,
                                        int width, int height, const float* g_uv, const float* g_conic,
                                        const float* g_rgb, const float* g_opacity, float* g_means,
                                        float* g_log_scales, float* g_quats, float* g_sh, float* g_logits) {
    if (n == 0) return;
    splat_project_backward_kernel<<<splat_blocks(n), 256>>>(means, log_scales, quats, logits, sh, n, degree, camera,
                                                            width, height, g_uv, g_conic, g_rgb, g_opacity, g_means,
                                                            g_log_scales, g_quats, g_sh, g_logits);
}

inline void splat_bin_cuda(const int* rect, const float* depth, const int* tiles, const int* offsets, long n,
                           int width, double* keys, int* ids) {
    if (n == 0) return;
    splat_bin_kernel<<<splat_blocks(n), 256>>>(rect, depth, tiles, offsets, n, splat_tiles_x(width), keys, ids);
}

inline void splat_tile_ranges_cuda(const double* sorted_keys, long m, int n_tiles, int* tile_offsets) {
    splat_fill_kernel<<<splat_blocks(n_tiles + 1), 256>>>(tile_offsets, n_tiles + 1, (int)m);
    if (m > 0) splat_tile_starts_kernel<<<splat_blocks(m), 256>>>(sorted_keys, m, tile_offsets);
    splat_tile_fill_kernel<<<1, 1>>>(tile_offsets, n_tiles);
}

inline void splat_render_forward_cuda(const float* uv, const float* conic, const float* rgb, const float* opacity,
                                      const float* depth, const int* ids, const int* tile_offsets,
                                      const float* background, int width, int height, long n_splats,
                                      float* image, float* depth_image, float* transmittance, int* n_contrib) {
    dim3 grid(splat_tiles_x(width), splat_tiles_y(height)), block(SPLAT_TILE, SPLAT_TILE);
    splat_render_forward_kernel<<<grid, block>>>(uv, conic, rgb, opacity, depth, ids, tile_offsets, background, width,
                                                 height, image, depth_image, transmittance, n_contrib);
}

inline void splat_render_backward_cuda(const float* uv, const float* conic, const float* rgb, const float* opacity,
                                       const int* ids, const int* tile_offsets, const float* background, int width,
                                       int height, const float* transmittance, const int* n_contrib,
                                       const float* g_image, long n, float* g_uv, float* g_conic, float* g_rgb,
                                       float* g_opacity) {
    cudaMemset(g_uv, 0, 2 * n * sizeof(float));
    cudaMemset(g_conic, 0, 3 * n * sizeof(float));
    cudaMemset(g_rgb, 0, 3 * n * sizeof(float));
    cudaMemset(g_opacity, 0, n * sizeof(float));
    dim3 grid(splat_tiles_x(width), splat_tiles_y(height)), block(SPLAT_TILE, SPLAT_TILE);
    splat_render_backward_kernel<<<grid, block>>>(uv, conic, rgb, opacity, ids, tile_offsets, background, width,
                                                  height, transmittance, n_contrib, g_image, g_uv, g_conic, g_rgb,
                                                  g_opacity);
}

}  // namespace tensorf_kernels
