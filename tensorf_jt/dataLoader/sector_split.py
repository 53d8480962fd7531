"""A held-out-sector split: test views seen from directions where no training photo was taken.

The usual hold-out (every 8th frame) picks test views between training views, a few degrees
from the nearest photo; a model that memorises its photos scores well there and still renders
ghosts from the side. This split pools the frames of every split and holds out those whose
camera lies within an azimuth sector around the scene: the test views are then as far from
the training photos as half the sector's width.

Azimuths are measured about the cameras' mean up direction, around the centre of the scene
box when there is one (the own_data loader passes ``--scene_bbox`` or the file's
``foreground_aabb`` or ``aabb``), else around the point nearest to every camera's optical
axis. The sector is centred on ``center_deg`` (degrees in that frame, 0 along the
first horizontal axis, see ``horizontal_axes``) or, by default, on the cameras' circular mean
azimuth: the middle of a capture taken along an arc.
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.errors import DatasetError


def horizontal_axes(up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors spanning the plane normal to ``up``: x (or y, for an up near x)
    projected onto it, then up x that."""
    reference = np.array([1.0, 0.0, 0.0]) if abs(up[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    first = reference - up * np.dot(reference, up)
    first /= np.linalg.norm(first)
    return first, np.cross(up, first)


def nearest_to_axes(c2w: np.ndarray) -> np.ndarray:
    """The point with the least summed squared distance to the cameras' optical axes
    (c2w [N, 4, 4], OpenGL: a camera looks along -z)."""
    origins, directions = c2w[:, :3, 3], -c2w[:, :3, 2]
    directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    projectors = np.eye(3)[None] - directions[:, :, None] * directions[:, None, :]
    return np.linalg.lstsq(projectors.sum(0), np.einsum("nij,nj->i", projectors, origins), rcond=None)[0]


def camera_azimuths(c2w: np.ndarray, center: np.ndarray) -> np.ndarray:
    """Each camera's azimuth in degrees [0, 360) around ``center``, about the mean up direction."""
    up = c2w[:, :3, 1].mean(0)
    up = up / np.linalg.norm(up)
    first, second = horizontal_axes(up)
    offsets = c2w[:, :3, 3] - center
    return np.degrees(np.arctan2(offsets @ second, offsets @ first)) % 360.0


def circular_mean(degrees: np.ndarray) -> float:
    """The mean direction of angles in degrees, in [0, 360)."""
    radians = np.radians(degrees)
    return float(np.degrees(np.arctan2(np.sin(radians).mean(), np.cos(radians).mean())) % 360.0)


def in_sector(azimuths: np.ndarray, center_deg: float, width_deg: float) -> np.ndarray:
    """Whether each azimuth lies within ``width_deg`` / 2 of ``center_deg`` (bool [N])."""
    offset = (azimuths - center_deg + 180.0) % 360.0 - 180.0
    return np.abs(offset) <= width_deg / 2.0


def sector_split(c2w: np.ndarray, width_deg: float, center_deg: float | None = None,
                 box: np.ndarray | None = None, source: str = "the scene") -> tuple[np.ndarray, np.ndarray, float]:
    """Indices of the training and test frames of poses c2w [N, 4, 4] (OpenGL) for a held-out
    sector ``width_deg`` wide, and the sector's centre in degrees (see the module's docstring).
    Refused when the sector holds no camera or leaves fewer than two for training."""
    center = box.reshape(2, 3).mean(0) if box is not None else nearest_to_axes(c2w)
    azimuths = camera_azimuths(c2w, center)
    middle = circular_mean(azimuths) if center_deg is None else float(center_deg) % 360.0
    held = in_sector(azimuths, middle, width_deg)
    if not held.any() or (~held).sum() < 2:
        found = "no camera" if not held.any() else f"{int(held.sum())} of the {len(held)} cameras"
        raise DatasetError(
            f"A {width_deg:g} degree sector centred at azimuth {middle:.0f} holds {found} of {source}; the cameras "
            f"lie at azimuths {', '.join(f'{a:.0f}' for a in np.sort(azimuths)[:12])}"
            f"{' ...' if len(azimuths) > 12 else ''}. Choose --holdout_sector and --holdout_center so that "
            "the sector holds some cameras and leaves at least two outside it.")
    return np.nonzero(~held)[0], np.nonzero(held)[0], middle
