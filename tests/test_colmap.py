"""Own captures from COLMAP: the model files, the conversion (box, near/far, undistortion,
several cameras), the convention checks, the own_data keys and flags, and the preview.

Most tests use a synthetic capture of the demo scene (``synthetic_capture``): known cameras
with radial distortion, sparse points on the visible surfaces, a random similarity and pose
noise, written as COLMAP's mapper writes it.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import sys

import imageio.v3 as iio
import numpy as np
import pytest

import synthetic_capture as capture_lib
from tensorf_jt.dataLoader import OwnDataDataset, load_split
from tensorf_jt.dataLoader.colmap_scene import POINTS_FILE, UNDISTORTED_DIR, convert
from tensorf_jt.dataLoader.conventions import POSE_FORMATS
from tensorf_jt.dataLoader.scene_fit import scene_summary
from tensorf_jt.errors import ConfigError, DatasetError
from tensorf_jt.formats.colmap import (CAMERA_MODELS, Camera, Image, Model, Points3D, find_model, read_model,
                                       write_model)
from tensorf_jt.formats.ply import read_ply_points

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import colmap_to_transforms  # noqa: E402
import preview_scene  # noqa: E402

FLIP_YZ = np.diag([1.0, -1.0, -1.0, 1.0])
BOX_SLACK = 0.10  # the fitted box may exceed the object's by this share of its size per side


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """The binary capture, converted with the one-argument command."""
    root = str(tmp_path_factory.mktemp("capture") / "scene")
    truth = capture_lib.make_capture(root, image_size=32, n_views=24, binary=True, seed=3, points_per_view=120)
    assert colmap_to_transforms.main([root]) == 0
    return truth


def transforms(root: str) -> dict:
    with open(os.path.join(root, "transforms.json"), "r", encoding="utf-8") as handle:
        return json.load(handle)


def demo_to_scene(capture: capture_lib.Capture) -> np.ndarray:
    """[4, 4]: the demo world into the converted scene's world (the converter's similarity after ours)."""
    return np.array(transforms(capture.root)["colmap_to_world"]) @ capture.similarity


def white(rgba: np.ndarray) -> np.ndarray:
    rgba = rgba.astype(np.float64) / 255.0
    return rgba[..., :3] * rgba[..., 3:] + 1.0 - rgba[..., 3:]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    return float(-10.0 * np.log10(np.mean((white(a) - white(b)) ** 2)))


# ------------------------------------------------------------------ the model files
def small_model() -> Model:
    cameras = {1: Camera(1, "OPENCV", 640, 480, (500.0, 510.0, 320.5, 240.5, -0.1, 0.01, 0.001, -0.002)),
               7: Camera(7, "SIMPLE_RADIAL", 320, 200, (300.0, 160.0, 100.0, 0.05))}
    images = {3: Image(3, np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2]),
                       np.array([0.5, -1.0, 2.0]), 1, "sub dir/a.jpg",
                       np.array([[10.5, 20.25], [30.0, 40.0]]), np.array([5, -1])),
              4: Image(4, np.array([1.0, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0]), 7, "b.png")}
    points = Points3D(np.array([5, 9]), np.array([[1.0, 2.0, 3.0], [-1.5, 0.25, 8.0]]),
                      np.array([[255, 0, 10], [1, 2, 3]], dtype=np.uint8), np.array([0.5, 1.25]),
                      [np.array([[3, 0]]), np.zeros((0, 2), dtype=np.int64)])
    return Model(cameras, images, points)


def assert_same_model(a: Model, b: Model) -> None:
    assert a.cameras == b.cameras
    assert sorted(a.images) == sorted(b.images)
    for image_id, image in a.images.items():
        other = b.images[image_id]
        assert (image.name, image.camera_id) == (other.name, other.camera_id)
        for field in ("qvec", "tvec", "xys", "point3D_ids"):
            np.testing.assert_array_equal(getattr(image, field), getattr(other, field))
    for field in ("ids", "xyz", "rgb", "error"):
        np.testing.assert_array_equal(getattr(a.points, field), getattr(b.points, field))
    for track, other in zip(a.points.tracks, b.points.tracks):
        np.testing.assert_array_equal(np.reshape(track, (-1, 2)), other)


def test_binary_model_has_colmaps_documented_layout_and_reads_back(tmp_path):
    model = small_model()
    write_model(model, str(tmp_path / "bin"), binary=True)
    cameras = (tmp_path / "bin" / "cameras.bin").read_bytes()
    # uint64 count; per camera: uint32 id, int32 model id, uint64 width, uint64 height, float64 params
    assert struct.unpack_from("<Q", cameras)[0] == 2
    assert struct.unpack_from("<iiQQ", cameras, 8) == (1, CAMERA_MODELS["OPENCV"][0], 640, 480) == (1, 4, 640, 480)
    assert struct.unpack_from("<8d", cameras, 32) == model.cameras[1].params
    assert len(cameras) == 8 + (24 + 8 * 8) + (24 + 4 * 8)
    images = (tmp_path / "bin" / "images.bin").read_bytes()
    # per image: uint32 id, 7 float64 (qw qx qy qz tx ty tz), uint32 camera id, name + NUL,
    # uint64 number of 2-D points, then (float64 x, float64 y, int64 point id) each
    assert struct.unpack_from("<Q", images)[0] == 2
    header = struct.unpack_from("<i7di", images, 8)
    assert header[0] == 3 and header[8] == 1
    np.testing.assert_array_equal(header[1:8], [*model.images[3].qvec, *model.images[3].tvec])
    name_end = images.index(b"\0", 8 + 64)
    assert images[8 + 64:name_end] == b"sub dir/a.jpg"
    assert struct.unpack_from("<Q2dq2dq", images, name_end + 1) == (2, 10.5, 20.25, 5, 30.0, 40.0, -1)
    points = (tmp_path / "bin" / "points3D.bin").read_bytes()
    # per point: uint64 id, 3 float64, 3 uint8 colour, float64 error, uint64 track length,
    # then (uint32 image id, uint32 index of the 2-D point) each
    assert struct.unpack_from("<QQdddBBBdQii", points) == (2, 5, 1.0, 2.0, 3.0, 255, 0, 10, 0.5, 1, 3, 0)
    assert len(points) == 8 + (51 + 8) + (51 + 0)
    assert_same_model(model, read_model(str(tmp_path / "bin")))

    write_model(model, str(tmp_path / "txt"), binary=False)
    lines = (tmp_path / "txt" / "cameras.txt").read_text().splitlines()
    assert lines[-1].split()[:4] == ["7", "SIMPLE_RADIAL", "320", "200"]
    assert_same_model(model, read_model(str(tmp_path / "txt")))
    assert find_model(str(tmp_path / "txt")) == str(tmp_path / "txt")


def test_damaged_or_missing_models_are_refused_with_the_reason(tmp_path):
    write_model(small_model(), str(tmp_path / "m"), binary=True)
    data = (tmp_path / "m" / "images.bin").read_bytes()
    (tmp_path / "m" / "images.bin").write_bytes(data[:-5])
    with pytest.raises(DatasetError, match="The COLMAP model in '.*m' is damaged or not a COLMAP .bin model"):
        read_model(str(tmp_path / "m"))
    (tmp_path / "m" / "images.bin").write_bytes(data + b"xx")
    with pytest.raises(DatasetError, match="2 bytes left over at the end of '.*images.bin'"):
        read_model(str(tmp_path / "m"))
    (tmp_path / "m" / "images.bin").write_bytes(data)
    cameras = bytearray((tmp_path / "m" / "cameras.bin").read_bytes())
    cameras[12:16] = struct.pack("<i", 42)
    (tmp_path / "m" / "cameras.bin").write_bytes(bytes(cameras))
    with pytest.raises(DatasetError, match="unknown camera model id 42"):
        read_model(str(tmp_path / "m"))

    write_model(small_model(), str(tmp_path / "t"), binary=False)
    text = (tmp_path / "t" / "images.txt").read_text().replace(" 7 b.png", " 8 b.png")
    (tmp_path / "t" / "images.txt").write_text(text)
    with pytest.raises(DatasetError, match=r"use camera id\(s\) \[8\], which its cameras file lacks"):
        read_model(str(tmp_path / "t"))
    (tmp_path / "t" / "cameras.txt").write_text("1 PINHOLE 640 480 500 500 320\n")
    with pytest.raises(DatasetError, match="the PINHOLE model has 4 parameters"):
        read_model(str(tmp_path / "t"))
    with pytest.raises(DatasetError, match=r"No COLMAP model .* in '.*empty', '.*empty/sparse/0', "
                                           r"'.*empty/sparse'.*Point at the folder COLMAP's mapper wrote"):
        find_model(str(tmp_path / "empty"))


# ------------------------------------------------------------------ conversion
def test_converted_box_and_near_far_fit_the_capture(capture):
    meta = transforms(capture.root)
    transform = demo_to_scene(capture)
    scale = np.cbrt(np.linalg.det(transform[:3, :3]))
    corners = capture_lib.object_points() @ transform[:3, :3].T + transform[:3, 3]
    true_box = np.stack([corners.min(0), corners.max(0)])
    box = np.array(meta["aabb"])
    slack = BOX_SLACK * (true_box[1] - true_box[0])
    assert np.all(box[0] <= true_box[0]) and np.all(box[1] >= true_box[1]), (box, true_box)
    assert np.all(box[0] >= true_box[0] - slack) and np.all(box[1] <= true_box[1] + slack), (box, true_box)
    np.testing.assert_allclose(box.mean(0), 0, atol=1e-9)
    np.testing.assert_allclose((box[1] - box[0]).max(), 3.0)

    near, far = meta["near_far"]
    true_near, true_far = np.array(capture.depth_range) * scale
    assert near < true_near and far > true_far, (near, far, true_near, true_far)
    assert near > 0.5 * true_near and far < 2.0 * true_far, "near/far bracket the depths without wasting samples"

    # poses: the true cameras moved by the same transform, up to the pose noise; up is +z
    poses = np.array([frame["transform_matrix"] for frame in meta["frames"]])
    expected = transform @ capture.c2w_true
    expected[:, :3, :3] /= scale
    np.testing.assert_allclose(poses[:, :3, 3], expected[:, :3, 3], atol=0.02)
    np.testing.assert_allclose(poses[:, :3, :3], expected[:, :3, :3] @ FLIP_YZ[:3, :3], atol=2e-3)
    up = poses[:, :3, 1].mean(0)
    np.testing.assert_allclose(up / np.linalg.norm(up), [0, 0, 1], atol=1e-9)

    points, colours = read_ply_points(os.path.join(capture.root, meta["ply_file_path"]))
    assert meta["ply_file_path"] == POINTS_FILE and len(points) > 1000
    assert np.all(points >= box[0]) and np.all(points <= box[1]), "outliers and short tracks are left out"

    dataset = OwnDataDataset(capture.root, "train")
    np.testing.assert_allclose(dataset.scene_bbox, box, rtol=1e-6)
    assert dataset.near_far == [near, far] and dataset.img_wh == (32, 32) and dataset.n_views == 21
    summary = scene_summary(dataset)
    assert summary.startswith(f"scene: 21 cameras, 32x32 pixels, box 3 x {box[1, 1] - box[0, 1]:.3g} x "
                              f"{box[1, 2] - box[0, 2]:.3g} around (")
    assert summary.endswith(f"near/far {near:.3g} / {far:.3g} (box from transforms file, near/far from "
                            "transforms file)")


def test_text_model_and_explicit_paths_give_the_same_scene(capture, tmp_path, capsys):
    root = tmp_path / "text_scene"
    shutil.copytree(os.path.join(capture.root, "images"), root / "photos")
    write_model(read_model(os.path.join(capture.root, "sparse", "0")), str(root / "model"), binary=False)
    out = root / "out" / "transforms.json"
    assert colmap_to_transforms.main(["--model", str(root / "model"), "--images", str(root / "photos"),
                                      "--out", str(out)]) == 0
    assert f"wrote {out}: 24 frames, 32x32 pixels" in capsys.readouterr().out
    text, binary = json.load(open(out)), transforms(capture.root)
    for key in ("aabb", "near_far", "colmap_to_world", "fl_x", "cx", "cy", "w", "h"):
        np.testing.assert_allclose(text[key], binary[key], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose([f["transform_matrix"] for f in text["frames"]],
                               [f["transform_matrix"] for f in binary["frames"]], atol=1e-12)
    assert text["frames"][0]["file_path"] == f"./{UNDISTORTED_DIR}/view_000.png"
    assert os.path.isfile(root / "out" / UNDISTORTED_DIR / "view_000.png")


def test_undistorted_images_match_the_true_pinhole_images(capture):
    """The converter resamples each distorted image into the pinhole camera it writes. Against
    the scene rendered exactly through that camera, the undistorted images must be within
    1 dB of how closely two exact renderings of it agree (3x3 vs 4x4 rays per pixel), and
    clearly better than the same resampling with the lens ignored."""
    meta = transforms(capture.root)
    intrinsics = (meta["w"], meta["h"], meta["fl_x"], meta["fl_y"], meta["cx"], meta["cy"])
    assert meta["fl_x"] < capture.camera.focal[0], "barrel distortion: a wider pinhole covers the image"
    from tensorf_jt.dataLoader.undistort import Pinhole, remap_table, resample

    lens_ignored = Camera(1, "PINHOLE", 32, 32, (*capture.camera.focal, *capture.camera.principal_point))
    undistorted, floor, ignored = [], [], []
    for view in (1, 6, 11, 19):
        truth = capture_lib.render_pinhole(capture.c2w_true[view], *intrinsics, supersampling=3)
        finer = capture_lib.render_pinhole(capture.c2w_true[view], *intrinsics, supersampling=4)
        path = os.path.join(capture.root, meta["frames"][view]["file_path"])
        undistorted.append(psnr(iio.imread(path), truth))
        floor.append(psnr(finer, truth))
        source = iio.imread(os.path.join(capture.root, "images", capture.names[view]))
        ignored.append(psnr(resample(source, remap_table(Pinhole(*intrinsics), lens_ignored)), truth))
    print(f"undistorted {np.mean(undistorted):.2f} dB, two renderings {np.mean(floor):.2f} dB, "
          f"lens ignored {np.mean(ignored):.2f} dB")
    assert np.mean(undistorted) >= np.mean(floor) - 1.0
    assert np.mean(undistorted) >= np.mean(ignored) + 2.0


def test_several_cameras_are_resampled_into_one(capture, tmp_path):
    """Every other image gets its own PINHOLE camera with another focal length and size (its
    image rendered through it): the conversion brings them all to one camera."""
    root = tmp_path / "mixed"
    shutil.copytree(os.path.join(capture.root, "images"), root / "images")
    model = read_model(os.path.join(capture.root, "sparse", "0"))
    cameras, images = dict(model.cameras), dict(model.images)
    for image_id, image in model.images.items():
        if image_id % 2:
            continue
        camera = Camera(100 + image_id, "PINHOLE", 40, 36, (48.0, 47.0, 20.5, 17.5))
        cameras[camera.camera_id] = camera
        images[image_id] = Image(image_id, image.qvec, image.tvec, camera.camera_id, image.name)
        iio.imwrite(root / "images" / image.name,
                    capture_lib.render_pinhole(capture.c2w_true[image_id - 1], 40, 36, 48.0, 47.0, 20.5, 17.5))
    write_model(Model(cameras, images, model.points), str(root / "sparse" / "0"))
    result = convert(str(root))
    assert result.undistorted and (result.camera.width, result.camera.height) == (32, 32)
    meta = json.load(open(result.transforms_path))
    for view in (2, 3):  # one of each kind
        truth = capture_lib.render_pinhole(capture.c2w_true[view - 1], meta["w"], meta["h"], meta["fl_x"],
                                           meta["fl_y"], meta["cx"], meta["cy"])
        assert psnr(iio.imread(root / meta["frames"][view - 1]["file_path"]), truth) > 26.0
    assert OwnDataDataset(str(root), "test").img_wh == (32, 32)


def test_bad_captures_are_refused_with_what_to_do(capture, tmp_path, capsys):
    root = tmp_path / "bad"
    shutil.copytree(os.path.join(capture.root, "images"), root / "images")
    shutil.copytree(os.path.join(capture.root, "sparse"), root / "sparse")
    os.remove(root / "images" / "view_004.png")
    os.remove(root / "images" / "view_007.png")
    assert colmap_to_transforms.main([str(root)]) == 2
    assert ("2 of the 24 images registered in the COLMAP model are not in '" in capsys.readouterr().err)
    with pytest.raises(DatasetError, match=r"'view_004.png', 'view_007.png'. Give the folder COLMAP "
                                           r"reconstructed from with --images"):
        convert(str(root))
    shutil.copy(root / "images" / "view_000.png", root / "images" / "view_004.png")
    iio.imwrite(root / "images" / "view_007.png", np.zeros((16, 16, 3), np.uint8))
    with pytest.raises(DatasetError, match="view_007.png' is 16x16 but its COLMAP camera 1 is 32x32: the images "
                                           "were resized after the reconstruction"):
        convert(str(root))
    shutil.copy(root / "images" / "view_000.png", root / "images" / "view_007.png")
    shutil.copy(root / "images" / "view_000.png", root / "images" / "extra.png")
    assert "1 image(s) in '" in " ".join(convert(str(root)).notes)
    with pytest.raises(DatasetError, match="The image folder '.*nowhere' does not exist"):
        convert(str(root), images_dir=str(tmp_path / "nowhere"))

    model = read_model(str(root / "sparse" / "0"))
    fov = Camera(1, "FOV", 32, 32, (40.0, 40.0, 16.0, 16.0, 0.2))
    write_model(Model({1: fov}, model.images, model.points), str(root / "sparse" / "0"))
    with pytest.raises(DatasetError, match="Camera 1 uses the FOV model, which is not supported .* 'colmap "
                                           "image_undistorter'"):
        convert(str(root))
    strong = Camera(1, "SIMPLE_RADIAL", 32, 32, (40.0, 16.0, 16.0, -30.0))  # folds back near the centre
    write_model(Model({1: strong}, model.images, model.points), str(root / "sparse" / "0"))
    with pytest.raises(DatasetError, match="too strong to resample into one pinhole camera"):
        convert(str(root))

    # no sparse points: the box comes from where the views overlap and still holds the object
    write_model(Model(model.cameras, model.images, Points3D.empty()), str(root / "sparse" / "0"))
    result = convert(str(root))
    assert result.n_points == 0 and "no sparse points" in " ".join(result.notes)
    meta = json.load(open(result.transforms_path))
    transform = np.array(meta["colmap_to_world"]) @ capture.similarity
    inside = capture_lib.object_points() @ transform[:3, :3].T + transform[:3, 3]
    box = np.array(meta["aabb"])
    assert np.all(inside >= box[0]) and np.all(inside <= box[1]) and "ply_file_path" not in meta


# ------------------------------------------------------------------ loading: conventions, keys, flags
def rewrite_poses(root: str, folder, convert_pose) -> str:
    """A copy of the converted scene whose transform_matrix entries are ``convert_pose(c2w_opengl)``."""
    target = str(folder)
    shutil.copytree(root, target, ignore=shutil.ignore_patterns("sparse", "images"))
    meta = transforms(target)
    for frame in meta["frames"]:
        frame["transform_matrix"] = convert_pose(np.array(frame["transform_matrix"])).tolist()
    with open(os.path.join(target, "transforms.json"), "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
    return target


def test_poses_in_another_convention_are_detected_and_read_with_pose_format(capture, tmp_path):
    reference = OwnDataDataset(capture.root, "test", is_stack=True)
    opencv = rewrite_poses(capture.root, tmp_path / "opencv", lambda c2w: c2w @ FLIP_YZ)
    with pytest.raises(DatasetError, match=r"The poses of '.*transforms.json' look like camera-to-world matrices "
                                           r"in OpenCV axes .* so read as OpenGL their optical axes point away from "
                                           r"the scene: read as c2w_opengl, 0% of the cameras look at the scene box; "
                                           r"read as c2w_opencv, 100% do. Pass --pose_format c2w_opencv"):
        OwnDataDataset(opencv, "test")
    fixed = OwnDataDataset(opencv, "test", is_stack=True, pose_format="c2w_opencv")
    np.testing.assert_allclose(fixed.all_rays, reference.all_rays, atol=1e-5)

    inverse = rewrite_poses(capture.root, tmp_path / "w2c", np.linalg.inv)
    with pytest.raises(DatasetError, match=r"look like world-to-camera matrices \(the inverse of what is expected\): "
                                           r"read as c2w_opengl, 0% .* read as w2c_opengl, 100% do. Pass --pose_format "
                                           r"w2c_opengl"):
        OwnDataDataset(inverse, "train")
    fixed = OwnDataDataset(inverse, "test", is_stack=True, pose_format="w2c_opengl")
    np.testing.assert_allclose(fixed.all_rays, reference.all_rays, atol=1e-5)

    elsewhere = rewrite_poses(capture.root, tmp_path / "far", lambda c2w: c2w)
    with pytest.raises(DatasetError, match=r"The cameras of '.*' do not look at the scene box \[\[30.0, 30.0, 30.0\], "
                                           r"\[31.0, 31.0, 31.0\]\]: only \d+% of the cameras outside it have its "
                                           r"centre within 60 degrees of their optical axis.* --scene_bbox"):
        OwnDataDataset(elsewhere, "train", scene_bbox=[30, 30, 30, 31, 31, 31])
    with pytest.raises(DatasetError, match="pose_format 'opengl' is not one of c2w_opengl, c2w_opencv"):
        OwnDataDataset(capture.root, "test", pose_format="opengl")


def test_own_data_reads_aabb_and_near_far_and_flags_override_them(capture, tmp_path):
    from fake_datasets import make_own_data

    plain = make_own_data(str(tmp_path))
    dataset = OwnDataDataset(plain, "train")
    np.testing.assert_array_equal(dataset.scene_bbox, [[-1.5] * 3, [1.5] * 3])
    assert dataset.near_far == [0.1, 100.0] and dataset.bounds_source == "default box, default near/far"
    overridden = OwnDataDataset(capture.root, "train", scene_bbox=[-1, -2, -3, 1, 2, 3], near_far=[0.5, 9])
    np.testing.assert_array_equal(overridden.scene_bbox, [[-1, -2, -3], [1, 2, 3]])
    assert overridden.near_far == [0.5, 9.0]
    assert overridden.bounds_source == "box from --scene_bbox, near/far from --near_far"

    path = os.path.join(plain, "transforms_train.json")
    meta = json.load(open(path))
    for bad, message in (({"aabb": [[0, 0, 0], [1, -1, 1]]}, r"'aabb' of '.*' must be finite with each minimum "
                                                             r"below its maximum"),
                         ({"aabb": [1, 2, 3]},
                          r"'aabb' of '.*' must be \[\[xmin, ymin, zmin\], \[xmax, ymax, zmax\]\]"),
                         ({"near_far": [2.0, 1.0]}, r"'near_far' of '.*' must be \[near, far\] with 0 <= near < far"),
                         ({"near_far": "far"}, r"'near_far' of '.*' must be two numbers \[near, far\]")):
        json.dump({**meta, **bad}, open(path, "w"))
        with pytest.raises(DatasetError, match=message):
            OwnDataDataset(plain, "train")


def distorted_own_data(root, lens: Camera, extra: dict, n_views: int = 3) -> list[np.ndarray]:
    """``root``/transforms_train.json with ``lens``'s intrinsics plus ``extra`` (its distortion
    keys), and the demo scene rendered through the distorted lens; returns the OpenCV poses."""
    from tensorf_jt.dataLoader.demo_scene import look_at_origin
    from tensorf_jt.rendering.rays import BLENDER_TO_OPENCV

    (fx, fy), (cx, cy) = lens.focal, lens.principal_point
    poses = [look_at_origin(centre) for centre in capture_lib.camera_centres(n_views)]
    frames = []
    for index, pose in enumerate(poses):
        iio.imwrite(os.path.join(root, f"view_{index}.png"), capture_lib.render_distorted(pose @ BLENDER_TO_OPENCV, lens))
        frames.append({"file_path": f"view_{index}.png", "transform_matrix": pose.tolist()})
    meta = {"w": lens.width, "h": lens.height, "fl_x": fx, "fl_y": fy, "cx": cx, "cy": cy, **extra, "frames": frames}
    with open(os.path.join(root, "transforms_train.json"), "w") as handle:
        json.dump(meta, handle)
    return [pose @ BLENDER_TO_OPENCV for pose in poses]


def on_white(rgba: np.ndarray) -> np.ndarray:
    rgba = rgba / 255.0
    return rgba[..., :3] * rgba[..., 3:] + (1.0 - rgba[..., 3:])


def pinhole_psnr(dataset: OwnDataDataset, poses: list[np.ndarray]) -> tuple[float, float]:
    """Mean PSNR of the loaded images against the scene rendered through the dataset's own
    pinhole camera (on white, as own_data composites), and of two such renderings (3x3 and
    4x4 rays a pixel) against each other: the floor set by rendering alone."""
    (w, h), (fx, fy) = dataset.img_wh, dataset.focal
    cx, cy = dataset.intrinsics[0, 2], dataset.intrinsics[1, 2]
    loaded, floor = [], []
    for index, pose in enumerate(poses):
        truth = on_white(capture_lib.render_pinhole(pose, w, h, fx, fy, cx, cy))
        finer = on_white(capture_lib.render_pinhole(pose, w, h, fx, fy, cx, cy, supersampling=4))
        loaded.append(-10 * np.log10(np.mean((dataset.view_rgbs(index).reshape(h, w, 3) - truth) ** 2)))
        floor.append(-10 * np.log10(np.mean((finer - truth) ** 2)))
    return float(np.mean(loaded)), float(np.mean(floor))


@pytest.mark.parametrize("model, params, extra", [
    ("OPENCV", (-0.15, 0.03, 0.002, -0.001), {"k1": -0.15, "k2": 0.03, "p1": 0.002, "p2": -0.001}),
    ("OPENCV_FISHEYE", (0.05, -0.01, 0.0, 0.0), {"k1": 0.05, "k2": -0.01, "camera_model": "OPENCV_FISHEYE"}),
])
def test_own_data_undoes_the_lens_distortion_of_its_transforms_file(tmp_path, model, params, extra):
    """instant-ngp and nerfstudio write k1, k2, p1, p2 (k1-k4 for a fisheye) beside the pinhole
    intrinsics: the images are resampled into one pinhole camera, where they match the scene."""
    size = 48
    focal = 0.5 * size / np.tan(0.5 * capture_lib.demo_scene.DemoSceneSpec(image_size=size).camera_angle_x)
    lens = Camera(1, model, size, size, (focal, focal * 1.02, 24.3, 23.6, *params))
    poses = distorted_own_data(str(tmp_path), lens, extra)
    dataset = OwnDataDataset(str(tmp_path), "train")
    assert dataset.pinhole is not None and dataset.focal[0] < focal, "a wider pinhole covers the distorted image"
    assert sorted(os.listdir(tmp_path / "images_undistorted")) == ["undistort.json", "view_0.png", "view_1.png",
                                                                  "view_2.png"]
    undistorted, floor = pinhole_psnr(dataset, poses)
    meta = json.load(open(tmp_path / "transforms_train.json"))
    with open(tmp_path / "transforms_train.json", "w") as handle:
        json.dump({key: value for key, value in meta.items() if key not in extra}, handle)
    ignored, _ = pinhole_psnr(OwnDataDataset(str(tmp_path), "train"), poses)
    print(f"{model}: undistorted {undistorted:.2f} dB, two renderings {floor:.2f} dB, lens ignored {ignored:.2f} dB")
    # Measured: OPENCV 30.3 dB (floor 32.2, lens ignored 25.0), fisheye 28.4 dB (32.4, 20.7): the
    # resampling's blur at 48 pixels; a principal point off by 0.3 pixels scores 24-25.6 dB.
    assert undistorted >= floor - 4.5 and undistorted >= ignored + 3.0


@pytest.mark.parametrize("extra, message", [
    ({"k1": 0.1, "k4": 0.01}, r"k4 = 0.01 belongs to a fisheye lens, but the file does not say"),
    ({"k1": 0.1, "p1": 0.01, "is_fisheye": True}, r"a fisheye lens \(OPENCV_FISHEYE\) has k1-k4 and no tangential"),
    ({"k1": "strong"}, r"'k1' must be a number, got 'strong'"),
])
def test_lens_keys_that_do_not_describe_a_lens_are_refused(tmp_path, extra, message):
    lens = Camera(1, "PINHOLE", 16, 16, (20.0, 20.0, 8.0, 8.0))
    distorted_own_data(str(tmp_path), lens, extra, n_views=1)
    with pytest.raises(DatasetError, match=message):
        OwnDataDataset(str(tmp_path), "train")


def test_scene_flags_reach_every_loader(capture, tiny_scene, tmp_path):
    from tensorf_jt.config import load_run_config
    from tensorf_jt.config.run_config import POSE_FORMATS as CONFIG_POSE_FORMATS

    assert CONFIG_POSE_FORMATS == POSE_FORMATS
    config = load_run_config(["--dataset_name", "own_data", "--datadir", capture.root,
                              "--scene_bbox", "-1", "-1", "-1", "1", "1", "2", "--near_far", "0.2", "7"])
    assert config.data.scene_bbox == (-1.0, -1.0, -1.0, 1.0, 1.0, 2.0) and config.data.near_far == (0.2, 7.0)
    dataset = load_split(config.data, "test", is_stack=True)
    np.testing.assert_array_equal(dataset.scene_bbox, [[-1, -1, -1], [1, 1, 2]])
    config_file = tmp_path / "scene.txt"
    config_file.write_text(f"dataset_name = blender\ndatadir = {tiny_scene}\nscene_bbox = [-2,-2,-1,2,2,1]\n")
    config = load_run_config(["--config", str(config_file)])
    blender = load_split(config.data, "test", is_stack=True)
    np.testing.assert_array_equal(blender.scene_bbox, [[-2, -2, -1], [2, 2, 1]])
    assert blender.near_far == [2.0, 6.0] and "box from --scene_bbox" in scene_summary(blender)
    for flags, message in ((["--scene_bbox", "1", "0", "0", "0", "1", "1"], "scene_bbox must be six numbers"),
                           (["--near_far", "3", "1"], "near_far must be two numbers near far with 0 <= near < far"),
                           (["--pose_format", "gl"], "pose_format 'gl' is not supported; choose one of c2w_opengl"),
                           (["--pose_format", "w2c_opencv"], "pose_format applies to dataset_name = own_data only")):
        with pytest.raises(ConfigError, match=message):
            load_run_config(["--dataset_name", "blender", *flags])


def test_own_data_names_missing_images_and_mixed_sizes(capture, tmp_path):
    scene = str(tmp_path / "scene")
    shutil.copytree(capture.root, scene, ignore=shutil.ignore_patterns("sparse", "images"))
    for name in ("view_001.png", "view_002.png", "view_003.png"):
        os.remove(os.path.join(scene, UNDISTORTED_DIR, name))
    with pytest.raises(DatasetError, match=r"Image '.*view_001.png' listed in the transforms file does not exist; "
                                           r"3 of the 21 images of the train split in '.*transforms.json' are "
                                           r"missing \('view_001.png', 'view_002.png', 'view_003.png'\)"):
        OwnDataDataset(scene, "train")
    iio.imwrite(os.path.join(scene, UNDISTORTED_DIR, "view_008.png"), np.zeros((30, 32, 4), np.uint8))
    with pytest.raises(DatasetError, match=r"view_008.png' is 32x30 but .* says \('w', 'h'\) 32x32; all images "
                                           r"of a scene must have the same size"):
        OwnDataDataset(scene, "test")


def test_preview_draws_cameras_box_and_points(capture, tmp_path, capsys):
    out = str(tmp_path / "look")
    assert preview_scene.main([capture.root, "--out", out, "--downsample", "1"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("scene: 21 cameras, 32x32 pixels, box 3 x ") and "images read at" not in printed
    image = iio.imread(out + ".png")
    assert image.shape[1] > image.shape[0] > 500
    cloud, _ = read_ply_points(os.path.join(capture.root, POINTS_FILE))
    vertices, colours = read_ply_points(out + ".ply")
    n_segments = 12 + 8 * 24  # the box, and 8 lines per camera frustum
    assert len(vertices) == len(cloud) + 2 * n_segments
    np.testing.assert_allclose(vertices[:len(cloud)], cloud, atol=1e-5)
    box = np.array(transforms(capture.root)["aabb"])
    lines = vertices[len(cloud):]
    assert np.all(lines.min(0) <= box[0] + 1e-5) and np.all(lines.max(0) >= box[1] - 1e-5)
    assert (colours[len(cloud):] == (220, 40, 40)).all(axis=1).sum() == 24, "the box's 12 edges"
    assert preview_scene.main([str(tmp_path / "nothing")]) == 2
    assert "Neither" in capsys.readouterr().err
