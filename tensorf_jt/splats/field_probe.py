"""A trained checkpoint's field at world points: its density, and its colour as a camera sees it.

The field lives in model space: the world itself for a bounded scene, the contracted cube for
an unbounded one (``rendering.contraction``), normalised device coordinates for a
forward-facing (NDC) one, where the loader's world points map to
(-a x/z, -b y/z, 1 + 2 near/z) with a = 2 focal / W, b = 2 focal / H, and the view directions
the shader sees are those of the NDC rays (``rendering.rays.ndc_rays_blender``).
"""
from __future__ import annotations

import numpy as np
import jittor as jt

from tensorf_jt.rendering.rays import ndc_rays_blender

CHUNK = 1 << 16  # points evaluated at once


class FieldProbe:
    """Density and colour of ``model`` (a ``TensoRFModel``) at world points of ``dataset``'s world."""

    def __init__(self, model, dataset) -> None:
        self.model = model
        self.field = model.field
        self.ndc = dataset.ndc_parameters  # (focal, near) or None
        self.width, self.height = dataset.img_wh
        self.contraction = getattr(model.sampler, "contraction", None)

    def to_model(self, points: np.ndarray) -> np.ndarray:
        """Model-space points [N, 3] float32 of world points [N, 3]."""
        points = np.asarray(points, np.float64)
        if self.ndc is not None:
            focal, near = self.ndc
            a, b = 2.0 * focal / self.width, 2.0 * focal / self.height
            z = np.where(np.abs(points[:, 2]) < 1e-9, -1e-9, points[:, 2])
            points = np.stack([-a * points[:, 0] / z, -b * points[:, 1] / z, 1.0 + 2.0 * near / z], axis=1)
            return points.astype(np.float32)
        if self.contraction is not None:
            out = []
            with jt.no_grad():
                for start in range(0, len(points), CHUNK):
                    out.append(self.contraction(jt.array(points[start:start + CHUNK].astype(np.float32))).numpy())
            return np.concatenate(out) if out else np.zeros((0, 3), np.float32)
        return points.astype(np.float32)

    def view_directions(self, points: np.ndarray, centres: np.ndarray) -> np.ndarray:
        """[N, 3] float32: the direction of the model's ray from each camera centre through each point."""
        points, centres = np.asarray(points, np.float64), np.asarray(centres, np.float64)
        directions = points - centres
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        if self.ndc is not None:
            _, directions = ndc_rays_blender(self.height, self.width, self.ndc[0], self.ndc[1], centres, directions)
        return directions.astype(np.float32)

    def density(self, points: np.ndarray) -> np.ndarray:
        """[N] the field's density at world points [N, 3]."""
        model_points = self.to_model(points)
        out = []
        with jt.no_grad():
            for start in range(0, len(model_points), CHUNK):
                out.append(self.field.density(jt.array(model_points[start:start + CHUNK])).numpy())
        return np.concatenate(out) if out else np.zeros((0,), np.float32)

    def colours(self, points: np.ndarray, centres: np.ndarray) -> np.ndarray:
        """[N, 3] colour at each world point seen from the matching camera centre [N, 3]."""
        model_points = self.to_model(points)
        directions = self.view_directions(points, centres)
        out = []
        with jt.no_grad():
            for start in range(0, len(model_points), CHUNK):
                xyz = jt.array(model_points[start:start + CHUNK])
                out.append(self.field.shade(self.field.normalize_coord(xyz),
                                            jt.array(directions[start:start + CHUNK])).numpy())
        return np.clip(np.concatenate(out), 0.0, 1.0) if out else np.zeros((0, 3), np.float32)
