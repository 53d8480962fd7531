"""What differs from one training photo to the next besides the scene: learned per view.

Phone captures are not the ideal cameras a radiance field assumes. Exposure and white balance
change as the phone turns (auto exposure), and COLMAP's poses are a little off. Both are
learned here, one small set of numbers per training view, as nerfacto does:

- ``AppearanceCodes``: a vector per view (NeRF-W's appearance embedding) that the shading MLP
  reads next to its other inputs, so a view's exposure is explained by its code instead of
  being painted into the scene as floaters. A view that has no code of its own (test views,
  camera paths, the viewer) uses the mean of the training codes: the scene under its average
  exposure.
- ``PoseCorrections``: a rotation (axis-angle) and a translation per view, applied to that
  view's rays in world coordinates about the camera's centre: origin o -> o + t, direction
  d -> R(w) d. Views without a correction (test views) are rendered at their given poses.

Both start at zero (no change) and are trained with the rest of the model.
"""
from __future__ import annotations

import jittor as jt
from jittor import nn

SMALL_ANGLE_SQ = 1e-4  # below this squared angle the rotation uses its series expansion


def _cross(a: jt.Var, b: jt.Var) -> jt.Var:
    """a x b for vectors [N, 3]."""
    return jt.stack([a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
                     a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
                     a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]], dim=1)


def rotate(axis_angle: jt.Var, vectors: jt.Var) -> jt.Var:
    """Rodrigues' rotation of vectors [N, 3] by axis-angle vectors [N, 3] (angle = length).

    R v = v + (sin a / a) w x v + ((1 - cos a) / a^2) w x (w x v); near a = 0 both factors
    come from their series, so the rotation and its gradient stay finite at zero.
    """
    angle_sq = jt.sqr(axis_angle).sum(-1, keepdims=True)
    angle = jt.sqrt(angle_sq + 1e-12)
    small = angle_sq < SMALL_ANGLE_SQ
    sin_term = jt.ternary(small, 1.0 - angle_sq / 6.0, jt.sin(angle) / angle)
    cos_term = jt.ternary(small, 0.5 - angle_sq / 24.0, (1.0 - jt.cos(angle)) / (angle_sq + 1e-12))
    once = _cross(axis_angle, vectors)
    return vectors + sin_term * once + cos_term * _cross(axis_angle, once)


class AppearanceCodes(nn.Module):
    """One learned vector of ``dim`` numbers per training view, read by the shading MLP."""

    def __init__(self, n_views: int, dim: int) -> None:
        super().__init__()
        self.codes = jt.zeros((int(n_views), int(dim)), dtype="float32")

    @property
    def dim(self) -> int:
        return self.codes.shape[1]

    def execute(self, view_ids: jt.Var | None, n_rays: int) -> jt.Var:
        """Codes [n_rays, dim] of the rays' views; the mean code for all when ``view_ids`` is None."""
        if view_ids is None:
            return self.codes.mean(0, keepdims=True).broadcast((n_rays, self.dim))
        return self.codes[view_ids]


class PoseCorrections(nn.Module):
    """A learned rotation and translation per training view, applied to its rays."""

    def __init__(self, n_views: int) -> None:
        super().__init__()
        self.rotation = jt.zeros((int(n_views), 3), dtype="float32")
        self.translation = jt.zeros((int(n_views), 3), dtype="float32")

    def execute(self, rays: jt.Var, view_ids: jt.Var) -> jt.Var:
        """Rays [R, 6] (origin, unit direction) of views ``view_ids`` [R], corrected."""
        origins = rays[:, :3] + self.translation[view_ids]
        directions = rotate(self.rotation[view_ids], rays[:, 3:6])
        return jt.concat([origins, directions], dim=1)
