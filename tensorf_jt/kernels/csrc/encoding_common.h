// The shading MLP's input row of one sample, shared by the CPU and CUDA kernels (host and
// device): raw inputs and their positional encodings, part after part. A part with kFreqs > 0
// holds sin(x * 2^k) for every dimension d of its input and every k (k fastest), then the
// matching cosines -- the order of the reference's torch.cat of positional_encoding.
// Layouts are compile-time lists of parts, so that each layout's loops have constant bounds.
#pragma once

#include <cmath>

#include "grid_common.h"

namespace tensorf_kernels {

// One part of the row: input kSlot ([M, kWidth]) raw (kFreqs == 0) or encoded.
template <int kSlot, int kWidth, int kFreqs>
struct EncodingPart {
    static constexpr int slot = kSlot;
    static constexpr int width = kFreqs == 0 ? kWidth : 2 * kWidth * kFreqs;  // columns of the row

    TJT_HD static int forward(const float* const* inputs, long m, float* row, int offset) {
        const float* source = inputs[kSlot] + m * kWidth;
        if (kFreqs == 0) {
            for (int d = 0; d < kWidth; ++d) row[offset + d] = source[d];
            return offset + width;
        }
        const int sin_at = offset, cos_at = offset + kWidth * kFreqs;
        for (int d = 0; d < kWidth; ++d) {
            float x = source[d], scale = 1.0f;
            for (int k = 0; k < kFreqs; ++k, scale *= 2.0f) {
                float angle = x * scale;
                row[sin_at + d * kFreqs + k] = sinf(angle);
                row[cos_at + d * kFreqs + k] = cosf(angle);
            }
        }
        return offset + width;
    }

    // Adds this part's d row / d input 0 times upstream to grad (only parts of input 0 do). The
    // sines and cosines are read from the row the forward pass wrote (the same numbers).
    TJT_HD static int backward(const float* row, const float* upstream, float* grad, int offset) {
        if (kSlot != 0) return offset + width;
        if (kFreqs == 0) {
            for (int d = 0; d < kWidth; ++d) grad[d] += upstream[offset + d];
            return offset + width;
        }
        const int sin_at = offset, cos_at = offset + kWidth * kFreqs;
        for (int d = 0; d < kWidth; ++d) {
            float scale = 1.0f, sum = 0.0f;
            for (int k = 0; k < kFreqs; ++k, scale *= 2.0f) {
                const int at = d * kFreqs + k;
                sum += scale * (row[cos_at + at] * upstream[sin_at + at] - row[sin_at + at] * upstream[cos_at + at]);
            }
            grad[d] += sum;
        }
        return offset + width;
    }
};

template <class... Parts>
struct EncodingLayout {
    TJT_HD static constexpr int row_width() { return sum(Parts::width...); }

    TJT_HD static void forward(const float* const* inputs, long m, float* row) {
        int offset = 0;
        int order[] = {0, (offset = Parts::forward(inputs, m, row, offset))...};  // parts in order
        (void)order;
    }

    // grad [width of input 0] = d row / d input 0 times upstream [row_width()], given the row.
    TJT_HD static void backward(const float* row, const float* upstream, float* grad, int width0) {
        for (int d = 0; d < width0; ++d) grad[d] = 0.0f;
        int offset = 0;
        int order[] = {0, (offset = Parts::backward(row, upstream, grad, offset))...};
        (void)order;
    }

  private:
    TJT_HD static constexpr int sum() { return 0; }
    template <class... Rest>
    TJT_HD static constexpr int sum(int first, Rest... rest) { return first + sum(rest...); }
};

}  // namespace tensorf_kernels
