// VM decomposition geometry shared by the CPU and CUDA kernels (host and device).
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

struct VMGrids {
    const float* plane[3];  // [H, W, C] channel-last
    const float* line[3];   // [L, C]
    int height[3], width[3], length[3], channels[3];
};

TJT_HD int total_channels(const VMGrids& g) { return g.channels[0] + g.channels[1] + g.channels[2]; }

TJT_HD int max_channels(const VMGrids& g) {
    int m = g.channels[0];
    for (int i = 1; i < 3; ++i) m = g.channels[i] > m ? g.channels[i] : m;
    return m;
}

// Per-point geometry of one axis: the four plane texels and two line texels, with weights.
struct AxisLookup {
    long texel[4];
    float corner_weight[4];
    long line_texel[2];
    float line_weight[2];
};

TJT_HD AxisLookup axis_lookup(const float* point, const VMGrids& g, int i) {
    const int C = g.channels[i], W = g.width[i];
    Span su = span_of(point[mat0(i)], W);
    Span sv = span_of(point[mat1(i)], g.height[i]);
    Span st = span_of(point[vec_axis(i)], g.length[i]);
    AxisLookup a;
    for (int dy = 0; dy < 2; ++dy)
        for (int dx = 0; dx < 2; ++dx) {
            a.texel[2 * dy + dx] = ((long)sv.index[dy] * W + su.index[dx]) * C;
            a.corner_weight[2 * dy + dx] = su.weight[dx] * sv.weight[dy];
        }
    for (int k = 0; k < 2; ++k) {
        a.line_texel[k] = (long)st.index[k] * C;
        a.line_weight[k] = st.weight[k];
    }
    return a;
}

}  // namespace tensorf_kernels
