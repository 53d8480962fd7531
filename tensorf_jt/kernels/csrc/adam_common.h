// Adam's update of one value, in the arithmetic order of torch.optim.Adam's single-tensor path
// (training/optimizer.py, TorchAdam, spells it out). The per-parameter coefficients (bias
// corrections and the identity for a parameter without gradient) come from a table
// [5, n_params]: negative step size, sqrt of the second bias correction, 1 - beta1, beta2 and
// 1 - beta2, each row indexed by the parameter's position in its group.
// Products are rounded on their own (mul_rn), as torch's separate kernels round them.
#pragma once

#include "grid_common.h"

namespace tensorf_kernels {

struct AdamCoefficients {
    float neg_step_size, bias_correction2_sqrt, weight1, decay2, weight2;
};

TJT_HD AdamCoefficients adam_coefficients(const float* table, long position, long n_params) {
    AdamCoefficients c;
    c.neg_step_size = table[position];
    c.bias_correction2_sqrt = table[n_params + position];
    c.weight1 = table[2 * n_params + position];
    c.decay2 = table[3 * n_params + position];
    c.weight2 = table[4 * n_params + position];
    return c;
}

TJT_HD void adam_update_one(const AdamCoefficients& c, float eps, const float* param, const float* grad,
                                     const float* m, const float* v, long i, float* new_param, float* new_m,
                                     float* new_v) {
    const float g = grad[i];
    const float m1 = m[i] + mul_rn(c.weight1, g - m[i]);
    const float v1 = mul_rn(v[i], c.decay2) + mul_rn(mul_rn(c.weight2, g), g);
    const float denom = sqrtf(v1) / c.bias_correction2_sqrt + eps;
    new_param[i] = param[i] + mul_rn(c.neg_step_size, m1) / denom;
    new_m[i] = m1;
    new_v[i] = v1;
}

}  // namespace tensorf_kernels
