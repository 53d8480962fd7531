// Shading MLP input rows on the CPU (OpenMP), one row per loop iteration (encoding_common.h).
#pragma once

#include <omp.h>

#include "encoding_common.h"

namespace tensorf_kernels {

template <class Layout>
inline void encode_forward_cpu(const float* const* inputs, long rows, float* out) {
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < rows; ++m) Layout::forward(inputs, m, out + m * Layout::row_width());
}

template <class Layout>
inline void encode_backward_cpu(const float* row, int width0, long rows, const float* grad_rows, float* grad_first) {
    const int width = Layout::row_width();
    #pragma omp parallel for schedule(static)
    for (long m = 0; m < rows; ++m)
        Layout::backward(row + m * width, grad_rows + m * width, grad_first + m * width0, width0);
}

}  // namespace tensorf_kernels
