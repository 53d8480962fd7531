"""A COLMAP reconstruction turned into an ``own_data`` scene that trains without hand-set bounds.

``convert`` reads a sparse model (binary or text, ``tensorf_jt.formats.colmap``), checks it
against the images, resamples distorted images (or images with several calibrations) into
one pinhole camera (``undistort``), moves the world so that the cameras' mean up direction
is +z and the fitted scene box is centred at the origin with its largest side 3 -- the size
of own_data's default box -- (``scene_fit``), and writes ``transforms.json`` with the box as
``aabb``, ``near_far`` fitted to the points' depths, the kept sparse points as a PLY file
(``ply_file_path``), the similarity applied to COLMAP's world (``colmap_to_world``:
x_scene = M x_colmap) and the model's folder (``colmap_model``, whose points supervise where
rays end: ``sparse_points``). ``tools/colmap_to_transforms.py`` is its command line.
Only numpy, PIL and (for distorted images) OpenCV are imported here.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import numpy as np
from PIL import Image as PILImage

from tensorf_jt.dataLoader import scene_fit
from tensorf_jt.dataLoader.undistort import Pinhole, is_cache, shared_pinhole, undistort_images
from tensorf_jt.errors import DatasetError, OutputConflict
from tensorf_jt.formats.colmap import Camera, Image, Model, find_model, read_model, view_points
from tensorf_jt.formats.ownership import (WRITTEN_BY_KEY, claim_folder, ply_is_ours, read_json_object,
                                          refuse_foreign_file, same_file)
from tensorf_jt.formats.file_modes import write_atomically
from tensorf_jt.formats.ply import write_ply

UNDISTORTED_DIR = "images_undistorted"  # the cache of resampled images, next to transforms.json
POINTS_FILE = "sparse_points.ply"
CONVERTER = "tensorf_jt colmap_to_transforms"  # the transforms file's WRITTEN_BY_KEY
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
_FLIP_YZ = np.diag([1.0, -1.0, -1.0, 1.0])  # OpenCV <-> OpenGL camera axes
_LISTED = 5  # file names quoted in a message


@dataclass(frozen=True)
class Conversion:
    """What ``convert`` wrote: the transforms file, its frames' count, box and near/far, how
    many sparse points fitted them, whether images were resampled, and notes for the user."""

    transforms_path: str
    n_frames: int
    aabb: np.ndarray
    near_far: tuple[float, float]
    n_points: int
    undistorted: bool
    camera: Pinhole
    notes: list[str] = field(default_factory=list)


def _listed(names: list[str]) -> str:
    more = f" and {len(names) - _LISTED} more" if len(names) > _LISTED else ""
    return ", ".join(f"'{name}'" for name in names[:_LISTED]) + more


def check_images(model: Model, images_dir: str) -> tuple[list[Image], list[str]]:
    """The model's images sorted by name, checked against the files in ``images_dir``, and notes.

    Refused: a registered image without its file, or a file whose size is not its camera's.
    Noted: image files COLMAP did not register (they are left out).
    """
    if not os.path.isdir(images_dir):
        raise DatasetError(f"The image folder '{images_dir}' does not exist. Give the folder COLMAP reconstructed "
                           "from with --images (by default DIR/images).")
    images = sorted(model.images.values(), key=lambda image: image.name)
    missing = [image.name for image in images if not os.path.isfile(os.path.join(images_dir, image.name))]
    if missing:
        raise DatasetError(f"{len(missing)} of the {len(images)} images registered in the COLMAP model are not in "
                           f"'{images_dir}': {_listed(missing)}. Give the folder COLMAP reconstructed from with "
                           "--images.")
    for image in images:
        camera = model.cameras[image.camera_id]
        path = os.path.join(images_dir, image.name)
        try:
            with PILImage.open(path) as handle:
                size = handle.size
        except OSError as err:
            raise DatasetError(f"Cannot read image '{path}': {err}.") from None
        if size != (camera.width, camera.height):
            raise DatasetError(
                f"Image '{path}' is {size[0]}x{size[1]} but its COLMAP camera {camera.camera_id} is "
                f"{camera.width}x{camera.height}: the images were resized after the reconstruction. Convert with "
                "the images COLMAP reconstructed from.")
    registered = {os.path.normpath(image.name) for image in images}
    unregistered = sorted(
        os.path.relpath(os.path.join(folder, name), images_dir)
        for folder, _, names in os.walk(images_dir) for name in names
        if name.lower().endswith(IMAGE_EXTENSIONS)
        and os.path.normpath(os.path.relpath(os.path.join(folder, name), images_dir)) not in registered)
    notes = []
    if unregistered:
        notes.append(f"{len(unregistered)} image(s) in '{images_dir}' were not registered by COLMAP and are left "
                     f"out: {_listed(unregistered)}.")
    return images, notes


def _pinhole_of(camera: Camera) -> Pinhole:
    (fx, fy), (cx, cy) = camera.focal, camera.principal_point
    return Pinhole(camera.width, camera.height, fx, fy, cx, cy)


def fit_scene(c2w_opengl: np.ndarray, xyz: np.ndarray, track_lengths: np.ndarray, views: list[np.ndarray],
              camera: Pinhole, normalize: bool = True,
              min_track: int = scene_fit.MIN_TRACK) -> tuple[np.ndarray, np.ndarray, tuple[float, float], np.ndarray]:
    """(similarity [4, 4] to apply to the world, box [2, 3] and near/far after it, kept-point mask [n]).

    ``views[i]``: indices of the points camera ``i`` sees. Without ``normalize`` the
    similarity is the identity and the box is fitted in the given world.
    """
    keep = scene_fit.scene_points(xyz, track_lengths, c2w_opengl, min_track) if len(xyz) else np.zeros(0, bool)
    rotation = np.eye(4)
    if normalize:
        rotation[:3, :3] = scene_fit.rotation_between(scene_fit.up_vector(c2w_opengl), np.array([0.0, 0.0, 1.0]))
    poses = scene_fit.transform_poses(rotation, c2w_opengl)
    points = scene_fit.transform_points(rotation, xyz) if len(xyz) else np.zeros((0, 3))
    if keep.sum() >= 10:
        box = scene_fit.fit_box_to_points(points[keep])
    else:
        box = scene_fit.fit_box_to_frusta(poses, (camera.fx, camera.fy), (camera.cx, camera.cy),
                                          (camera.width, camera.height))
    if normalize:
        scaling = scene_fit.normalizing_similarity(box)
        similarity, box = scaling @ rotation, scene_fit.transform_points(scaling, box)
    else:
        similarity = np.eye(4)
    poses = scene_fit.transform_poses(similarity, c2w_opengl)
    centres = poses[:, :3, 3]
    seen = [scene_fit.transform_points(similarity, xyz[view[keep[view]]]) for view in views] if len(xyz) else []
    if sum(len(s) for s in seen) >= 10:
        near_far = scene_fit.fit_near_far(centres, seen)
    else:
        near_far = scene_fit.near_far_from_box(centres, box)
    return similarity, box, near_far, keep


def is_our_transforms(path: str) -> bool:
    """Whether ``path`` is a transforms file this converter wrote: its ``written_by`` key, or
    (files of earlier versions) the converter's own ``colmap_to_world`` and ``colmap_model``."""
    content = read_json_object(path)
    return content is not None and (content.get(WRITTEN_BY_KEY) == CONVERTER
                                    or ("colmap_to_world" in content and "colmap_model" in content))


def _points_file_is_ours(path: str, transforms_path: str) -> bool:
    """Our PLY mark, or (earlier versions wrote none) the file our transforms file names."""
    if ply_is_ours(path):
        return True
    if not is_our_transforms(transforms_path):
        return False
    named = read_json_object(transforms_path).get("ply_file_path")
    return isinstance(named, str) and same_file(os.path.join(os.path.dirname(transforms_path), named), path)


def check_outputs(out_path: str, inputs: list[str], undistort_dir: str | None, images_dir: str,
                  overwrite: bool) -> None:
    """Refuse, before anything is written, outputs that would replace an input (always) or a file
    the converter did not write (unless ``overwrite``): the transforms file, the sparse points
    beside it and the folder of undistorted images (``undistort_dir``, where one is needed)."""
    out_dir = os.path.dirname(os.path.abspath(out_path))
    points_path = os.path.join(out_dir, POINTS_FILE)
    for output in (out_path, points_path):
        clash = next((path for path in inputs if same_file(path, output)), None)
        if clash is not None:
            raise OutputConflict(f"The output '{output}' is the input file '{clash}'; give --out a path outside the "
                                 "capture's images and model.")
    if undistort_dir is not None:
        images, cache = os.path.abspath(images_dir), os.path.abspath(undistort_dir)
        if os.path.commonpath([images, cache]) in (images, cache):
            raise OutputConflict(f"The undistorted images would go into '{cache}', which holds or is inside the "
                                 f"image folder '{images}'; give --out a path in another folder.")
    if overwrite:
        return
    remedy = "Write the conversion elsewhere with --out (its sparse points and undistorted images go beside it), " \
             "or pass --overwrite to replace it."
    refuse_foreign_file(out_path, is_our_transforms, remedy)
    refuse_foreign_file(points_path, lambda path: _points_file_is_ours(path, out_path), remedy)
    if undistort_dir is not None:
        claim_folder(undistort_dir, is_cache, "undistorted images", remedy)


def convert(scene_dir: str | None = None, model_dir: str | None = None, images_dir: str | None = None,
            out_path: str | None = None, normalize: bool = True, min_track: int = scene_fit.MIN_TRACK,
            overwrite: bool = False) -> Conversion:
    """Write ``transforms.json`` (default ``scene_dir/transforms.json``) for a COLMAP reconstruction.

    ``scene_dir`` holds ``images/`` and the model (``sparse/0/``, ``sparse/`` or itself);
    ``model_dir``, ``images_dir`` and ``out_path`` override those places. Distorted images
    are resampled into ``images_undistorted/`` next to the output file (redone only when
    their camera or file changes). Files the converter wrote before are replaced; anything
    else at an output's path is refused (``check_outputs``) unless ``overwrite``, and an input
    never is.
    """
    if scene_dir is None and (model_dir is None or images_dir is None):
        raise DatasetError("Give the scene folder (holding images/ and sparse/0/), or both the model folder and the "
                           "image folder.")
    model_dir = model_dir if model_dir is not None else find_model(scene_dir)
    images_dir = images_dir if images_dir is not None else os.path.join(scene_dir, "images")
    if out_path is None:
        out_path = os.path.join(scene_dir if scene_dir is not None else os.path.dirname(os.path.abspath(images_dir)),
                                "transforms.json")
    out_dir = os.path.dirname(os.path.abspath(out_path))
    model = read_model(model_dir)
    images, notes = check_images(model, images_dir)
    cameras = [model.cameras[image.camera_id] for image in images]

    target = shared_pinhole(cameras)
    paths = [os.path.join(images_dir, image.name) for image in images]
    undistorted = target is not None
    model_files = [os.path.join(model_dir, name + ext) for name in ("cameras", "images", "points3D")
                   for ext in (".bin", ".txt")]
    check_outputs(out_path, paths + model_files, os.path.join(out_dir, UNDISTORTED_DIR) if undistorted else None,
                  images_dir, overwrite)
    if target is None:
        target = _pinhole_of(cameras[0])
    else:
        jobs = [(path, image.name, camera) for path, image, camera in zip(paths, images, cameras)]
        paths = undistort_images(jobs, target, os.path.join(out_dir, UNDISTORTED_DIR))
        models = sorted({camera.model for camera in cameras})
        notes.append(f"{len(paths)} images ({', '.join(models)}, {len(set(c.camera_id for c in cameras))} camera(s)) "
                     f"resampled into one pinhole camera in '{os.path.join(out_dir, UNDISTORTED_DIR)}'.")

    c2w_opengl = np.stack([image.camera_to_world() for image in images]) @ _FLIP_YZ
    points = model.points
    views = view_points(images, points.ids)
    similarity, box, near_far, keep = fit_scene(c2w_opengl, points.xyz, points.track_lengths, views, target,
                                                normalize, min_track)
    poses = scene_fit.transform_poses(similarity, c2w_opengl)

    content = {
        WRITTEN_BY_KEY: CONVERTER,
        "w": target.width, "h": target.height, "fl_x": target.fx, "fl_y": target.fy, "cx": target.cx,
        "cy": target.cy,
        "camera_angle_x": 2.0 * float(np.arctan(target.width / (2.0 * target.fx))),
        "camera_angle_y": 2.0 * float(np.arctan(target.height / (2.0 * target.fy))),
        "aabb": box.tolist(), "near_far": [float(near_far[0]), float(near_far[1])],
        "colmap_to_world": similarity.tolist(),
        "colmap_model": os.path.relpath(os.path.abspath(model_dir), out_dir).replace(os.sep, "/"),
    }
    beyond = scene_fit.sees_beyond_box(scene_fit.transform_points(similarity, points.xyz), points.track_lengths,
                                       poses, box, min_track) if len(points.xyz) else None
    if beyond is not None:
        content["unbounded"] = True
        content["foreground_aabb"] = scene_fit.foreground_box(poses, (target.fx, target.fy),
                                                              (target.width, target.height)).tolist()
        notes.append(f"A capture around its object, and {beyond}: marked \"unbounded\": true, so training "
                     "models the space beyond the box too, with 'foreground_aabb' (a cube around what the cameras "
                     "look at) as its finest part; --unbounded 0 trains the box 'aabb' alone.")
    if keep.any():
        write_ply(os.path.join(out_dir, POINTS_FILE), scene_fit.transform_points(similarity, points.xyz[keep]),
                  points.rgb[keep])
        content["ply_file_path"] = POINTS_FILE
    content["frames"] = [
        {"file_path": "./" + os.path.relpath(os.path.abspath(path), out_dir).replace(os.sep, "/"),
         "transform_matrix": pose.tolist(), "colmap_image_id": image.image_id}
        for path, pose, image in zip(paths, poses, images)]
    os.makedirs(out_dir, exist_ok=True)
    write_atomically(out_path, json.dumps(content, indent=2).encode("utf-8"))
    if not keep.any():
        notes.append("The model has no sparse points seen by enough images: the box was fitted to where the "
                     "cameras' views overlap; check it with tools/preview_scene.py.")
    return Conversion(out_path, len(images), box, (float(near_far[0]), float(near_far[1])), int(keep.sum()),
                      undistorted, target, notes)
