// Sample placement shared by the CPU and CUDA ray-marching kernels (host and device).
// Positions follow the reference's float32 evaluation order exactly --
//   z = t_start + step * (k + jitter),   xyz = o + d * z
// -- with every product rounded on its own (no fused multiply-add), so that samples land on
// the same side of the box faces as in PyTorch.
#pragma once

#include <string>

#include "alpha_lookup.h"

namespace tensorf_kernels {

struct MarchParams {
    const float* rays_o;   // [R, 3]
    const float* rays_d;   // [R, 3]
    const float* t_start;  // [R]
    const float* jitter;   // [R], in [0, 1) when training, else 0
    const float* aabb;     // [2, 3]
    AlphaVolume alpha;     // alpha.data == nullptr: no alpha grid
    float step_size;
    int n_samples;
};

// z of sample k of ray r.
TJT_HD float sample_depth(const MarchParams& m, long r, int k) {
    return m.t_start[r] + mul_rn(m.step_size, (float)k + m.jitter[r]);
}

TJT_HD void sample_point(const MarchParams& m, long r, float z, float* xyz) {
    for (int a = 0; a < 3; ++a) xyz[a] = m.rays_o[3 * r + a] + mul_rn(m.rays_d[3 * r + a], z);
}

TJT_HD bool keep_sample(const MarchParams& m, const float* xyz) {
    for (int a = 0; a < 3; ++a)
        if (xyz[a] < m.aabb[a] || xyz[a] > m.aabb[3 + a]) return false;
    return m.alpha.data == nullptr || alpha_at(m.alpha, xyz) > 0.0f;
}

}  // namespace tensorf_kernels
