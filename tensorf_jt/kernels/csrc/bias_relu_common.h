// A hidden layer's epilogue: bias and ReLU on the matrix product z [rows, C].
//   forward:  h = max(z + b, 0)
//   backward: dz = dh where h > 0, else 0 (torch's threshold_backward on the output), and
//             db = the column sums of dz
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

TJT_HD float bias_relu(float z, float b) {
    const float h = z + b;
    return h > 0.0f ? h : 0.0f;
}

TJT_HD float relu_grad(float h, float dh) { return h > 0.0f ? dh : 0.0f; }

}  // namespace tensorf_kernels
