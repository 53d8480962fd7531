"""COLMAP sparse models: reading and writing the binary and text forms, and the camera models.

A model is three files in one folder: ``cameras``, ``images`` and ``points3D``, either
``.bin`` (what ``colmap mapper`` writes) or ``.txt`` (``colmap model_converter --output_type
TXT``). Layout of the binary form (little-endian, as COLMAP's documentation "Output format"
gives it)::

    cameras.bin   uint64 count; per camera: int32 camera_id, int32 model_id, uint64 width,
                  uint64 height, float64 params[number of the model's parameters]
    images.bin    uint64 count; per image: int32 image_id, float64 qw qx qy qz tx ty tz,
                  int32 camera_id, name (bytes up to a NUL), uint64 n_points2D,
                  n_points2D x (float64 x, float64 y, int64 point3D_id; -1: none)
    points3D.bin  uint64 count; per point: uint64 point3D_id, float64 x y z, uint8 r g b,
                  float64 error, uint64 track_length, track_length x (int32 image_id,
                  int32 point2D_idx)

An image's (q, t) is the world-to-camera transform, x_cam = R(q) x_world + t, in OpenCV
camera axes (x right, y down, z forward). Pixel coordinates put the centre of the top-left
pixel at (0.5, 0.5), as the loaders' rays do; OpenCV's functions put it at (0, 0).
Only numpy is imported here.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from tensorf_jt.errors import DatasetError

# model name -> (COLMAP's model id, parameter names in file order)
CAMERA_MODELS: dict[str, tuple[int, tuple[str, ...]]] = {
    "SIMPLE_PINHOLE": (0, ("f", "cx", "cy")),
    "PINHOLE": (1, ("fx", "fy", "cx", "cy")),
    "SIMPLE_RADIAL": (2, ("f", "cx", "cy", "k")),
    "RADIAL": (3, ("f", "cx", "cy", "k1", "k2")),
    "OPENCV": (4, ("fx", "fy", "cx", "cy", "k1", "k2", "p1", "p2")),
    "OPENCV_FISHEYE": (5, ("fx", "fy", "cx", "cy", "k1", "k2", "k3", "k4")),
    "FULL_OPENCV": (6, ("fx", "fy", "cx", "cy", "k1", "k2", "p1", "p2", "k3", "k4", "k5", "k6")),
    "FOV": (7, ("fx", "fy", "cx", "cy", "omega")),
    "SIMPLE_RADIAL_FISHEYE": (8, ("f", "cx", "cy", "k")),
    "RADIAL_FISHEYE": (9, ("f", "cx", "cy", "k1", "k2")),
    "THIN_PRISM_FISHEYE": (10, ("fx", "fy", "cx", "cy", "k1", "k2", "p1", "p2", "k3", "k4", "sx1", "sy1")),
    "RAD_TAN_THIN_PRISM_FISHEYE": (11, ("fx", "fy", "cx", "cy", "k0", "k1", "k2", "k3", "k4", "k5", "p0", "p1",
                                        "s0", "s1", "s2", "s3")),
}
MODEL_NAMES = {model_id: name for name, (model_id, _) in CAMERA_MODELS.items()}
# The models ``Camera.distort`` implements (the others are read and written, not projected).
PROJECTED_MODELS = ("SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_RADIAL", "RADIAL", "OPENCV", "OPENCV_FISHEYE",
                    "FULL_OPENCV")
_PINHOLE_FAMILY = ("SIMPLE_PINHOLE", "PINHOLE", "SIMPLE_RADIAL", "RADIAL", "OPENCV", "FULL_OPENCV")
FILES = ("cameras", "images", "points3D")


@dataclass(frozen=True)
class Camera:
    """One calibration: model name, image size and the model's parameters (pixels)."""

    camera_id: int
    model: str
    width: int
    height: int
    params: tuple[float, ...]

    def param(self, name: str, default: float = 0.0) -> float:
        """A parameter by its name in ``CAMERA_MODELS`` (``f`` answers ``fx`` and ``fy``)."""
        names = CAMERA_MODELS[self.model][1]
        if name in names:
            return float(self.params[names.index(name)])
        if name in ("fx", "fy") and "f" in names:
            return float(self.params[names.index("f")])
        return default

    @property
    def focal(self) -> tuple[float, float]:
        """(fx, fy) in pixels."""
        return self.param("fx"), self.param("fy")

    @property
    def principal_point(self) -> tuple[float, float]:
        """(cx, cy) in pixels, top-left pixel centre at (0.5, 0.5)."""
        return self.param("cx"), self.param("cy")

    @property
    def is_pinhole(self) -> bool:
        """No distortion: a pinhole model, or a radial/OpenCV one with all coefficients 0 (a
        fisheye model never is: its projection is not a pinhole's even without coefficients)."""
        if self.model not in _PINHOLE_FAMILY:
            return False
        names = CAMERA_MODELS[self.model][1]
        return all(value == 0 for name, value in zip(names, self.params) if name not in ("f", "fx", "fy", "cx", "cy"))

    def distort(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Normalised image coordinates (x = X/Z, y = Y/Z) after the lens, as the model defines them."""
        if self.model not in PROJECTED_MODELS:
            raise DatasetError(f"Camera {self.camera_id} uses the {self.model} model, which is not supported "
                               f"(supported: {', '.join(PROJECTED_MODELS)}). Undistort the images with "
                               "'colmap image_undistorter' and convert its PINHOLE model instead.")
        p = self.param
        if self.model == "OPENCV_FISHEYE":
            r = np.hypot(x, y)
            theta = np.arctan(r)
            t2 = theta * theta
            theta_d = theta * (1 + t2 * (p("k1") + t2 * (p("k2") + t2 * (p("k3") + t2 * p("k4")))))
            scale = np.where(r > 1e-12, theta_d / np.maximum(r, 1e-12), 1.0)
            return x * scale, y * scale
        k1 = p("k1", p("k"))
        r2 = x * x + y * y
        radial = (1 + r2 * (k1 + r2 * (p("k2") + r2 * p("k3")))) / (1 + r2 * (p("k4") + r2 * (p("k5") + r2 * p("k6"))))
        p1, p2 = p("p1"), p("p2")
        return (x * radial + 2 * p1 * x * y + p2 * (r2 + 2 * x * x),
                y * radial + p1 * (r2 + 2 * y * y) + 2 * p2 * x * y)

    def project(self, directions: np.ndarray) -> np.ndarray:
        """Pixel coordinates [..., 2] (top-left pixel centre at 0.5) of camera-frame directions [..., 3] (z > 0)."""
        z = directions[..., 2]
        xd, yd = self.distort(directions[..., 0] / z, directions[..., 1] / z)
        (fx, fy), (cx, cy) = self.focal, self.principal_point
        return np.stack([fx * xd + cx, fy * yd + cy], axis=-1)


@dataclass(frozen=True)
class Image:
    """A registered image: world-to-camera pose (quaternion qw qx qy qz, translation), its camera
    and file name, and its 2-D points (``xys`` [n, 2]; ``point3D_ids`` [n], -1 where none)."""

    image_id: int
    qvec: np.ndarray
    tvec: np.ndarray
    camera_id: int
    name: str
    xys: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    point3D_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def camera_to_world(self) -> np.ndarray:
        """[4, 4], OpenCV camera axes: [R^T | -R^T t]."""
        rotation = quaternion_to_rotation(self.qvec)
        matrix = np.eye(4)
        matrix[:3, :3] = rotation.T
        matrix[:3, 3] = -rotation.T @ np.asarray(self.tvec, dtype=np.float64)
        return matrix


@dataclass(frozen=True)
class Points3D:
    """The sparse points as arrays: ``ids`` [n], ``xyz`` [n, 3], ``rgb`` [n, 3] uint8, ``error`` [n],
    and each point's track (``tracks[i]`` [k, 2]: image id, index of the 2-D point in that image)."""

    ids: np.ndarray
    xyz: np.ndarray
    rgb: np.ndarray
    error: np.ndarray
    tracks: list[np.ndarray]

    @staticmethod
    def empty() -> "Points3D":
        """No points (a model without points3D)."""
        return Points3D(np.zeros(0, dtype=np.int64), np.zeros((0, 3)), np.zeros((0, 3), dtype=np.uint8),
                        np.zeros(0), [])

    @property
    def track_lengths(self) -> np.ndarray:
        """Number of images that see each point [n]."""
        return np.array([len(track) for track in self.tracks], dtype=np.int64)


@dataclass(frozen=True)
class Model:
    """A sparse reconstruction: cameras and images by id, and the points."""

    cameras: dict[int, Camera]
    images: dict[int, Image]
    points: Points3D


def quaternion_to_rotation(qvec) -> np.ndarray:
    """Rotation matrix [3, 3] of a (w, x, y, z) quaternion; normalised first."""
    w, x, y, z = np.asarray(qvec, dtype=np.float64) / np.linalg.norm(qvec)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def rotation_to_quaternion(rotation: np.ndarray) -> np.ndarray:
    """(w, x, y, z), w >= 0, of a rotation matrix [3, 3] (from the largest of 4w², 4x², 4y², 4z²)."""
    r = np.asarray(rotation, dtype=np.float64)
    squares = 1 + np.array([r[0, 0] + r[1, 1] + r[2, 2], r[0, 0] - r[1, 1] - r[2, 2],
                            -r[0, 0] + r[1, 1] - r[2, 2], -r[0, 0] - r[1, 1] + r[2, 2]])
    k = int(np.argmax(squares))
    s = 2.0 * np.sqrt(squares[k])  # 4 times the largest component
    w_x_y_z = {
        0: (s / 4, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s),
        1: ((r[2, 1] - r[1, 2]) / s, s / 4, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s),
        2: ((r[0, 2] - r[2, 0]) / s, (r[0, 1] + r[1, 0]) / s, s / 4, (r[1, 2] + r[2, 1]) / s),
        3: ((r[1, 0] - r[0, 1]) / s, (r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, s / 4),
    }[k]
    q = np.array(w_x_y_z)
    return q if q[0] >= 0 else -q


def view_points(images: list[Image], point_ids: np.ndarray) -> list[np.ndarray]:
    """For each image, the indices (into ``point_ids``) of the sparse points it observes."""
    index_of = {int(point_id): i for i, point_id in enumerate(point_ids)}
    views = []
    for image in images:
        seen = np.array([index_of.get(int(p), -1) for p in image.point3D_ids if p >= 0], dtype=np.int64)
        views.append(np.unique(seen[seen >= 0]))
    return views


# ------------------------------------------------------------------ finding a model
def find_model(folder: str) -> str:
    """The folder holding a model's files: ``folder`` itself, ``folder/sparse/0`` or ``folder/sparse``."""
    candidates = [folder, os.path.join(folder, "sparse", "0"), os.path.join(folder, "sparse")]
    for candidate in candidates:
        if model_format(candidate) is not None:
            return candidate
    raise DatasetError(f"No COLMAP model (cameras.bin/.txt, images.bin/.txt) in {', '.join(map(repr, candidates))}. "
                       "Point at the folder COLMAP's mapper wrote (sparse/0), or give it with --model.")


def model_format(folder: str) -> str | None:
    """'.bin' or '.txt' when ``folder`` holds cameras and images in that form (binary first), else None."""
    for ext in (".bin", ".txt"):
        if all(os.path.isfile(os.path.join(folder, name + ext)) for name in FILES[:2]):
            return ext
    return None


def read_model(folder: str) -> Model:
    """The model in ``folder`` (binary or text); a missing points3D file gives no points."""
    ext = model_format(folder)
    if ext is None:
        raise DatasetError(f"'{folder}' holds no COLMAP model: cameras{'{.bin,.txt}'} and images{'{.bin,.txt}'} "
                           "are needed.")
    read = {".bin": (_read_cameras_bin, _read_images_bin, _read_points_bin),
            ".txt": (_read_cameras_txt, _read_images_txt, _read_points_txt)}[ext]
    paths = [os.path.join(folder, name + ext) for name in FILES]
    try:
        cameras, images = read[0](paths[0]), read[1](paths[1])
        points = read[2](paths[2]) if os.path.isfile(paths[2]) else Points3D.empty()
    except (struct.error, UnicodeDecodeError, ValueError, IndexError, KeyError) as err:
        raise DatasetError(f"The COLMAP model in '{folder}' is damaged or not a COLMAP {ext} model: "
                           f"{type(err).__name__}: {err}.") from None
    if not images:
        raise DatasetError(f"The COLMAP model in '{folder}' has no registered images.")
    unknown = sorted({image.camera_id for image in images.values()} - set(cameras))
    if unknown:
        raise DatasetError(f"The images of '{folder}' use camera id(s) {unknown}, which its cameras file lacks.")
    return Model(cameras, images, points)


def write_model(model: Model, folder: str, binary: bool = True) -> None:
    """Write ``model`` into ``folder`` as .bin files (``binary``) or .txt files."""
    os.makedirs(folder, exist_ok=True)
    writers = (_write_cameras_bin, _write_images_bin, _write_points_bin) if binary else \
        (_write_cameras_txt, _write_images_txt, _write_points_txt)
    ext = ".bin" if binary else ".txt"
    for writer, name, part in zip(writers, FILES, (model.cameras, model.images, model.points)):
        writer(part, os.path.join(folder, name + ext))


# ------------------------------------------------------------------ binary form
class _Reader:
    def __init__(self, path: str) -> None:
        with open(path, "rb") as handle:
            self.data = handle.read()
        self.offset, self.path = 0, path

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from("<" + fmt, self.data, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        values = np.frombuffer(self.data, dtype=np.dtype(dtype).newbyteorder("<"), count=count, offset=self.offset)
        self.offset += values.nbytes
        return values

    def name(self) -> str:
        end = self.data.index(b"\0", self.offset)
        text = self.data[self.offset:end].decode("utf-8")
        self.offset = end + 1
        return text

    def done(self) -> None:
        if self.offset != len(self.data):
            raise ValueError(f"{len(self.data) - self.offset} bytes left over at the end of '{self.path}'")


def _model_name(model_id: int) -> str:
    if model_id not in MODEL_NAMES:
        raise ValueError(f"unknown camera model id {model_id}")
    return MODEL_NAMES[model_id]


def _read_cameras_bin(path: str) -> dict[int, Camera]:
    reader, cameras = _Reader(path), {}
    for _ in range(reader.take("Q")[0]):
        camera_id, model_id, width, height = reader.take("iiQQ")
        model = _model_name(model_id)
        params = reader.take("d" * len(CAMERA_MODELS[model][1]))
        cameras[camera_id] = Camera(camera_id, model, width, height, tuple(params))
    reader.done()
    return cameras


def _read_images_bin(path: str) -> dict[int, Image]:
    reader, images = _Reader(path), {}
    for _ in range(reader.take("Q")[0]):
        image_id, qw, qx, qy, qz, tx, ty, tz, camera_id = reader.take("idddddddi")
        name = reader.name()
        n_points = reader.take("Q")[0]
        rows = reader.array("u1", 24 * n_points).view(np.dtype([("x", "<f8"), ("y", "<f8"), ("id", "<i8")]))
        xys = np.stack([rows["x"], rows["y"]], axis=-1).astype(np.float64)
        images[image_id] = Image(image_id, np.array([qw, qx, qy, qz]), np.array([tx, ty, tz]), camera_id, name,
                                 xys, rows["id"].astype(np.int64))
    reader.done()
    return images


def _read_points_bin(path: str) -> Points3D:
    reader = _Reader(path)
    ids, xyz, rgb, error, tracks = [], [], [], [], []
    for _ in range(reader.take("Q")[0]):
        point_id, x, y, z, r, g, b, err = reader.take("QdddBBBd")
        length = reader.take("Q")[0]
        ids.append(point_id)
        xyz.append((x, y, z))
        rgb.append((r, g, b))
        error.append(err)
        tracks.append(reader.array("<i4", 2 * length).reshape(length, 2).astype(np.int64))
    reader.done()
    return _points(ids, xyz, rgb, error, tracks)


def _points(ids, xyz, rgb, error, tracks) -> Points3D:
    return Points3D(np.array(ids, dtype=np.int64), np.array(xyz, dtype=np.float64).reshape(-1, 3),
                    np.array(rgb, dtype=np.uint8).reshape(-1, 3), np.array(error, dtype=np.float64), tracks)


def _write_cameras_bin(cameras: dict[int, Camera], path: str) -> None:
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(cameras)))
        for camera in cameras.values():
            handle.write(struct.pack("<iiQQ", camera.camera_id, CAMERA_MODELS[camera.model][0], camera.width,
                                     camera.height))
            handle.write(struct.pack("<" + "d" * len(camera.params), *camera.params))


def _write_images_bin(images: dict[int, Image], path: str) -> None:
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(images)))
        for image in images.values():
            handle.write(struct.pack("<idddddddi", image.image_id, *image.qvec, *image.tvec, image.camera_id))
            handle.write(image.name.encode("utf-8") + b"\0")
            rows = np.zeros(len(image.point3D_ids), dtype=[("x", "<f8"), ("y", "<f8"), ("id", "<i8")])
            rows["x"], rows["y"], rows["id"] = image.xys[:, 0], image.xys[:, 1], image.point3D_ids
            handle.write(struct.pack("<Q", len(rows)) + rows.tobytes())


def _write_points_bin(points: Points3D, path: str) -> None:
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(points.ids)))
        for i in range(len(points.ids)):
            handle.write(struct.pack("<QdddBBBd", points.ids[i], *points.xyz[i], *points.rgb[i], points.error[i]))
            track = np.asarray(points.tracks[i], dtype="<i4").reshape(-1, 2)
            handle.write(struct.pack("<Q", len(track)) + track.tobytes())


# ------------------------------------------------------------------ text form
def _data_lines(path: str) -> list[str]:
    """The lines that are not comments; blank lines kept (an image's 2-D points line may be empty)."""
    with open(path, "r", encoding="utf-8") as handle:
        return [line.rstrip("\r\n") for line in handle if not line.startswith("#")]


def _read_cameras_txt(path: str) -> dict[int, Camera]:
    cameras = {}
    for line in _data_lines(path):
        tokens = line.split()
        if not tokens:
            continue
        model = tokens[1] if len(tokens) > 1 else "?"
        if model not in CAMERA_MODELS:
            raise ValueError(f"camera line '{line}': unknown model {model}")
        n_params = len(CAMERA_MODELS[model][1])
        if len(tokens) != 4 + n_params:
            raise ValueError(f"camera line '{line}': the {model} model has {n_params} parameters")
        cameras[int(tokens[0])] = Camera(int(tokens[0]), model, int(tokens[2]), int(tokens[3]),
                                         tuple(float(t) for t in tokens[4:]))
    return cameras


def _read_images_txt(path: str) -> dict[int, Image]:
    """Two lines per image; a blank line where an image line is expected (a trailing newline) is skipped."""
    lines, images, index = _data_lines(path), {}, 0
    while index < len(lines):
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        tokens = line.split(None, 9)
        if len(tokens) < 10:
            raise ValueError(f"image line '{line}': expected IMAGE_ID QW QX QY QZ TX TY TZ CAMERA_ID NAME")
        numbers = [float(t) for t in tokens[1:8]]
        points = lines[index + 1].split() if index + 1 < len(lines) else []
        table = np.array(points, dtype=np.float64).reshape(-1, 3)
        image_id = int(tokens[0])
        images[image_id] = Image(image_id, np.array(numbers[:4]), np.array(numbers[4:]), int(tokens[8]), tokens[9],
                                 table[:, :2].copy(), table[:, 2].astype(np.int64))
        index += 2
    return images


def _read_points_txt(path: str) -> Points3D:
    ids, xyz, rgb, error, tracks = [], [], [], [], []
    for line in _data_lines(path):
        tokens = line.split()
        if not tokens:
            continue
        ids.append(int(tokens[0]))
        xyz.append([float(t) for t in tokens[1:4]])
        rgb.append([int(t) for t in tokens[4:7]])
        error.append(float(tokens[7]))
        tracks.append(np.array(tokens[8:], dtype=np.int64).reshape(-1, 2))
    return _points(ids, xyz, rgb, error, tracks)


def _write_cameras_txt(cameras: dict[int, Camera], path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("# Camera list with one line of data per camera:\n#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n")
        for camera in cameras.values():
            params = " ".join(repr(float(v)) for v in camera.params)
            handle.write(f"{camera.camera_id} {camera.model} {camera.width} {camera.height} {params}\n")


def _write_images_txt(images: dict[int, Image], path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("# Image list with two lines of data per image:\n"
                     "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n"
                     "#   POINTS2D[] as (X, Y, POINT3D_ID)\n")
        for image in images.values():
            pose = " ".join(repr(float(v)) for v in (*image.qvec, *image.tvec))
            handle.write(f"{image.image_id} {pose} {image.camera_id} {image.name}\n")
            handle.write(" ".join(f"{x!r} {y!r} {int(i)}" for (x, y), i in zip(image.xys.tolist(),
                                                                                 image.point3D_ids)) + "\n")


def _write_points_txt(points: Points3D, path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("# 3D point list with one line of data per point:\n"
                     "#   POINT3D_ID, X, Y, Z, R, G, B, ERROR, TRACK[] as (IMAGE_ID, POINT2D_IDX)\n")
        for i in range(len(points.ids)):
            x, y, z = (repr(float(v)) for v in points.xyz[i])
            r, g, b = (int(v) for v in points.rgb[i])
            track = " ".join(str(int(v)) for v in np.ravel(points.tracks[i]))
            handle.write(f"{int(points.ids[i])} {x} {y} {z} {r} {g} {b} {float(points.error[i])!r} {track}\n")
