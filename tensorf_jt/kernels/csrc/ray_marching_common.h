// Sample placement shared by the CPU and CUDA ray-marching kernels (host and device).
// Positions follow the reference's float32 evaluation order exactly --
//   z = t_start + step * (k + jitter),   xyz = o + d * z
// -- with every product rounded on its own (no fused multiply-add), so that samples land on
// the same side of the box faces as in PyTorch.
#pragma once

#include <string>

#include "alpha_lookup.h"

namespace tensorf_kernels {

// Each ray's fixed-step samples. (Member names differ from the glue's input names, which are
// macros there: see kernels/source.py.)
struct RaySteps {
    const float* origins;     // [R, 3]
    const float* directions;  // [R, 3]
    const float* starts;      // [R], t of sample 0
    const float* jitters;     // [R], in [0, 1) when training; nullptr: no jitter
    float step_size;
    int n_samples;
};

// z of sample k of ray r.
TJT_HD float sample_depth(const RaySteps& s, long r, int k) {
    return s.starts[r] + mul_rn(s.step_size, (float)k + (s.jitters ? s.jitters[r] : 0.0f));
}

TJT_HD void sample_point(const RaySteps& s, long r, float z, float* xyz) {
    for (int a = 0; a < 3; ++a) xyz[a] = s.origins[3 * r + a] + mul_rn(s.directions[3 * r + a], z);
}

// Inside the box aabb [2, 3] and, when there is an alpha grid, where it is occupied.
TJT_HD bool keep_sample(const float* aabb, const AlphaVolume& alpha, const float* xyz) {
    for (int a = 0; a < 3; ++a)
        if (xyz[a] < aabb[a] || xyz[a] > aabb[3 + a]) return false;
    return alpha.data == nullptr || alpha_at(alpha, xyz) > 0.0f;
}

}  // namespace tensorf_kernels
