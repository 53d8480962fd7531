// Adam's update of one parameter on the CPU (OpenMP): one pass that reads the parameter, its
// gradient and both moments and writes the three new tensors (adam_common.h).
#pragma once

#include "adam_common.h"

namespace tensorf_kernels {

inline void adam_update_cpu(const float* param, const float* grad, const float* m, const float* v, long n,
                            const float* coefficients, const int* position, long n_params, float eps,
                            float* new_param, float* new_m, float* new_v) {
    const AdamCoefficients c = adam_coefficients(coefficients, position[0], n_params);
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) adam_update_one(c, eps, param, grad, m, v, i, new_param, new_m, new_v);
}

}  // namespace tensorf_kernels
