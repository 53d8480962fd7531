// Trilinear lookup in the alpha grid (host and device). The volume is stored z-first,
// [D, H, W], and addressed with (x, y, z) coordinates, as F.grid_sample does.
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

struct AlphaVolume {
    const float* data;   // [D, H, W]; nullptr when there is no alpha grid
    int depth, height, width;
    float aabb_min[3];   // the grid's own box (it keeps the box it was built in)
    float inv_half[3];   // 2 / (aabb_max - aabb_min)
};

TJT_HD float alpha_at(const AlphaVolume& v, const float* xyz) {
    float coord[3];
    for (int a = 0; a < 3; ++a) coord[a] = mul_rn(xyz[a] - v.aabb_min[a], v.inv_half[a]) - 1.0f;
    Span sx = span_of(coord[0], v.width), sy = span_of(coord[1], v.height), sz = span_of(coord[2], v.depth);
    float value = 0.0f;
    for (int dz = 0; dz < 2; ++dz)
        for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx) {
                float w = sx.weight[dx] * sy.weight[dy] * sz.weight[dz];
                value += w * v.data[((long)sz.index[dz] * v.height + sy.index[dy]) * v.width + sx.index[dx]];
            }
    return value;
}

}  // namespace tensorf_kernels
