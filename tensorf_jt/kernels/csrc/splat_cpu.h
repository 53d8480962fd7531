// 3D Gaussian splatting on the CPU (OpenMP): projection, tile binning, per-tile ranges,
// compositing, and the backward passes of projection and compositing (splat_common.h has the
// conventions). Splats run in parallel in the projection; tiles in the compositing, whose
// backward adds each pixel's gradients to its splats atomically.
#pragma once

#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "splat_common.h"

namespace tensorf_kernels {

inline void splat_project_forward_cpu(const float* means, const float* log_scales, const float* quats,
                                      const float* logits, const float* sh, long n, int degree, const float* camera,
                                      int width, int height, float* uv, float* conic, float* depth, int* radius,
                                      int* rect, float* rgb, float* opacity, int* tiles) {
    const SplatCamera cam = splat_camera(camera, width, height);
    const int K = (degree + 1) * (degree + 1);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
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
}

inline void splat_project_backward_cpu(const float* means, const float* log_scales, const float* quats,
                                       const float* logits, const float* sh, long n, int degree, const float* camera,
                                       int width, int height, const float* g_uv, const float* g_conic,
                                       const float* g_rgb, const float* g_opacity, float* g_means, float* g_log_scales,
                                       float* g_quats, float* g_sh, float* g_logits) {
    const SplatCamera cam = splat_camera(camera, width, height);
    const int K = (degree + 1) * (degree + 1);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
        SplatProjection f;
        splat_project_one(cam, means + 3 * i, log_scales + 3 * i, quats + 4 * i, logits[i], sh + 3 * K * i, degree, f);
        splat_project_one_backward(cam, means + 3 * i, sh + 3 * K * i, degree, f, g_uv + 2 * i, g_conic + 3 * i,
                                   g_rgb + 3 * i, g_opacity[i], g_means + 3 * i, g_log_scales + 3 * i, g_quats + 4 * i,
                                   g_sh + 3 * K * i, g_logits + i);
    }
}

// Every (tile, splat) pair a splat's rectangle covers, from its place `offsets[i]` (the
// exclusive sum of `tiles`) on: its sort key and the splat.
inline void splat_bin_cpu(const int* rect, const float* depth, const int* tiles, const int* offsets, long n, int width,
                          double* keys, int* ids) {
    const int gx = splat_tiles_x(width);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
        if (tiles[i] == 0) continue;
        long at = offsets[i];
        for (int ty = rect[4 * i + 2]; ty < rect[4 * i + 3]; ++ty)
            for (int tx = rect[4 * i]; tx < rect[4 * i + 1]; ++tx) {
                keys[at] = splat_sort_key(ty * gx + tx, depth[i]);
                ids[at] = (int)i;
                ++at;
            }
    }
}

// Where each tile's pairs start in the sorted keys: tile_offsets[n_tiles + 1].
inline void splat_tile_ranges_cpu(const double* sorted_keys, long m, int n_tiles, int* tile_offsets) {
    for (int t = 0; t <= n_tiles; ++t) tile_offsets[t] = (int)m;
    for (long k = m - 1; k >= 0; --k) tile_offsets[splat_key_tile(sorted_keys[k])] = (int)k;
    for (int t = n_tiles - 1; t >= 0; --t)
        if (tile_offsets[t] > tile_offsets[t + 1]) tile_offsets[t] = tile_offsets[t + 1];
}

// The least exponent at which splat g's alpha can reach 1/255: pairs below it are skipped
// without an exponential (the same skip as alpha < 1/255, up to rounding, in both passes).
inline std::vector<float> splat_min_powers(const float* opacity, long n) {
    std::vector<float> floor_power(n);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i)
        floor_power[i] = opacity[i] > 0.0f ? logf(SPLAT_MIN_ALPHA / opacity[i]) - 1e-4f : 1.0f;
    return floor_power;
}

inline void splat_render_forward_cpu(const float* uv, const float* conic, const float* rgb, const float* opacity,
                                     const float* depth, const int* ids, const int* tile_offsets,
                                     const float* background, int width, int height, long n_splats, float* image,
                                     float* depth_image, float* transmittance, int* n_contrib) {
    const std::vector<float> floor_power = splat_min_powers(opacity, n_splats);
    const int gx = splat_tiles_x(width), n_tiles = gx * splat_tiles_y(height);
    #pragma omp parallel for schedule(dynamic)
    for (int tile = 0; tile < n_tiles; ++tile) {
        const int x0 = (tile % gx) * SPLAT_TILE, y0 = (tile / gx) * SPLAT_TILE;
        const int begin = tile_offsets[tile], end = tile_offsets[tile + 1];
        for (int y = y0; y < y0 + SPLAT_TILE && y < height; ++y)
            for (int x = x0; x < x0 + SPLAT_TILE && x < width; ++x) {
                const float px = (float)x + 0.5f, py = (float)y + 0.5f;
                float T = 1.0f, C[3] = {0.0f, 0.0f, 0.0f}, D = 0.0f;
                int last = 0;
                for (int k = begin; k < end; ++k) {
                    const int g = ids[k];
                    const float dx = uv[2 * g] - px, dy = uv[2 * g + 1] - py;
                    const float* con = conic + 3 * g;
                    const float power = -0.5f * (con[0] * dx * dx + con[2] * dy * dy) - con[1] * dx * dy;
                    if (power > 0.0f || power < floor_power[g]) continue;
                    const float alpha = fminf(SPLAT_MAX_ALPHA, opacity[g] * expf(power));
                    if (alpha < SPLAT_MIN_ALPHA) continue;
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
    }
}

// Each thread sums its pixels' gradients in buffers of its own, added up at the end.
inline void splat_render_backward_cpu(const float* uv, const float* conic, const float* rgb, const float* opacity,
                                      const int* ids, const int* tile_offsets, const float* background, int width,
                                      int height, const float* transmittance, const int* n_contrib,
                                      const float* g_image, long n, float* g_uv, float* g_conic, float* g_rgb,
                                      float* g_opacity) {
    constexpr int W = 9;  // per splat: u, v, conic A B C, opacity, r g b
    const std::vector<float> floor_power = splat_min_powers(opacity, n);
    const int gx = splat_tiles_x(width), n_tiles = gx * splat_tiles_y(height);
    int n_threads = 1;
    #ifdef _OPENMP
    n_threads = omp_get_max_threads();
    #endif
    std::vector<float> sums((size_t)n_threads * n * W, 0.0f);
    #pragma omp parallel for schedule(dynamic)
    for (int tile = 0; tile < n_tiles; ++tile) {
        int thread = 0;
        #ifdef _OPENMP
        thread = omp_get_thread_num();
        #endif
        float* own = sums.data() + (size_t)thread * n * W;
        const int x0 = (tile % gx) * SPLAT_TILE, y0 = (tile / gx) * SPLAT_TILE;
        const int begin = tile_offsets[tile];
        for (int y = y0; y < y0 + SPLAT_TILE && y < height; ++y)
            for (int x = x0; x < x0 + SPLAT_TILE && x < width; ++x) {
                const long pixel = (long)y * width + x;
                const float px = (float)x + 0.5f, py = (float)y + 0.5f;
                const float T_final = transmittance[pixel];
                const float* g_pix = g_image + 3 * pixel;
                const float bg_dot = background[0] * g_pix[0] + background[1] * g_pix[1] + background[2] * g_pix[2];
                float T = T_final, behind[3] = {0.0f, 0.0f, 0.0f}, last_alpha = 0.0f, last_rgb[3] = {0.0f, 0.0f, 0.0f};
                for (int k = begin + n_contrib[pixel] - 1; k >= begin; --k) {
                    const int g = ids[k];
                    const float dx = uv[2 * g] - px, dy = uv[2 * g + 1] - py;
                    const float* con = conic + 3 * g;
                    const float power = -0.5f * (con[0] * dx * dx + con[2] * dy * dy) - con[1] * dx * dy;
                    if (power > 0.0f || power < floor_power[g]) continue;
                    const float G = expf(power), raw = opacity[g] * G;
                    const bool clamped = raw > SPLAT_MAX_ALPHA;
                    const float alpha = clamped ? SPLAT_MAX_ALPHA : raw;
                    if (alpha < SPLAT_MIN_ALPHA) continue;
                    float* s = own + (size_t)g * W;
                    T = T / (1.0f - alpha);
                    const float weight = alpha * T;
                    float g_alpha = 0.0f;
                    for (int c = 0; c < 3; ++c) {
                        behind[c] = last_alpha * last_rgb[c] + (1.0f - last_alpha) * behind[c];
                        last_rgb[c] = rgb[3 * g + c];
                        g_alpha += (rgb[3 * g + c] - behind[c]) * g_pix[c];
                        s[6 + c] += weight * g_pix[c];
                    }
                    g_alpha = g_alpha * T - T_final / (1.0f - alpha) * bg_dot;
                    last_alpha = alpha;
                    if (clamped) continue;
                    const float g_G = opacity[g] * g_alpha, gdx = G * dx, gdy = G * dy;
                    s[0] += g_G * (-gdx * con[0] - gdy * con[1]);
                    s[1] += g_G * (-gdy * con[2] - gdx * con[1]);
                    s[2] += -0.5f * gdx * dx * g_G;
                    s[3] += -gdx * dy * g_G;
                    s[4] += -0.5f * gdy * dy * g_G;
                    s[5] += G * g_alpha;
                }
            }
    }
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) {
        float total[W] = {0.0f};
        for (int t = 0; t < n_threads; ++t)
            for (int j = 0; j < W; ++j) total[j] += sums[((size_t)t * n + i) * W + j];
        g_uv[2 * i] = total[0]; g_uv[2 * i + 1] = total[1];
        g_conic[3 * i] = total[2]; g_conic[3 * i + 1] = total[3]; g_conic[3 * i + 2] = total[4];
        g_opacity[i] = total[5];
        for (int c = 0; c < 3; ++c) g_rgb[3 * i + c] = total[6 + c];
    }
}

}  // namespace tensorf_kernels
