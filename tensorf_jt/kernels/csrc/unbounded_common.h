// Samples of unbounded rays, shared by the CPU and CUDA kernels (host and device): the same
// samples, in the same float32 arithmetic, as UnboundedSampler.dense (rendering/samplers.py),
// one rounding at a time, and mip-NeRF 360's contraction of their positions into model space
// (rendering/contraction.py).
#pragma once

#include <cmath>

#include "alpha_lookup.h"

namespace tensorf_kernels {

// a / b rounded on its own: never turned into a product with a reused reciprocal (-Ofast).
TJT_HD float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    volatile float quotient = a / b;
    return quotient;
#endif
}

struct Contraction {
    float center[3];    // of the foreground box
    float inv_half[3];  // 1 / its half-sizes
};

// World point -> model space: u = (x - center) / half, then u, or (2 - 1/|u|) u / |u| past |u| = 1,
// with |u| the largest |u_a|.
TJT_HD void contract_point(const Contraction& c, const float* x, float* y) {
    float u[3];
    for (int a = 0; a < 3; ++a) u[a] = mul_rn(x[a] - c.center[a], c.inv_half[a]);
    float length = fabsf(u[0]);
    length = fabsf(u[1]) > length ? fabsf(u[1]) : length;
    length = fabsf(u[2]) > length ? fabsf(u[2]) : length;
    if (length <= 1.0f) {
        for (int a = 0; a < 3; ++a) y[a] = u[a];
        return;
    }
    volatile float inverse = div_rn(1.0f, length);
    volatile float scale = div_rn(2.0f - inverse, length);
    for (int a = 0; a < 3; ++a) y[a] = mul_rn(u[a], scale);
}

// a + b and a - b rounded on their own: never reassociated with a neighbouring operation (-Ofast).
TJT_HD float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    volatile float sum = a + b;
    return sum;
#endif
}

TJT_HD float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    volatile float difference = a - b;
    return difference;
#endif
}

struct UnboundedSteps {
    const float* origins;     // [R, 3] world
    const float* directions;  // [R, 3] unit
    const float* jitters;     // [R], in [0, 1) when training, else 0
    const float* enters;      // [R] where each ray enters the foreground box (+inf: it misses it)
    const float* exits;       // [R] where its background run starts: the box's far side, or
                              //     the closest approach to the box's centre for a ray that misses
    Contraction contraction;
    float near, step, inv_background;
    int n_linear, n_background;
};

// What a ray's samples depend on besides their index.
struct UnboundedRay {
    float start;        // t of the linear run's first step
    float background;   // s: where the background run starts
    int kept_linear;    // linear samples kept (inside the box, a ray that hits it)
    float jitter;
};

TJT_HD float linear_depth(const UnboundedSteps& s, const UnboundedRay& ray, int k) {
    return ray.start + mul_rn(s.step, (float)k + ray.jitter);
}

TJT_HD float background_depth(const UnboundedSteps& s, const UnboundedRay& ray, int k) {
    // 1 - (k + j) / (n + 1) as ((n - k) + (1 - j)) / (n + 1): never 0 for j < 1.
    float left = add_rn((float)(s.n_background - k), sub_rn(1.0f, ray.jitter));
    return div_rn(ray.background, mul_rn(left, s.inv_background));
}

TJT_HD UnboundedRay unbounded_ray(const UnboundedSteps& s, long r) {
    const float t_enter = s.enters[r], t_exit = s.exits[r];
    bool hits = t_exit > (t_enter > s.near ? t_enter : s.near);
    UnboundedRay ray;
    ray.jitter = s.jitters[r];
    ray.start = t_enter > s.near ? t_enter : s.near;
    ray.background = t_exit > s.near ? t_exit : s.near;
    ray.kept_linear = 0;
    if (hits)
        while (ray.kept_linear < s.n_linear && linear_depth(s, ray, ray.kept_linear) <= t_exit) ++ray.kept_linear;
    return ray;
}

// Sample i (0 <= i < kept_linear + n_background) of ray r: its depth z, the gap to the ray's
// next sample (for the last, to where a next background sample would be), and its model-space
// position y.
TJT_HD void unbounded_sample(const UnboundedSteps& s, const UnboundedRay& ray, long r, int i, float* z, float* dist,
                             float* y) {
    float t, gap;
    if (i < ray.kept_linear) {
        t = linear_depth(s, ray, i);
        gap = (i + 1 < ray.kept_linear ? linear_depth(s, ray, i + 1) : background_depth(s, ray, 0)) - t;
    } else {
        int k = i - ray.kept_linear;
        t = background_depth(s, ray, k);
        gap = background_depth(s, ray, k + 1) - t;
    }
    *z = t;
    *dist = gap;
    float x[3];
    for (int a = 0; a < 3; ++a) x[a] = s.origins[3 * r + a] + mul_rn(s.directions[3 * r + a], t);
    contract_point(s.contraction, x, y);
}

}  // namespace tensorf_kernels
