// Shading MLP input rows on the GPU, one row per thread (encoding_common.h).
#pragma once

#include <cuda_runtime.h>

#include "encoding_common.h"

namespace tensorf_kernels {

constexpr int kMaxEncodingInputs = 4;

struct EncodingInputs {
    const float* data[kMaxEncodingInputs];  // passed by value: the pointers reach the device
};

template <class Layout>
__global__ void encode_forward_kernel(EncodingInputs in, long rows, float* out) {
    long m = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (m < rows) Layout::forward(in.data, m, out + m * Layout::row_width());
}

template <class Layout>
__global__ void encode_backward_kernel(const float* row, int width0, long rows, const float* grad_rows,
                                       float* grad_first) {
    long m = (long)blockIdx.x * blockDim.x + threadIdx.x;
    const int width = Layout::row_width();
    if (m < rows) Layout::backward(row + m * width, grad_rows + m * width, grad_first + m * width0, width0);
}

template <class Layout>
inline void encode_forward_cuda(const float* const* inputs, long rows, float* out) {
    EncodingInputs in = {{inputs[0], inputs[1], inputs[2], inputs[3]}};
    if (rows > 0) encode_forward_kernel<Layout><<<(unsigned)((rows + 255) / 256), 256>>>(in, rows, out);
}

template <class Layout>
inline void encode_backward_cuda(const float* row, int width0, long rows, const float* grad_rows, float* grad_first) {
    if (rows > 0)
        encode_backward_kernel<Layout><<<(unsigned)((rows + 255) / 256), 256>>>(row, width0, rows, grad_rows,
                                                                               grad_first);
}

}  // namespace tensorf_kernels
