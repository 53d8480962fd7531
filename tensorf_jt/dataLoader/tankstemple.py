"""Tanks&Temples scenes in NSVF's release: the NSVF layout with the reference's own constants.

Same folders and files as ``nsvf.py`` (``bbox.txt``, ``intrinsics.txt`` -- here a 4x4 matrix
--, ``rgb/``, ``pose/``; training views ``0_*``, test views ``1_*`` since there is no ``2_*``).
As the reference: the box of ``bbox.txt`` is scaled by 1.2 (about the world origin, as
there), near/far 0.01..6, white background, and the render path is its 200-view circle in
the world x-z plane (``camera_paths.tankstemple_circle_path``), derived from the loaded
split's cameras as the reference does. Differences: image size read from the files (the
reference assumes 1920x1080 for the intrinsics and for ``downsample``), intrinsics also
accepted in NSVF's other styles, ``is_stack`` honoured for every split.
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.dataLoader.camera_paths import tankstemple_circle_path
from tensorf_jt.dataLoader.nsvf import NSVFDataset


class TanksTempleDataset(NSVFDataset):
    """One split of a Tanks&Temples scene (NSVF layout); attributes as ``NSVFDataset``."""

    near_far = [0.01, 6.0]
    white_bg = True
    bbox_scale = 1.2
    layout = "Tanks&Temples (NSVF)"
    original_size = (1920, 1080)

    def _render_path(self) -> np.ndarray:
        return tankstemple_circle_path(self.poses.astype(np.float64), self.scene_bbox, n_views=200)
