"""Your own scenes ("own_data"): instant-ngp style ``transforms*.json`` (for example from COLMAP).

Layout::

    scene/transforms_train.json, transforms_test.json (transforms_val.json optional)
        or a single scene/transforms.json, split here (see below)
    scene/<file_path of each frame>   images, relative to the scene folder

Each JSON file holds the shared camera -- ``w``, ``h`` (pixels), focal lengths ``fl_x``,
``fl_y`` (pixels) or fields of view ``camera_angle_x``, ``camera_angle_y`` (radians), and
optionally the principal point ``cx``, ``cy`` (pixels; default the image centre) -- and
``frames``: ``file_path`` plus ``transform_matrix``, a 4x4 camera-to-world matrix in the
Blender/OpenGL convention (x right, y up, z back). ``tools/colmap_to_transforms.py`` writes
such a file from a COLMAP model; ``docs/DATASETS.md`` describes the format.

Faithful to the reference's ``YourOwnDataset`` by default: box [-1.5, 1.5]^3, near/far
0.1..100, white background (RGBA composited on white), unit-length ray directions through
pixel centres, poses converted to OpenCV. A file that carries ``aabb`` ([[xmin, ymin, zmin],
[xmax, ymax, zmax]]) and ``near_far`` ([near, far]) -- ``tools/colmap_to_transforms.py``
fits both to the capture -- uses those instead; the ``scene_bbox``/``near_far`` arguments
(the ``--scene_bbox``/``--near_far`` flags) override either. ``"unbounded": true`` marks a
capture with its room (``models.factory.scene_space``), and ``foreground_aabb`` is then the box
the unbounded mode models finest (default: ``aabb``; ``--scene_bbox`` overrides both).
Other differences: ``fl_x``/``fl_y`` are read when present (the reference needs the
angles); ``camera_angle_y`` or ``fl_y`` may be missing (then fy = fx); the principal point
is scaled with ``downsample`` (the reference keeps full-size cx, cy, which shifts every
downsampled ray); ``w``/``h`` default to the first image's size; ``file_path`` may carry its extension (the reference always appends ".png",
which breaks on COLMAP-converted files); a single ``transforms.json`` is split
deterministically; lens distortion (``k1``, ``k2``, ``p1``, ``p2``, ``k3``; ``k1``-``k4`` with
``"camera_model": "OPENCV_FISHEYE"`` or ``"is_fisheye": true``, as nerfstudio and instant-ngp
write them), which the reference ignores, is undone: the images are resampled once into a
pinhole camera (``undistort``, as the COLMAP converter does) and cached in
``images_undistorted/`` next to the transforms file. Split rule for a single file: frames sorted by
``file_path``, every 8th one (positions 0, 8, 16, ...) is the test split (and val), the
others train -- LLFF's hold-out rule. With ``holdout_sector`` (degrees) the frames of every
file are pooled and split by the cameras' azimuth instead (``sector_split``): test views from
directions no training photo covers. The render path (the reference has none) circles the
box centre at the training cameras' mean distance and elevation, with "up" the cameras' mean
up vector.

Poses are checked against the box (``conventions``): cameras that turn away from it are
refused with a message naming the convention they look like and the ``--pose_format`` that
reads them so; ``pose_format`` reads files written as OpenCV or world-to-camera matrices.
"""
from __future__ import annotations

import json
import os
from typing import Optional, Sequence

import numpy as np

from tensorf_jt.dataLoader.views import ViewDataset, fit_pixels, read_all_pixels, read_pixels
from tensorf_jt.dataLoader.camera_checks import check_field_of_view, check_pose
from tensorf_jt.dataLoader.camera_paths import orbit_path
from tensorf_jt.dataLoader.conventions import DEFAULT_POSE_FORMAT, check_pose_format, to_c2w_opengl
from tensorf_jt.dataLoader.sector_split import sector_split
from tensorf_jt.dataLoader.sparse_points import KeypointRays, transforms_keypoints
from tensorf_jt.dataLoader.undistort import shared_pinhole, undistort_images
from tensorf_jt.errors import DatasetError
from tensorf_jt.formats.colmap import Camera
from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV, get_ray_directions

HOLD_EVERY = 8  # single transforms.json: every 8th frame (sorted by file_path) is a test frame
DEFAULT_BBOX = ((-1.5, -1.5, -1.5), (1.5, 1.5, 1.5))
DEFAULT_NEAR_FAR = (0.1, 100.0)
DISTORTION_KEYS = ("k1", "k2", "k3", "k4", "p1", "p2")
UNDISTORTED_DIR = "images_undistorted"  # resampled copies of distorted images, next to the transforms file
_MISSING_LISTED = 5  # missing images named in the message


def read_json(path: str) -> dict:
    """A transforms file as a dict, with its frames checked."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            meta = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"'{path}' is not valid JSON: {err}.") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("frames"), list):
        raise DatasetError(f"'{path}' lacks the list 'frames'.")
    if not meta["frames"]:
        raise DatasetError(f"'{path}' lists no frames.")
    for index, frame in enumerate(meta["frames"]):
        for key in ("file_path", "transform_matrix"):
            if not isinstance(frame, dict) or key not in frame:
                raise DatasetError(f"Frame {index} of '{path}' lacks the key '{key}'.")
        if not isinstance(frame["file_path"], str):
            raise DatasetError(f"Frame {index} of '{path}': 'file_path' must be a string.")
        try:
            shape = np.asarray(frame["transform_matrix"], dtype=np.float64).shape
        except (TypeError, ValueError):
            shape = None
        if shape != (4, 4):
            raise DatasetError(f"Frame {index} of '{path}': 'transform_matrix' must be a 4x4 matrix of "
                               f"numbers.")
        check_pose(frame["transform_matrix"], f"frame {index} ('{frame['file_path']}') of '{path}'")
    return meta


def split_frames(frames: list[dict], split: str, hold_every: int = HOLD_EVERY) -> list[dict]:
    """This split's frames of a single transforms.json: sorted by file_path, every ``hold_every``-th to test/val."""
    ordered = sorted(frames, key=lambda frame: str(frame["file_path"]))
    if split == "train":
        return [frame for i, frame in enumerate(ordered) if i % hold_every]
    return ordered[::hold_every]


def _number(meta: dict, key: str, path: str) -> float | None:
    if key not in meta:
        return None
    try:
        value = float(meta[key])
    except (TypeError, ValueError):
        raise DatasetError(f"'{path}': '{key}' must be a number, got {meta[key]!r}.") from None
    if not np.isfinite(value):
        raise DatasetError(f"'{path}': '{key}' must be finite.")
    return value


def checked_bbox(value, where: str) -> np.ndarray:
    """A scene box [2, 3] float64 from ``[[xmin, ymin, zmin], [xmax, ymax, zmax]]`` (or six
    numbers in that order); refused unless finite with every min below its max."""
    try:
        box = np.asarray(value, dtype=np.float64).reshape(2, 3)
    except (TypeError, ValueError):
        raise DatasetError(f"{where} must be [[xmin, ymin, zmin], [xmax, ymax, zmax]], got {value!r}.") from None
    if not np.all(np.isfinite(box)) or np.any(box[1] <= box[0]):
        raise DatasetError(f"{where} must be finite with each minimum below its maximum "
                           f"([[xmin, ymin, zmin], [xmax, ymax, zmax]]), got {box.tolist()}.")
    return box


def checked_near_far(value, where: str) -> tuple[float, float]:
    """(near, far) from two numbers; refused unless finite with 0 <= near < far."""
    try:
        near, far = (float(v) for v in value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where} must be two numbers [near, far], got {value!r}.") from None
    if not (np.isfinite(near) and np.isfinite(far) and 0 <= near < far):
        raise DatasetError(f"{where} must be [near, far] with 0 <= near < far, got [{near:g}, {far:g}].")
    return near, far


class OwnDataDataset(ViewDataset):
    """One split of an instant-ngp style scene, loaded into host memory.

    Attributes as the common interface (``tensorf_jt.dataLoader``); ``focal`` is [fx, fy] at
    the loaded size, ``intrinsics`` the 3x3 matrix at the loaded size, ``poses`` the split's
    OpenCV camera-to-world matrices [n, 4, 4], ``transforms_path`` the file the frames came
    from, ``bounds_source`` where ``scene_bbox`` and ``near_far`` come from.
    ``scene_bbox`` ([2, 3]) and ``near_far`` override the file's ``aabb`` and ``near_far``;
    ``pose_format`` says how ``transform_matrix`` is written (``conventions.POSE_FORMATS``).
    """

    scene_bbox = np.array(DEFAULT_BBOX, dtype=np.float32)
    near_far = list(DEFAULT_NEAR_FAR)
    white_bg = True
    all_depths = None

    def __init__(self, datadir: str, split: str = "train", downsample: float = 1.0, is_stack: bool = False,
                 scene_bbox: Optional[Sequence[float]] = None, near_far: Optional[Sequence[float]] = None,
                 pose_format: str = DEFAULT_POSE_FORMAT, holdout_sector: float = 0.0,
                 holdout_center: Optional[float] = None) -> None:
        if downsample <= 0:
            raise DatasetError(f"downsample must be positive, got {downsample}.")
        self.root_dir, self.split, self.is_stack = datadir, split, is_stack
        self.downsample, self.pose_format = float(downsample), pose_format
        self.holdout_sector, self.holdout_center = float(holdout_sector), holdout_center
        self._box_argument = scene_bbox
        self.transforms_path, meta, frames = self._read_split(split)
        self._meta, self._frames = meta, frames
        self._set_bounds(meta, scene_bbox, near_far)
        check_pose_format(np.stack([frame["transform_matrix"] for frame in meta["frames"]]).astype(np.float64),
                          pose_format, self.scene_bbox, f"'{self.transforms_path}'")
        self._set_camera(meta, frames)
        self._load_frames(frames)
        train_frames = frames if split == "train" else self._read_split("train")[2]
        train_poses = np.stack([self._pose(frame) for frame in train_frames])
        self.render_path = orbit_path(train_poses, self.scene_bbox.astype(np.float64).mean(0),
                                      n_views=120).astype(np.float32)

    def sparse_points(self) -> tuple[KeypointRays | None, str]:
        """Rays from this split's cameras to the COLMAP points they observe, when the transforms
        file comes from ``tools/colmap_to_transforms.py`` (``dataLoader.sparse_points``); else
        None and why not."""
        c2w = np.stack([self._pose(frame) for frame in self._frames])
        return transforms_keypoints(self.transforms_path, self._meta, self._frames, c2w)

    def _read_split(self, split: str) -> tuple[str, dict, list[dict]]:
        """(file, metadata, frames) of ``split``, from its own file or from a single transforms.json
        (or, with a held-out sector, from all of them)."""
        own = os.path.join(self.root_dir, f"transforms_{split}.json")
        single = os.path.join(self.root_dir, "transforms.json")
        if self.holdout_sector > 0 and (os.path.isfile(own) or os.path.isfile(single)):
            return self._read_sector_split(split)
        if os.path.isfile(own):
            meta = read_json(own)
            return own, meta, meta["frames"]
        if os.path.isfile(single):
            meta = read_json(single)
            frames = split_frames(meta["frames"], split)
            if not frames:
                raise DatasetError(f"'{single}' has {len(meta['frames'])} frames: too few for a {split} split "
                                   f"(every {HOLD_EVERY}th frame is held out for testing).")
            return single, meta, frames
        folder = self.root_dir
        raise DatasetError(
            f"Neither '{own}' nor '{single}' exists. Point --datadir at a scene folder with "
            f"transforms_train.json/transforms_test.json or a single transforms.json "
            f"(tools/colmap_to_transforms.py writes one from COLMAP); '{folder}' "
            f"{'exists' if os.path.isdir(folder) else 'does not exist'}.")

    def _read_sector_split(self, split: str) -> tuple[str, dict, list[dict]]:
        """``split`` of the held-out-sector split (``sector_split``): the frames of every file
        pooled (by file_path), those in the sector to test and val, the others to train. The
        camera and bounds are the first file's (the training file's, if there is one)."""
        names = [name for name in ("transforms_train.json", "transforms_test.json", "transforms_val.json",
                                   "transforms.json") if os.path.isfile(os.path.join(self.root_dir, name))]
        paths = [os.path.join(self.root_dir, name) for name in names]
        metas = [read_json(path) for path in paths]
        pooled: dict[str, dict] = {}
        for meta in metas:
            for frame in meta["frames"]:
                pooled.setdefault(str(frame["file_path"]), frame)
        frames = [pooled[key] for key in sorted(pooled)]
        c2w = to_c2w_opengl(np.stack([np.asarray(frame["transform_matrix"], dtype=np.float64) for frame in frames]),
                            self.pose_format)
        key = next((key for key in ("foreground_aabb", "aabb") if key in metas[0]), None)
        box = (checked_bbox(self._box_argument, "--scene_bbox") if self._box_argument is not None else
               checked_bbox(metas[0][key], f"'{key}' of '{paths[0]}'") if key else None)
        train, test, center = sector_split(c2w, self.holdout_sector, self.holdout_center, box,
                                           source=f"'{self.root_dir}'")
        self.holdout_center = center
        return paths[0], metas[0], [frames[i] for i in (train if split == "train" else test)]

    def _set_bounds(self, meta: dict, scene_bbox, near_far) -> None:
        """Scene box and near/far: the arguments, else the file's ``aabb``/``near_far``, else the reference's."""
        path, sources = self.transforms_path, []
        if scene_bbox is not None:
            box, source = checked_bbox(scene_bbox, "--scene_bbox"), "box from --scene_bbox"
        elif "aabb" in meta:
            box, source = checked_bbox(meta["aabb"], f"'aabb' of '{path}'"), "box from transforms file"
        else:
            box, source = np.array(DEFAULT_BBOX), "default box"
        sources.append(source)
        if near_far is not None:
            bounds, source = checked_near_far(near_far, "--near_far"), "near/far from --near_far"
        elif "near_far" in meta:
            bounds = checked_near_far(meta["near_far"], f"'near_far' of '{path}'")
            source = "near/far from transforms file"
        else:
            bounds, source = DEFAULT_NEAR_FAR, "default near/far"
        sources.append(source)
        self.scene_bbox = box.astype(np.float32)
        self.near_far = [float(bounds[0]), float(bounds[1])]
        self.bounds_source = ", ".join(sources)
        if scene_bbox is None and "foreground_aabb" in meta:
            self.foreground_bbox = checked_bbox(meta["foreground_aabb"], f"'foreground_aabb' of '{path}'").astype(
                np.float32)
            self.foreground_source = "foreground box from transforms file"
        if "unbounded" in meta:
            if not isinstance(meta["unbounded"], bool):
                raise DatasetError(f"'{path}': 'unbounded' must be true or false (a JSON boolean), got "
                                   f"{meta['unbounded']!r}. Write \"unbounded\": true for a capture whose room or "
                                   "sky reaches beyond the box, or remove the key.")
            self.unbounded = meta["unbounded"]
            self.unbounded_source = f"'unbounded' of '{os.path.basename(path)}'"

    def _lens(self, meta: dict, size: tuple[int, int], focal: tuple[float, float],
              center: tuple[float, float]) -> Camera | None:
        """The file's camera with its lens distortion as a COLMAP camera model; None without any."""
        path = self.transforms_path
        k1, k2, k3, k4, p1, p2 = (_number(meta, key, path) or 0.0 for key in DISTORTION_KEYS)
        if not any((k1, k2, k3, k4, p1, p2)):
            return None
        fisheye = str(meta.get("camera_model", "")).upper() == "OPENCV_FISHEYE" or meta.get("is_fisheye") is True
        intrinsics = (*focal, *center)
        if fisheye:
            if p1 or p2:
                raise DatasetError(f"'{path}': a fisheye lens (OPENCV_FISHEYE) has k1-k4 and no tangential terms, "
                                   f"but p1 = {p1:g}, p2 = {p2:g} are given. Remove them or the fisheye marker.")
            return Camera(1, "OPENCV_FISHEYE", *size, (*intrinsics, k1, k2, k3, k4))
        if k4:
            raise DatasetError(f"'{path}': k4 = {k4:g} belongs to a fisheye lens, but the file does not say "
                               "\"camera_model\": \"OPENCV_FISHEYE\" (or \"is_fisheye\": true); add it, or remove k4.")
        if k3:
            return Camera(1, "FULL_OPENCV", *size, (*intrinsics, k1, k2, p1, p2, k3, 0.0, 0.0, 0.0))
        return Camera(1, "OPENCV", *size, (*intrinsics, k1, k2, p1, p2))

    def _image_path(self, file_path: str) -> str:
        path = os.path.join(self.root_dir, file_path)
        return path if os.path.splitext(path)[1].lower() in (".png", ".jpg", ".jpeg") else path + ".png"

    def _set_camera(self, meta: dict, frames: list[dict]) -> None:
        """Image size, focal lengths and principal point at the loaded size; pixel directions."""
        path = self.transforms_path
        full_w, full_h = _number(meta, "w", path), _number(meta, "h", path)
        if full_w is None or full_h is None:
            full_h, full_w = read_pixels(self._image_path(frames[0]["file_path"]))[0].shape[:2]
        if full_w < 1 or full_h < 1:
            raise DatasetError(f"'{path}': image size {full_w}x{full_h} is not positive.")
        fx = _number(meta, "fl_x", path)
        if fx is None:
            angle_x = _number(meta, "camera_angle_x", path)
            if angle_x is None:
                raise DatasetError(f"'{path}' gives no focal length: add 'fl_x' (pixels) or 'camera_angle_x' "
                                   f"(radians).")
            fx = 0.5 * full_w / np.tan(0.5 * check_field_of_view(angle_x, "camera_angle_x", f"'{path}'"))
        fy = _number(meta, "fl_y", path)
        if fy is None:
            angle_y = _number(meta, "camera_angle_y", path)
            fy = fx if angle_y is None else 0.5 * full_h / np.tan(
                0.5 * check_field_of_view(angle_y, "camera_angle_y", f"'{path}'"))
        if fx <= 0 or fy <= 0:
            raise DatasetError(f"'{path}': focal lengths must be positive, got {fx:g}, {fy:g}.")
        cx, cy = _number(meta, "cx", path), _number(meta, "cy", path)
        cx = full_w / 2.0 if cx is None else cx
        cy = full_h / 2.0 if cy is None else cy

        self.full_wh = (int(round(full_w)), int(round(full_h)))
        self.lens = self._lens(meta, self.full_wh, (fx, fy), (cx, cy))
        self.pinhole = None if self.lens is None else shared_pinhole([self.lens])
        if self.pinhole is not None:
            fx, fy, cx, cy = self.pinhole.fx, self.pinhole.fy, self.pinhole.cx, self.pinhole.cy
        w, h = int(full_w / self.downsample), int(full_h / self.downsample)
        if w < 1 or h < 1:
            raise DatasetError(f"downsample {self.downsample:g} leaves no pixels of the {full_w:g}x{full_h:g} images.")
        self.img_wh = (w, h)
        sx, sy = w / full_w, h / full_h
        self.focal = [fx * sx, fy * sy]
        self.intrinsics = np.array([[fx * sx, 0.0, cx * sx], [0.0, fy * sy, cy * sy], [0.0, 0.0, 1.0]])
        directions = get_ray_directions(h, w, self.focal, center=(cx * sx, cy * sy))
        self.directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)

    def _pose(self, frame: dict) -> np.ndarray:
        """A frame's camera-to-world matrix in the OpenCV convention (checked by ``read_json``)."""
        matrix = np.asarray(frame["transform_matrix"], dtype=np.float64)
        return to_c2w_opengl(matrix[None], self.pose_format)[0] @ BLENDER_TO_OPENCV

    def _load_frames(self, frames: list[dict]) -> None:
        w, h = self.img_wh
        self.image_paths = [self._image_path(frame["file_path"]) for frame in frames]
        missing = [path for path in self.image_paths if not os.path.isfile(path)]
        if missing:
            listed = ", ".join(f"'{os.path.basename(path)}'" for path in missing[:_MISSING_LISTED])
            more = f" and {len(missing) - _MISSING_LISTED} more" if len(missing) > _MISSING_LISTED else ""
            raise DatasetError(
                f"Image '{missing[0]}' listed in the transforms file does not exist; {len(missing)} of the "
                f"{len(frames)} images of the {self.split} split in '{self.transforms_path}' are missing ({listed}"
                f"{more}). Each frame's file_path is relative to '{self.root_dir}': copy the images there or fix "
                "the paths (tools/colmap_to_transforms.py writes them relative to its output file).")
        if self.pinhole is not None:
            folder = os.path.dirname(os.path.abspath(self.transforms_path))
            names = [os.path.relpath(os.path.abspath(path), folder) for path in self.image_paths]
            names = [os.path.basename(name) if name.startswith("..") else name for name in names]
            jobs = [(path, name, self.lens) for path, name in zip(self.image_paths, names)]
            self.image_paths = undistort_images(jobs, self.pinhole, os.path.join(folder, UNDISTORTED_DIR))
        pixels, scales = zip(*read_all_pixels(self.image_paths, fit=lambda path, image, scale: fit_pixels(
            image, scale, path, self.full_wh, f"'{self.transforms_path}' says ('w', 'h')", (w, h))))
        poses = np.stack([self._pose(frame) for frame in frames])
        self.poses = poses.astype(np.float32)
        self.store_views(pixels, scales, poses, self.directions)
