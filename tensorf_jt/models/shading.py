"""Shading heads: appearance features (plus view direction) to RGB.

Layer layout and parameter names follow the reference (``renderModule.mlp.{0,2,4}``) so that
state dicts line up key for key.
"""
from __future__ import annotations

import jittor as jt
from jittor import nn

from tensorf_jt.errors import ConfigError
from tensorf_jt.kernels.bias_relu import bias_relu
from tensorf_jt.kernels.encoding import encode_row


def positional_encoding(x: jt.Var, n_freqs: int) -> jt.Var:
    """[N, D] -> [N, 2 * D * n_freqs]: sin then cos of x * 2^k, frequencies fastest per input dim."""
    freqs = (2.0 ** jt.arange(n_freqs).float32()).reshape(1, 1, n_freqs)
    scaled = (x.unsqueeze(-1) * freqs).reshape(x.shape[0], x.shape[1] * n_freqs)
    return jt.concat([jt.sin(scaled), jt.cos(scaled)], dim=-1)


class _MLPShader(nn.Module):
    """Three-layer ReLU MLP ending in a sigmoid; subclasses choose what is encoded into it.

    ``input_layout`` lists the parts of the MLP's input row in order, as (input, number of
    positional-encoding frequencies; 0 for the raw values), over the inputs (features,
    viewdirs, pts).
    """

    def __init__(self, in_channels: int, featureC: int) -> None:
        super().__init__()
        self.fused = True  # input row and hidden layers by the fused kernels; set by TensorBase.fused
        self.in_mlpC = in_channels
        self.mlp = nn.Sequential(
            nn.Linear(self.in_mlpC, featureC),
            nn.ReLU(),
            nn.Linear(featureC, featureC),
            nn.ReLU(),
            nn.Linear(featureC, 3),
        )
        nn.init.constant_(self.mlp[4].bias, 0.0)

    FEATURES, VIEWDIRS, PTS = 0, 1, 2

    def input_layout(self) -> list[tuple[int, int]]:
        raise NotImplementedError

    def mlp_input(self, pts: jt.Var, viewdirs: jt.Var, features: jt.Var) -> jt.Var:
        """The MLP's input row [N, in_mlpC]."""
        inputs = [features, viewdirs, pts]
        if self.fused:
            return encode_row(inputs, self.input_layout())
        parts = [inputs[slot] if freqs == 0 else positional_encoding(inputs[slot], freqs)
                 for slot, freqs in self.input_layout()]
        return jt.concat(parts, dim=-1)

    def execute(self, pts: jt.Var, viewdirs: jt.Var, features: jt.Var) -> jt.Var:
        """pts: [N, 3] normalised positions; viewdirs: [N, 3]; features: [N, app_dim] -> rgb [N, 3].
        Fused, the hidden layers' bias and ReLU run in one kernel each (``kernels.bias_relu``)."""
        row = self.mlp_input(pts, viewdirs, features)
        if not self.fused:
            return jt.sigmoid(self.mlp(row))
        first, second, last = self.mlp[0], self.mlp[2], self.mlp[4]
        hidden = bias_relu(nn.matmul_transpose(row, first.weight), first.bias)
        hidden = bias_relu(nn.matmul_transpose(hidden, second.weight), second.bias)
        return jt.sigmoid(last(hidden))


class MLPRender_Fea(_MLPShader):
    """Features, view direction and the positional encodings of both (reference ``MLPRender_Fea``)."""

    def __init__(self, inChanel: int, viewpe: int = 6, feape: int = 6, featureC: int = 128) -> None:
        super().__init__(2 * viewpe * 3 + 2 * feape * inChanel + 3 + inChanel, featureC)
        self.viewpe, self.feape = viewpe, feape

    def input_layout(self):
        layout = [(self.FEATURES, 0), (self.VIEWDIRS, 0)]
        if self.feape > 0:
            layout.append((self.FEATURES, self.feape))
        if self.viewpe > 0:
            layout.append((self.VIEWDIRS, self.viewpe))
        return layout


class MLPRender_PE(_MLPShader):
    """Features, view direction and the encodings of position and view (reference ``MLPRender_PE``).

    Deliberate fix: the reference sizes the first layer for raw positions too, which its
    forward pass never passes in, so every MLP_PE model crashes there on its first batch.
    """

    def __init__(self, inChanel: int, viewpe: int = 6, pospe: int = 6, featureC: int = 128) -> None:
        super().__init__((3 + 2 * viewpe * 3) + 2 * pospe * 3 + inChanel, featureC)
        self.viewpe, self.pospe = viewpe, pospe

    def input_layout(self):
        layout = [(self.FEATURES, 0), (self.VIEWDIRS, 0)]
        if self.pospe > 0:
            layout.append((self.PTS, self.pospe))
        if self.viewpe > 0:
            layout.append((self.VIEWDIRS, self.viewpe))
        return layout


class MLPRender(_MLPShader):
    """Features, view direction and its encoding (reference ``MLPRender``)."""

    def __init__(self, inChanel: int, viewpe: int = 6, featureC: int = 128) -> None:
        super().__init__((3 + 2 * viewpe * 3) + inChanel, featureC)
        self.viewpe = viewpe

    def input_layout(self):
        layout = [(self.FEATURES, 0), (self.VIEWDIRS, 0)]
        if self.viewpe > 0:
            layout.append((self.VIEWDIRS, self.viewpe))
        return layout


# Real spherical-harmonic basis constants up to degree 2 (the reference's ``sh.py`` values).
SH_C0 = 0.28209479177387814
SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)


def sh_basis_degree2(dirs: jt.Var) -> jt.Var:
    """The 9 real SH basis functions of degree <= 2 at unit directions [N, 3] -> [N, 9]."""
    x, y, z = dirs[:, 0], dirs[:, 1], dirs[:, 2]
    xx, yy, zz = x * x, y * y, z * z
    return jt.stack([
        jt.full_like(x, SH_C0),
        -SH_C1 * y, SH_C1 * z, -SH_C1 * x,
        SH_C2[0] * x * y, SH_C2[1] * y * z, SH_C2[2] * (2.0 * zz - xx - yy), SH_C2[3] * x * z,
        SH_C2[4] * (xx - yy),
    ], dim=1)


class SHRender(nn.Module):
    """Colour as degree-2 spherical harmonics: 27 appearance features are 3 x 9 coefficients.

    Parameter-free, as the reference's ``SHRender`` function; output relu(SH(dir) + 0.5).
    """

    def execute(self, pts: jt.Var, viewdirs: jt.Var, features: jt.Var) -> jt.Var:
        coefficients = features.reshape(features.shape[0], 3, 9)
        return nn.relu((coefficients * sh_basis_degree2(viewdirs).unsqueeze(1)).sum(-1) + 0.5)


class RGBRender(nn.Module):
    """The appearance features are the colour (``app_dim`` 3); reference ``RGBRender``."""

    def execute(self, pts: jt.Var, viewdirs: jt.Var, features: jt.Var) -> jt.Var:
        return features


SHADING_MODES = ("MLP_Fea", "MLP_PE", "MLP", "SH", "RGB")


def build_shader(shadingMode: str, app_dim: int, pos_pe: int, view_pe: int, fea_pe: int, featureC: int) -> nn.Module:
    """The shading module named by ``shadingMode`` (the reference's ``init_render_func``)."""
    if shadingMode == "MLP_Fea":
        return MLPRender_Fea(app_dim, view_pe, fea_pe, featureC)
    if shadingMode == "MLP_PE":
        return MLPRender_PE(app_dim, view_pe, pos_pe, featureC)
    if shadingMode == "MLP":
        return MLPRender(app_dim, view_pe, featureC)
    if shadingMode == "SH":
        if app_dim != 27:
            raise ConfigError(f"shadingMode SH needs data_dim_color = 27 (3 colours x 9 SH coefficients), got {app_dim}.")
        return SHRender()
    if shadingMode == "RGB":
        if app_dim != 3:
            raise ConfigError(f"shadingMode RGB needs data_dim_color = 3 (the features are the colour), got {app_dim}.")
        return RGBRender()
    raise ConfigError(
        f"shadingMode '{shadingMode}' is not supported; choose one of {', '.join(SHADING_MODES)}."
    )
