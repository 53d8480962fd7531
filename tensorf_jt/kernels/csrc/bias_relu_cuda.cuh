// Bias and ReLU of a hidden layer on the GPU (bias_relu_common.h): one thread per value
// forward; backward, each block takes a run of rows, its threads the columns, and adds its
// column sums into the bias gradient (atomics, one per block and column).
#pragma once

#include <cuda_runtime.h>

#include "bias_relu_common.h"

namespace tensorf_kernels {

__global__ void bias_relu_forward_kernel(const float* z, const float* bias, long total, int C, float* h) {
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x)
        h[i] = bias_relu(z[i], bias[i % C]);
}

constexpr int kBiasReluRowsPerBlock = 64;

__global__ void bias_relu_backward_kernel(const float* h, const float* grad_h, long rows, int C, float* grad_z,
                                          float* grad_bias) {
    const long first = (long)blockIdx.x * kBiasReluRowsPerBlock;
    const long last = first + kBiasReluRowsPerBlock < rows ? first + kBiasReluRowsPerBlock : rows;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float sum = 0.0f;
        for (long n = first; n < last; ++n) {
            const float dz = relu_grad(h[n * C + c], grad_h[n * C + c]);
            grad_z[n * C + c] = dz;
            sum += dz;
        }
        atomicAdd(grad_bias + c, sum);
    }
}

inline void bias_relu_forward_cuda(const float* z, const float* bias, long rows, int C, float* h) {
    const long total = rows * C;
    if (total <= 0) return;
    const long blocks = (total + 255) / 256;
    bias_relu_forward_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256>>>(z, bias, total, C, h);
}

inline void bias_relu_backward_cuda(const float* h, const float* grad_h, long rows, int C, float* grad_z,
                                    float* grad_bias) {
    cudaMemsetAsync(grad_bias, 0, sizeof(float) * C);
    if (rows <= 0) return;
    const long blocks = (rows + kBiasReluRowsPerBlock - 1) / kBiasReluRowsPerBlock;
    bias_relu_backward_kernel<<<(unsigned)blocks, C < 256 ? C : 256>>>(h, grad_h, rows, C, grad_z, grad_bias);
}

}  // namespace tensorf_kernels
