"""Fused assembly of a shading MLP's input row: raw inputs and their positional encodings.

The reference builds the row with ``torch.cat`` of the raw features, the view direction and
sin/cos encodings of either; in Jittor every part, every sin and cos, and the concatenation
(forward and backward) is a separate pass over a [M, ~150] tensor. This kernel
(``csrc/encoding_*.h``) writes the row in one pass and returns the gradient of the one input
that needs it (the appearance features), from the sines and cosines the row holds.

A *layout* lists the row's parts in order as (input slot, number of frequencies), 0
frequencies meaning the raw values; a frequency part holds sin(x * 2^k) for every input
dimension and k, then the matching cosines, as ``positional_encoding`` orders them.
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

MAX_INPUTS = 4  # csrc/encoding_cuda.cuh: kMaxEncodingInputs

# $layout: the row's parts as an EncodingLayout<EncodingPart<slot, width, freqs>, ...> type.
_INPUTS = """
    using namespace tensorf_kernels;
    const float* inputs[4] = {$input_pointers};
"""
_FORWARD_GLUE = _INPUTS + """
    encode_forward_$device<$layout>(inputs, input0_shape0, row_p);
"""
_BACKWARD_GLUE = """
    using namespace tensorf_kernels;
    encode_backward_$device<$layout>(row_p, $width0, row_shape0, grad_row_p, grad_input0_p);
"""


def row_width(layout: tuple[tuple[int, int], ...], widths: tuple[int, ...]) -> int:
    """Columns of the row ``layout`` builds from inputs of ``widths`` columns."""
    return sum(widths[slot] * (1 if freqs == 0 else 2 * freqs) for slot, freqs in layout)


def layout_values(layout: tuple[tuple[int, int], ...], widths: tuple[int, ...]) -> dict[str, str]:
    """The glue's ``$names`` for ``layout`` over inputs of ``widths`` columns."""
    if len(widths) > MAX_INPUTS:
        raise ValueError(f"an MLP input row over {len(widths)} inputs exceeds the kernel's {MAX_INPUTS}")
    parts = ", ".join(f"EncodingPart<{slot}, {widths[slot]}, {freqs}>" for slot, freqs in layout)
    pointers = [f"input{slot}_p" for slot in range(len(widths))] + ["nullptr"] * (MAX_INPUTS - len(widths))
    return {"layout": f"EncodingLayout<{parts}>", "input_pointers": ", ".join(pointers)}


class _EncodeRow(jt.Function):
    def __init__(self, layout: tuple[tuple[int, int], ...]) -> None:
        self.layout = layout

    def execute(self, *inputs):
        self.inputs = {f"input{slot}": var for slot, var in enumerate(inputs)}
        self.values = layout_values(self.layout, tuple(int(v.shape[1]) for v in inputs))
        shape = (inputs[0].shape[0], row_width(self.layout, tuple(int(v.shape[1]) for v in inputs)))
        row, = device_code([("row", shape, "float32")], self.inputs, "encoding", _FORWARD_GLUE, **self.values)
        self.row, self.first_shape, self.n_inputs = row, inputs[0].shape, len(inputs)
        self.inputs = None
        return row

    def grad(self, grad_row):
        row, self.row = self.row, None  # let the row go with the backward pass
        grad_first, = device_code([("grad_input0", self.first_shape, "float32")], {"row": row, "grad_row": grad_row},
                                  "encoding", _BACKWARD_GLUE, layout=self.values["layout"],
                                  width0=self.first_shape[1])
        return (grad_first,) + (None,) * (self.n_inputs - 1)


def encode_row(inputs: list[jt.Var], layout: list[tuple[int, int]]) -> jt.Var:
    """The MLP input [M, width] described by ``layout`` over ``inputs`` (each [M, D_i]).

    Only ``inputs[0]`` receives a gradient; the others (view directions, positions) are
    constants of the shading step, as in the reference, where they do not require grad.
    """
    inputs = [v.float32() for v in inputs]
    if inputs[0].shape[0] == 0:
        widths = tuple(int(v.shape[1]) for v in inputs)
        return jt.zeros((0, row_width(tuple(layout), widths)), dtype="float32")
    return _EncodeRow(tuple(tuple(part) for part in layout))(*inputs)
