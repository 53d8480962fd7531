// CP decomposition geometry shared by the CPU and CUDA kernels (host and device).
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

struct CPLines {
    const float* line[3];  // [L_i, C] channel-last; line i runs along vec_axis(i)
    int length[3];
    int channels;          // C, the same for the three lines
};

// Per-point geometry of the three lines: two texels and weights each.
struct CPLookup {
    long texel[3][2];
    float weight[3][2];
};

TJT_HD CPLookup cp_lookup(const float* point, const CPLines& g) {
    CPLookup a;
    for (int i = 0; i < 3; ++i) {
        Span s = span_of(point[vec_axis(i)], g.length[i]);
        for (int k = 0; k < 2; ++k) {
            a.texel[i][k] = (long)s.index[k] * g.channels;
            a.weight[i][k] = s.weight[k];
        }
    }
    return a;
}

// The three line values of component c at a looked-up point.
TJT_HD void cp_values(const CPLookup& a, const CPLines& g, int c, float value[3]) {
    for (int i = 0; i < 3; ++i)
        value[i] = a.weight[i][0] * g.line[i][a.texel[i][0] + c] + a.weight[i][1] * g.line[i][a.texel[i][1] + c];
}

}  // namespace tensorf_kernels
