"""Dataset formats. ``dataset_dict`` maps the reference's ``dataset_name`` values to loaders.

- ``blender``: NeRF-synthetic, ``transforms_{split}.json`` (``blender.BlenderDataset``)
- ``llff``: forward-facing LLFF, ``poses_bounds.npy`` (``llff.LLFFDataset``)
- ``nsvf``: NSVF layout, ``bbox.txt``/``intrinsics.txt``/``pose/``/``rgb/`` (``nsvf.NSVFDataset``)
- ``tankstemple``: Tanks&Temples in NSVF's layout (``tankstemple.TanksTempleDataset``)
- ``own_data``: instant-ngp ``transforms*.json``, e.g. from COLMAP (``own_data.OwnDataDataset``)
- ``demo``: ours, the procedural scene, generated into ``datadir`` on first use and then
  read by the blender loader (it is written in that layout)
- ``demo_room``: the same objects in a room, an unbounded scene, read by the own_data loader

Every loader follows one interface (``docs/DATASETS.md`` describes the folder layouts):

``Loader(datadir: str, split: str = "train", downsample: float = 1.0, is_stack: bool = False)``
    loads one split ("train", "val" or "test") into host memory; ``downsample`` divides the
    images' own size (images are really resized, focal lengths scaled; the original TensoRF
    divides 800 for blender and NSVF, see ``docs/DATASETS.md``). LLFF's default is 4.0, as in
    the reference. Images are decoded in parallel threads and kept as their 8- or 16-bit
    pixels with one pose per view (``views.ViewDataset``): rays and colours are made when
    asked for. Problems with the files raise ``DatasetError`` naming the file; so do cameras
    that cannot be right (``camera_checks``: NaN, infinity, a pose that is not rigid).

Made on demand (numpy float32):

- ``rays_at(ids)`` [M, 6] / ``rgbs_at(ids)`` [M, 3]: by global ray number (view * H*W +
  row * W + column), what the trainer's batches and ray filtering use;
- ``view_rays(i)`` [H*W, 6] / ``view_rgbs(i)`` [H*W, 3]: one view, what evaluation uses;
- ``rays_for_pose(c2w)`` [H*W, 6]: a camera at ``c2w`` (one ``render_path`` entry, say),
  made exactly as the loader makes its own rays (NDC for LLFF);
- ``all_rays`` [N*H*W, 6] or, when ``is_stack``, [N, H*W, 6], and ``all_rgbs`` [N*H*W, 3]
  or [N, H, W, 3]: the reference's attributes, built on each access (gigabytes for a
  real scene). Directions are unit length except for LLFF, whose rays are in NDC; colours are
  in [0, 1], RGBA composited onto white where ``white_bg``.

Attributes:

- ``n_views``, ``n_rays`` (= N*H*W); ``len()`` is ``n_views`` when ``is_stack``, else ``n_rays``.
- ``img_wh``: (W, H) after downsampling. ``focal``: focal length in pixels at that size
  (a float for blender, [fx, fy] for the others). ``intrinsics``: [3, 3] at that size.
- ``poses``: this split's camera-to-world matrices [N, 4, 4] float32, in the convention the
  loader builds its rays with (OpenCV for all but LLFF, whose centred poses are OpenGL).
- ``proj_mat``: [N, 3, 4], ``intrinsics @ inverse(poses)[:, :3]`` as the reference's blender
  and NSVF loaders have it (OpenCV pinhole model for every format; ``jt.linalg.inv``).
- ``scene_bbox``: [2, 3]; ``near_far``: list of two floats; ``white_bg``: bool.
- ``all_depths``: ground-truth depth [N, H, W] when the scene has it (the demo scene), else None.
- ``render_path``: [K, 4, 4] camera-to-world poses for ``--render_path`` videos, in the
  same convention as ``poses``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from tensorf_jt.dataLoader.blender import BlenderDataset
from tensorf_jt.dataLoader.demo_scene import DemoSceneSpec, ensure_generated
from tensorf_jt.dataLoader.llff import LLFFDataset
from tensorf_jt.dataLoader.nsvf import NSVFDataset
from tensorf_jt.dataLoader.own_data import OwnDataDataset
from tensorf_jt.dataLoader.ray_batches import RayBatchDataset
from tensorf_jt.dataLoader.tankstemple import TanksTempleDataset

if TYPE_CHECKING:
    from tensorf_jt.config import DataConfig

dataset_dict = {
    "blender": BlenderDataset,
    "llff": LLFFDataset,
    "nsvf": NSVFDataset,
    "tankstemple": TanksTempleDataset,
    "own_data": OwnDataDataset,
    "demo": BlenderDataset,
    "demo_room": OwnDataDataset,
}


def demo_spec(data: DataConfig) -> DemoSceneSpec:
    """The built-in scene ``data`` asks for: the objects alone (``demo``) or in their room (``demo_room``)."""
    return DemoSceneSpec(image_size=data.demo_image_size, n_train=data.demo_n_train, n_test=data.demo_n_test,
                         room=data.dataset_name == "demo_room")


def prepare_dataset(data: DataConfig) -> bool:
    """Make sure the dataset folder exists; for the demo scene, generate it if missing.

    Returns True when a scene was generated.
    """
    if data.dataset_name in ("demo", "demo_room"):
        return ensure_generated(data.datadir, demo_spec(data))
    return False


def load_split(data: DataConfig, split: str, is_stack: bool) -> BlenderDataset:
    """One split of the dataset ``data`` names, downsampled by the split's own factor.

    ``data.scene_bbox`` and ``data.near_far`` (the ``--scene_bbox``/``--near_far`` flags), when
    set, replace the loader's box and near/far; ``own_data`` also takes ``data.pose_format``.
    """
    loader = dataset_dict[data.dataset_name]
    if loader is LLFFDataset:
        dataset = loader(data.datadir, split=split, downsample=data.downsample(split), is_stack=is_stack,
                         unbounded=0 if data.ndc_ray else data.unbounded)
        return _with_overrides(dataset, data)
    if loader is OwnDataDataset:
        return loader(data.datadir, split=split, downsample=data.downsample(split), is_stack=is_stack,
                      scene_bbox=data.scene_bbox, near_far=data.near_far, pose_format=data.pose_format,
                      holdout_sector=data.holdout_sector, holdout_center=data.holdout_center)
    return _with_overrides(loader(data.datadir, split=split, downsample=data.downsample(split), is_stack=is_stack), data)


def _with_overrides(dataset, data: DataConfig):
    """``dataset`` with ``data.scene_bbox`` and ``data.near_far`` in place of its own, where set."""
    sources = []
    if data.scene_bbox is not None:
        dataset.scene_bbox = np.array(data.scene_bbox, dtype=np.float32).reshape(2, 3)
        dataset.foreground_bbox = None
        sources.append("box from --scene_bbox")
    if data.near_far is not None:
        dataset.near_far = [float(v) for v in data.near_far]
        sources.append("near/far from --near_far")
    if sources:
        dataset.bounds_source = ", ".join(sources)
    return dataset


__all__ = ["BlenderDataset", "LLFFDataset", "NSVFDataset", "OwnDataDataset", "RayBatchDataset", "TanksTempleDataset",
           "dataset_dict", "demo_spec", "load_split", "prepare_dataset"]
