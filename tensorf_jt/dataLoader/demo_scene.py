"""A procedural scene, ray-cast analytically, written in the NeRF-synthetic ("blender") layout.

No dataset can be downloaded on the machines this project is built on, so it makes its own: a
textured platform with a checkered sphere, a rotated box covered in a fine grid of lines, a
banded cylinder and a glossy ball, lit by one directional light with hard shadows. Fine
texture (lines 1/60 of the scene wide) makes grid resolution visible in the results; the
specular highlights make the colour view-dependent. Everything lies inside [-1.5, 1.5]^3.

The output is exactly the blender layout -- ``transforms_{train,val,test}.json`` with
``camera_angle_x`` and Blender/OpenGL camera-to-world matrices, straight-alpha RGBA PNGs on a
transparent background -- plus ground-truth depth for test views (``depth_path`` entries,
float32 ``.npy`` ray distances, 0 where the ray misses). Rendering is deterministic.

With ``room`` the same objects stand in a room (``dataset_name = demo_room``): papered walls
``ROOM_HALF_WIDTH`` from the centre, a tiled floor, a ceiling, and the cameras inside it, closer
than in the plain scene -- the kind of capture a phone walked around an object makes. Every
pixel then sees something; the box [-1.5, 1.5]^3 holds the objects only, and the files say
``"unbounded": true`` along with that box and near/far (the own_data layout's keys).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import imageio.v3 as iio
import numpy as np

from tensorf_jt.errors import OutputConflict
from tensorf_jt.formats.ownership import files_in, listed, read_json_object
from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV, focal_from_fov, get_ray_directions

SCENE_VERSION = 1
ROOM_HALF_WIDTH, ROOM_FLOOR, ROOM_CEILING = 6.0, -0.85, 4.0
ROOM_OBJECT_BOX = ((-1.5, -1.5, -1.5), (1.5, 1.5, 1.5))
ROOM_NEAR_FAR = (0.5, 16.0)
SPEC_FILE = "demo_scene.json"  # the generator's mark on a folder: written first, complete last
_GENERATED = re.compile(r"demo_scene\.json|transforms_(train|val|test)\.json"
                        r"|(train|val|test)/r_[0-9]+(\.png|_depth\.npy)")  # every name the generator writes
_EPS = 1e-4
_LIGHT = np.array([0.45, -0.35, 1.0]) / np.linalg.norm([0.45, -0.35, 1.0])


@dataclass(frozen=True)
class DemoSceneSpec:
    """What to render: image size, view counts and camera placement."""

    image_size: int = 100
    n_train: int = 60
    n_val: int = 4
    n_test: int = 8
    camera_radius: float = 4.0
    camera_angle_x: float = 0.6911112070083618  # the NeRF-synthetic scenes' field of view
    supersampling: int = 3
    test_elevation_deg: float = 30.0
    room: bool = False  # the objects inside a room (an unbounded scene)


# ------------------------------------------------------------------ geometry
def _sphere(o, d, center, radius):
    oc = o - center
    b = np.einsum("ij,ij->i", oc, d)
    c = np.einsum("ij,ij->i", oc, oc) - radius * radius
    disc = b * b - c
    root = np.sqrt(np.maximum(disc, 0.0))
    near, far = -b - root, -b + root
    t = np.where(near > _EPS, near, far)
    t = np.where((disc >= 0) & (t > _EPS), t, np.inf)
    normal = (o + np.nan_to_num(t[:, None], posinf=0.0) * d - center) / radius
    return t, normal


def _rotation_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _box(o, d, center, half, angle):
    rot = _rotation_z(angle)
    o_local, d_local = (o - center) @ rot, d @ rot
    safe = np.where(np.abs(d_local) < 1e-12, 1e-12, d_local)
    t1, t2 = (-half - o_local) / safe, (half - o_local) / safe
    t_near, t_far = np.minimum(t1, t2), np.maximum(t1, t2)
    t_enter, t_exit = t_near.max(1), t_far.min(1)
    t = np.where(t_enter > _EPS, t_enter, t_exit)
    t = np.where((t_exit >= t_enter) & (t > _EPS), t, np.inf)
    axis = np.where((t_enter > _EPS)[:, None], t_near, -t_far).argmax(1)
    normal_local = np.zeros_like(o)
    rows = np.arange(o.shape[0])
    hit_local = o_local + np.nan_to_num(t[:, None], posinf=0.0) * d_local
    normal_local[rows, axis] = np.sign(hit_local[rows, axis])
    return t, normal_local @ rot.T


def _cylinder(o, d, center_xy, radius, z_low, z_high):
    ox, oy = o[:, 0] - center_xy[0], o[:, 1] - center_xy[1]
    a = d[:, 0] ** 2 + d[:, 1] ** 2
    b = ox * d[:, 0] + oy * d[:, 1]
    c = ox ** 2 + oy ** 2 - radius ** 2
    disc = b * b - a * c
    safe_a = np.where(a < 1e-12, 1e-12, a)
    root = np.sqrt(np.maximum(disc, 0.0))
    t_side = np.full(o.shape[0], np.inf)
    for candidate in ((-b - root) / safe_a, (-b + root) / safe_a):
        z = o[:, 2] + candidate * d[:, 2]
        ok = (disc >= 0) & (a > 1e-12) & (candidate > _EPS) & (z >= z_low) & (z <= z_high)
        t_side = np.where(ok & (candidate < t_side), candidate, t_side)
    best_t, normal = t_side, np.zeros_like(o)
    hit_side = np.isfinite(t_side)
    side_point = o + np.nan_to_num(t_side[:, None], posinf=0.0) * d
    normal[hit_side, 0] = (side_point[hit_side, 0] - center_xy[0]) / radius
    normal[hit_side, 1] = (side_point[hit_side, 1] - center_xy[1]) / radius
    safe_dz = np.where(np.abs(d[:, 2]) < 1e-12, 1e-12, d[:, 2])
    for z_cap, nz in ((z_high, 1.0), (z_low, -1.0)):
        t_cap = (z_cap - o[:, 2]) / safe_dz
        px, py = ox + t_cap * d[:, 0], oy + t_cap * d[:, 1]
        ok = (t_cap > _EPS) & (px ** 2 + py ** 2 <= radius ** 2) & (t_cap < best_t)
        best_t = np.where(ok, t_cap, best_t)
        normal[ok] = (0.0, 0.0, nz)
    return best_t, normal


# --------------------------------------------------------------- the objects
_BIG_SPHERE = (np.array([-0.45, -0.35, -0.15]), 0.55)
_SMALL_SPHERE = (np.array([0.5, 0.45, 0.42]), 0.2)
_BOX = (np.array([0.5, 0.45, -0.3]), np.array([0.35, 0.35, 0.4]), np.deg2rad(25.0))
_COLUMN = (np.array([0.55, -0.6]), 0.22, -0.7, 0.55)
_PLATFORM = (np.array([0.0, 0.0]), 1.25, -0.8, -0.7)


def _room(o, d):
    """The inside of the room: where each ray (from inside) leaves it, and the inward normal."""
    low = np.array([-ROOM_HALF_WIDTH, -ROOM_HALF_WIDTH, ROOM_FLOOR])
    high = np.array([ROOM_HALF_WIDTH, ROOM_HALF_WIDTH, ROOM_CEILING])
    safe = np.where(np.abs(d) < 1e-12, 1e-12, d)
    exits = np.maximum((low - o) / safe, (high - o) / safe)
    axis = exits.argmin(1)
    rows = np.arange(o.shape[0])
    normal = np.zeros_like(o)
    normal[rows, axis] = -np.sign(d[rows, axis])
    return exits[rows, axis], normal


_ROOM_ID = 5


def _intersections(o: np.ndarray, d: np.ndarray, room: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    hits = [
        _cylinder(o, d, *_PLATFORM),
        _sphere(o, d, *_BIG_SPHERE),
        _box(o, d, *_BOX),
        _cylinder(o, d, *_COLUMN),
        _sphere(o, d, *_SMALL_SPHERE),
    ]
    return hits + [_room(o, d)] if room else hits


def _closest_hit(o: np.ndarray, d: np.ndarray, room: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nearest hit of each ray: distance (inf = miss), object id, surface normal."""
    hits = _intersections(o, d, room)
    distances = np.stack([t for t, _ in hits], axis=1)
    object_id = distances.argmin(1)
    rows = np.arange(o.shape[0])
    normals = np.stack([n for _, n in hits], axis=1)[rows, object_id]
    return distances[rows, object_id], object_id, normals


def _checker(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.floor(a) + np.floor(b)) % 2 == 0


def _albedo(object_id: np.ndarray, points: np.ndarray, normals: np.ndarray) -> np.ndarray:
    colour = np.zeros_like(points)

    def paint(mask, base, other=None, pattern=None):
        if other is None:
            colour[mask] = base
        else:
            colour[mask] = np.where(pattern[mask, None], base, other)

    x, y, z = points[:, 0], points[:, 1], points[:, 2]
    # Platform: checkerboard top with thin dark rings, grey rim.
    top = (object_id == 0) & (normals[:, 2] > 0.5)
    radius = np.hypot(x, y)
    ring = np.abs(((radius + 0.15) % 0.3) - 0.15) < 0.012
    paint(top, (0.92, 0.86, 0.70), (0.20, 0.50, 0.56), _checker(x / 0.2, y / 0.2))
    colour[top & ring] = (0.08, 0.08, 0.10)
    colour[(object_id == 0) & ~top] = (0.35, 0.35, 0.38)
    # Big sphere: latitude/longitude checker.
    rel = points - _BIG_SPHERE[0]
    azimuth = np.arctan2(rel[:, 1], rel[:, 0]) / (2 * np.pi) * 12
    polar = np.arccos(np.clip(rel[:, 2] / _BIG_SPHERE[1], -1, 1)) / np.pi * 6
    paint(object_id == 1, (0.86, 0.18, 0.14), (0.96, 0.92, 0.86), _checker(azimuth, polar))
    # Box: warm faces with a fine grid of dark blue lines.
    local = (points - _BOX[0]) @ _rotation_z(_BOX[2])
    near_line = np.abs(((local + 0.05) % 0.1) - 0.05) < 0.009
    on_face = np.abs(np.abs(local) - _BOX[1]) < 1e-3
    lines = (near_line & ~on_face).any(1)
    paint(object_id == 2, (0.10, 0.16, 0.42), (0.96, 0.74, 0.22), lines)
    # Column: horizontal bands.
    paint(object_id == 3, (0.16, 0.58, 0.24), (0.86, 0.92, 0.80), np.floor(z / 0.08) % 2 == 0)
    # Small glossy ball.
    colour[object_id == 4] = (0.52, 0.30, 0.74)
    # Room: wallpaper of diamonds under a dado rail, plank floor, plain ceiling.
    walls = (object_id == _ROOM_ID) & (np.abs(normals[:, 2]) < 0.5)
    along = np.where(np.abs(normals[:, 0]) > 0.5, y, x)
    paint(walls, (0.78, 0.70, 0.56), (0.45, 0.55, 0.66), _checker((along + z) / 0.7, (along - z) / 0.7))
    colour[walls & (np.abs(z - 0.9) < 0.06)] = (0.30, 0.20, 0.14)
    floor = (object_id == _ROOM_ID) & (normals[:, 2] > 0.5)
    plank = np.floor(x / 0.45)
    paint(floor, (0.55, 0.36, 0.20), (0.68, 0.47, 0.27), (plank + np.floor(y / 1.6 + 0.5 * plank)) % 2 == 0)
    colour[(object_id == _ROOM_ID) & (normals[:, 2] < -0.5)] = (0.90, 0.90, 0.86)
    return colour


_SPECULAR = {1: (0.35, 40.0), 4: (0.7, 80.0)}  # object id -> (strength, shininess)


def _shade(o: np.ndarray, d: np.ndarray, room: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Colour [N, 3], coverage [N] (0/1) and hit distance [N] (0 = miss) of each ray. The light
    shines into the room (the objects cast shadows, the room itself none)."""
    t, object_id, normals = _closest_hit(o, d, room)
    hit = np.isfinite(t)
    colour = np.zeros_like(o)
    if hit.any():
        points = o[hit] + t[hit, None] * d[hit]
        n = normals[hit] / np.linalg.norm(normals[hit], axis=1, keepdims=True)
        n = np.where((np.einsum("ij,ij->i", n, d[hit]) > 0)[:, None], -n, n)
        lit = ~np.isfinite(_closest_hit(points + 2e-3 * n, np.broadcast_to(_LIGHT, points.shape))[0])
        diffuse = np.clip(n @ _LIGHT, 0.0, None) * lit
        shaded = _albedo(object_id[hit], points, n) * (0.3 + 0.7 * diffuse)[:, None]
        half_vector = _LIGHT - d[hit]
        half_vector /= np.linalg.norm(half_vector, axis=1, keepdims=True)
        for oid, (strength, shininess) in _SPECULAR.items():
            mask = (object_id[hit] == oid) & lit
            highlight = np.clip(np.einsum("ij,ij->i", n[mask], half_vector[mask]), 0, None) ** shininess
            shaded[mask] += strength * highlight[:, None]
        colour[hit] = np.clip(shaded, 0.0, 1.0)
    return colour, hit.astype(np.float64), np.where(hit, t, 0.0)


# ------------------------------------------------------------------- cameras
def look_at_origin(position: np.ndarray) -> np.ndarray:
    """Blender/OpenGL camera-to-world [4, 4] for a camera at ``position`` looking at the origin, z up."""
    forward = -position / np.linalg.norm(position)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    c2w = np.eye(4)
    c2w[:3, 0], c2w[:3, 1], c2w[:3, 2], c2w[:3, 3] = right, up, -forward, position
    return c2w


def _on_sphere(radius: float, azimuth: np.ndarray, elevation: np.ndarray) -> np.ndarray:
    return radius * np.stack([np.cos(elevation) * np.cos(azimuth),
                              np.cos(elevation) * np.sin(azimuth), np.sin(elevation)], axis=1)


def camera_positions(spec: DemoSceneSpec) -> dict[str, np.ndarray]:
    """Camera centres per split: train spread evenly over the upper hemisphere (Fibonacci
    spiral, elevation 8-80 degrees; in the room 8-60, below its ceiling), test on a ring at
    ``test_elevation_deg``, val in between."""
    k = np.arange(spec.n_train) + 0.5
    top = np.deg2rad(60 if spec.room else 80)
    sin_elevation = np.sin(np.deg2rad(8)) + (np.sin(top) - np.sin(np.deg2rad(8))) * k / spec.n_train
    train = _on_sphere(spec.camera_radius, np.pi * (3 - np.sqrt(5)) * k, np.arcsin(sin_elevation))
    test_azimuth = 2 * np.pi * (np.arange(spec.n_test) + 0.37) / spec.n_test
    test = _on_sphere(spec.camera_radius, test_azimuth, np.full(spec.n_test, np.deg2rad(spec.test_elevation_deg)))
    val_azimuth = 2 * np.pi * (np.arange(spec.n_val) + 0.81) / max(spec.n_val, 1)
    val = _on_sphere(spec.camera_radius, val_azimuth, np.full(spec.n_val, np.deg2rad(45.0)))
    return {"train": train, "val": val, "test": test}


# ------------------------------------------------------------------ rendering
def render_view(spec: DemoSceneSpec, c2w_blender: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Anti-aliased RGBA [H, W, 4] float in [0, 1] (straight alpha) and depth [H, W] of one view."""
    size, s = spec.image_size, spec.supersampling
    focal = focal_from_fov(size, spec.camera_angle_x)
    c2w = c2w_blender @ BLENDER_TO_OPENCV
    # Sub-pixel grid: render at s times the resolution and average each s x s block.
    directions = get_ray_directions(size * s, size * s, (focal * s, focal * s))
    directions = directions / np.linalg.norm(directions, axis=-1, keepdims=True)
    d = directions.reshape(-1, 3) @ c2w[:3, :3].T
    o = np.broadcast_to(c2w[:3, 3], d.shape)
    colour, coverage, _ = _shade(o, d, spec.room)
    colour = colour.reshape(size, s, size, s, 3).sum((1, 3))
    coverage = coverage.reshape(size, s, size, s).sum((1, 3))
    alpha = coverage / (s * s)
    rgb = np.where(coverage[..., None] > 0, colour / np.maximum(coverage, 1)[..., None], 0.0)

    centre = get_ray_directions(size, size, (focal, focal))
    centre = centre / np.linalg.norm(centre, axis=-1, keepdims=True)
    d_centre = centre.reshape(-1, 3) @ c2w[:3, :3].T
    _, _, depth = _shade(np.broadcast_to(c2w[:3, 3], d_centre.shape), d_centre, spec.room)
    return np.concatenate([rgb, alpha[..., None]], axis=-1), depth.reshape(size, size)


def _marker_on_disk(root: str) -> dict | None:
    """The generator's marker file in ``root``, or None when there is none (or a file of that
    name that the generator did not write)."""
    marker = read_json_object(os.path.join(root, SPEC_FILE))
    return marker if marker is not None and "version" in marker and "supersampling" in marker else None


def _expected_spec(spec: DemoSceneSpec) -> dict:
    return {"version": SCENE_VERSION, **dataclasses.asdict(spec)}


def is_generated(root: str, spec: DemoSceneSpec) -> bool:
    """True when ``root`` holds a complete scene made with exactly this spec and generator version.

    The marker says ``"complete": false`` while views are being written (markers that lack the
    key were written last, by earlier versions, and so are complete).
    """
    marker = _marker_on_disk(root)
    if marker is None or not marker.pop("complete", True):
        return False
    return marker == _expected_spec(spec)


def foreign_files(root: str, limit: int | None = None) -> list[str]:
    """Files under ``root`` whose names the generator never writes (at most ``limit``)."""
    foreign = []
    for name in files_in(root):
        if not _GENERATED.fullmatch(name):
            foreign.append(name)
            if limit is not None and len(foreign) >= limit:
                break
    return foreign


def check_writable(root: str) -> None:
    """Refuse (``OutputConflict``, before a byte is written) a folder the scene must not go into.

    Allowed: a folder that does not exist or holds no file, and one holding a scene the
    generator wrote (its marker) and nothing else. A dataset of the user's is never touched.
    """
    if os.path.lexists(root) and not os.path.isdir(root):
        raise OutputConflict(f"'{root}' is a file, not a folder for the demo scene; give --datadir a new folder.")
    if not os.path.isdir(root):
        return
    marked = _marker_on_disk(root) is not None
    foreign = foreign_files(root, limit=6) if marked else files_in(root, limit=6)
    if foreign:
        held = "a demo scene and files the demo generator did not write" if marked \
            else "files the demo generator did not write"
        raise OutputConflict(
            f"'{root}' holds {held} ({listed(foreign)}); the generator writes the built-in scene only into a new or "
            "empty folder, or one holding nothing but a demo scene it wrote. Give --datadir another folder (the "
            f"default is data/demo_scene){_dataset_hint(root)}.")


def _dataset_hint(root: str) -> str:
    """', or ... --dataset_name X' for a folder laid out as one of the formats the loaders read."""
    layouts = (("transforms_train.json", "blender"), ("transforms.json", "own_data"), ("poses_bounds.npy", "llff"),
               ("intrinsics.txt", "nsvf or tankstemple"))
    for name, dataset_name in layouts:
        if os.path.isfile(os.path.join(root, name)):
            return f", or train on the dataset in it with its own format: --dataset_name {dataset_name}"
    return ""


def _write_view(root: str, spec: DemoSceneSpec, split: str, index: int, c2w: np.ndarray) -> dict:
    """Render one view into ``root/split/`` and return its transforms-file frame."""
    rgba, depth = render_view(spec, c2w)
    name = f"r_{index}"
    iio.imwrite(os.path.join(root, split, name + ".png"), np.round(rgba * 255).astype(np.uint8))
    frame = {"file_path": f"./{split}/{name}", "rotation": 0.0, "transform_matrix": c2w.tolist()}
    if split == "test":
        np.save(os.path.join(root, split, name + "_depth.npy"), depth.astype(np.float32))
        frame["depth_path"] = f"./{split}/{name}_depth.npy"
    return frame


def generate(root: str, spec: DemoSceneSpec = DemoSceneSpec(), workers: int = 1) -> str:
    """Render the scene into ``root`` (blender layout); returns ``root``.

    ``root`` must pass ``check_writable``. The marker is written first, saying the scene is
    incomplete, and again with the finished spec last, so an interrupted run is detected and
    redone. Views of an earlier spec that this one does not have are removed. ``workers`` > 1
    renders views in that many processes (the output is the same).
    """
    check_writable(root)
    os.makedirs(root, exist_ok=True)
    spec_path = os.path.join(root, SPEC_FILE)
    _write_json(spec_path, {**_expected_spec(spec), "complete": False})
    jobs = []
    for split, positions in camera_positions(spec).items():
        os.makedirs(os.path.join(root, split), exist_ok=True)
        jobs += [(root, spec, split, index, look_at_origin(position)) for index, position in enumerate(positions)]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            frames = list(pool.map(_write_view, *zip(*jobs)))
    else:
        frames = [_write_view(*job) for job in jobs]
    written = {SPEC_FILE}
    for split in camera_positions(spec):
        split_frames = [frame for job, frame in zip(jobs, frames) if job[2] == split]
        meta = {"camera_angle_x": spec.camera_angle_x, "frames": split_frames}
        if spec.room:
            meta.update(aabb=[list(corner) for corner in ROOM_OBJECT_BOX], near_far=list(ROOM_NEAR_FAR), unbounded=True)
        _write_json(os.path.join(root, f"transforms_{split}.json"), meta)
        written.add(f"transforms_{split}.json")
        for frame in split_frames:
            written.update(path[2:] + suffix for path, suffix in
                           ((frame["file_path"], ".png"), (frame.get("depth_path", ""), "")) if path)
    for stale in set(files_in(root)) - written:  # only the generator's own names are left (check_writable)
        os.remove(os.path.join(root, stale))
    _write_json(spec_path, _expected_spec(spec))
    return root


def _write_json(path: str, content: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(content, handle, indent=2)


def ensure_generated(root: str, spec: DemoSceneSpec = DemoSceneSpec()) -> bool:
    """Generate the scene into ``root`` unless it is already there; True if it was generated.

    A folder that ``check_writable`` refuses raises ``OutputConflict``, whatever it holds.
    """
    if is_generated(root, spec):
        return False
    generate(root, spec)
    return True
