// Adam's update of one parameter on the GPU, one thread per value (adam_common.h). The
// coefficients are read on the device: the step needs no copy to the host.
#pragma once

#include <cuda_runtime.h>

#include "adam_common.h"

namespace tensorf_kernels {

__global__ void adam_update_kernel(const float* param, const float* grad, const float* m, const float* v, long n,
                                   const float* coefficients, const int* position, long n_params, float eps,
                                   float* new_param, float* new_m, float* new_v) {
    const AdamCoefficients c = adam_coefficients(coefficients, position[0], n_params);
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        adam_update_one(c, eps, param, grad, m, v, i, new_param, new_m, new_v);
}

inline void adam_update_cuda(const float* param, const float* grad, const float* m, const float* v, long n,
                             const float* coefficients, const int* position, long n_params, float eps,
                             float* new_param, float* new_m, float* new_v) {
    if (n <= 0) return;
    const long blocks = (n + 255) / 256;
    adam_update_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256>>>(
        param, grad, m, v, n, coefficients, position, n_params, eps, new_param, new_m, new_v);
}

}  // namespace tensorf_kernels
