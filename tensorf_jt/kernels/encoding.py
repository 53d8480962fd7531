"""Fused assembly of a shading MLP's input row: raw inputs and their positional encodings.

The reference builds the row with ``torch.cat`` of the raw features, the view direction and
sin/cos encodings of either; in Jittor every part, every sin and cos, and the concatenation
(forward and backward) is a separate pass over a [M, ~150] tensor. This kernel writes the row in
one pass and returns the gradient of the one input that needs it (the appearance features).

A *layout* lists the row's parts in order as (input slot, number of frequencies), 0
frequencies meaning the raw values; a frequency part holds sin(x * 2^k) for every input
dimension and k, then the matching cosines, as ``positional_encoding`` orders them.
"""
from __future__ import annotations

import functools

import jittor as jt


def _row_width(layout: tuple[tuple[int, int], ...], widths: tuple[int, ...]) -> int:
    return sum(widths[slot] * (1 if freqs == 0 else 2 * freqs) for slot, freqs in layout)


@functools.lru_cache(maxsize=None)
def row_programs(layout: tuple[tuple[int, int], ...], widths: tuple[int, ...]) -> tuple[str, str]:
    """C++ bodies filling one row ``m``: the forward pass (``row``) and the gradient of input 0
    (``grad``, from ``upstream``). Input slot s is read through ``in{s}_p``."""
    forward, backward, offset = [], [], 0
    for slot, freqs in layout:
        width = widths[slot]
        source = f"(in{slot}_p + m * {width})"
        if freqs == 0:
            forward.append(f"for (int d = 0; d < {width}; ++d) row[{offset} + d] = {source}[d];")
            if slot == 0:
                backward.append(f"for (int d = 0; d < {width}; ++d) grad[d] += upstream[{offset} + d];")
            offset += width
            continue
        sin_at, cos_at = offset, offset + width * freqs
        forward.append(f"""
            for (int d = 0; d < {width}; ++d) {{
                float x = {source}[d], scale = 1.0f;
                for (int k = 0; k < {freqs}; ++k, scale *= 2.0f) {{
                    float angle = x * scale;
                    row[{sin_at} + d * {freqs} + k] = sinf(angle);
                    row[{cos_at} + d * {freqs} + k] = cosf(angle);
                }}
            }}""")
        if slot == 0:
            backward.append(f"""
            for (int d = 0; d < {width}; ++d) {{
                float x = {source}[d], scale = 1.0f, sum = 0.0f;
                for (int k = 0; k < {freqs}; ++k, scale *= 2.0f) {{
                    float angle = x * scale;
                    sum += scale * (cosf(angle) * upstream[{sin_at} + d * {freqs} + k]
                                    - sinf(angle) * upstream[{cos_at} + d * {freqs} + k]);
                }}
                grad[d] += sum;
            }}""")
        offset += 2 * width * freqs
    total = _row_width(layout, widths)
    forward_body = f"float* row = out0_p + m * {total};\n" + "".join(forward)
    backward_body = (f"const float* upstream = in{len(widths)}_p + m * {total};\n"
                     f"float* grad = out0_p + m * {widths[0]};\n"
                     f"for (int d = 0; d < {widths[0]}; ++d) grad[d] = 0.0f;\n" + "".join(backward))
    return forward_body, backward_body


def cuda_kernel(name: str, n_inputs: int, body: str) -> str:
    """A CUDA kernel running ``body`` for one row per thread, over inputs in0_p.. and output out0_p."""
    params = ", ".join(f"const float* __restrict__ in{i}_p" for i in range(n_inputs))
    return f"""
__global__ void {name}({params}, float* __restrict__ out0_p, long rows) {{
    long m = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= rows) return;
    {body}
}}
"""


def _code(shape, inputs: list, body: str, name: str):
    args = ", ".join(f"in{i}_p" for i in range(len(inputs)))
    cpu_src = f"""
        #pragma omp parallel for schedule(static)
        for (long m = 0; m < in0_shape0; ++m) {{
            {body}
        }}"""
    cuda_src = cuda_kernel(name, len(inputs), body) + f"""
        if (in0_shape0 > 0) {name}<<<(unsigned)((in0_shape0 + 255) / 256), 256>>>({args}, out0_p, in0_shape0);"""
    return jt.code(shape, "float32", inputs, cpu_header="#include <cmath>", cpu_src=cpu_src,
                   cuda_header="#include <cmath>", cuda_src=cuda_src)


class _EncodeRow(jt.Function):
    def __init__(self, layout: tuple[tuple[int, int], ...]) -> None:
        self.layout = layout

    def execute(self, *inputs):
        self.inputs = inputs
        self.widths = tuple(int(v.shape[1]) for v in inputs)
        forward_body, _ = row_programs(self.layout, self.widths)
        shape = (inputs[0].shape[0], _row_width(self.layout, self.widths))
        return _code(shape, list(inputs), forward_body, "encode_row_forward")

    def grad(self, grad_row):
        _, backward_body = row_programs(self.layout, self.widths)
        grad_first = _code(self.inputs[0].shape, list(self.inputs) + [grad_row], backward_body, "encode_row_backward")
        return (grad_first,) + (None,) * (len(self.inputs) - 1)


def encode_row(inputs: list[jt.Var], layout: list[tuple[int, int]]) -> jt.Var:
    """The MLP input [M, width] described by ``layout`` over ``inputs`` (each [M, D_i]).

    Only ``inputs[0]`` receives a gradient; the others (view directions, positions) are
    constants of the shading step, as in the reference, where they do not require grad.
    """
    inputs = [v.float32() for v in inputs]
    if inputs[0].shape[0] == 0:
        widths = tuple(int(v.shape[1]) for v in inputs)
        return jt.zeros((0, _row_width(tuple(layout), widths)), dtype="float32")
    return _EncodeRow(tuple(tuple(part) for part in layout))(*inputs)
