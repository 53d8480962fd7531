"""Cameras that cannot be right are refused with the file, the frame and what is wrong."""
import json
import os
import shutil

import numpy as np
import pytest

from fake_datasets import make_llff, make_nsvf, make_own_data
from tensorf_jt.dataLoader import BlenderDataset, LLFFDataset, NSVFDataset, OwnDataDataset
from tensorf_jt.dataLoader.camera_checks import check_field_of_view, check_pose, check_positive
from tensorf_jt.errors import DatasetError

ROTATION = np.array([[0.0, -1.0, 0.0], [0.6, 0.0, 0.8], [-0.8, 0.0, 0.6]])  # orthonormal, det +1


def pose(rotation=ROTATION, translation=(1.0, 2.0, 3.0), last_row=(0.0, 0.0, 0.0, 1.0)) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3], matrix[3] = rotation, translation, last_row
    return matrix


def test_rigid_poses_pass_as_they_are():
    np.testing.assert_array_equal(check_pose(pose().tolist(), "x"), pose())
    np.testing.assert_array_equal(check_pose(pose()[:3], "x"), pose()[:3])
    check_pose(pose(ROTATION + 1e-5), "x")  # rounding of matrices written as text


@pytest.mark.parametrize("matrix, message", [
    (np.where(np.eye(4, dtype=bool), np.nan, pose()), r"holds NaN or infinity \(at \[0\]\[0\], \[1\]\[1\]"),
    (pose(translation=(1.0, np.inf, 0.0)), r"holds NaN or infinity \(at \[1\]\[3\]\)"),
    (pose(2.0 * ROTATION), r"is not a rigid transform: its rotation is not orthonormal \(R\^T R is off the identity "
                           r"by up to 3; tolerance 0.001\)"),
    (pose(ROTATION + np.triu(np.full((3, 3), 0.1), 1)), "not orthonormal"),
    (pose(ROTATION * np.array([1.0, 1.0, -1.0])), r"is a reflection \(determinant -1.000\)"),
    (pose(last_row=(0.0, 0.0, 1.0, 1.0)), r"its last row is \[0.0, 0.0, 1.0, 1.0\] instead of \[0, 0, 0, 1\]"),
    (np.eye(3), r"has shape \[3, 3\]; expected 3x4 or 4x4"),
    ([["a", 1, 2, 3]], "is not a matrix of numbers"),
])
def test_bad_poses_are_refused_with_what_is_wrong(matrix, message):
    with pytest.raises(DatasetError, match=message) as refused:
        check_pose(matrix, "frame 7 of 'x.json'")
    assert str(refused.value).startswith("The camera pose of frame 7 of 'x.json' ")


def test_camera_numbers_must_be_finite_and_in_range():
    assert check_positive("2.5", "focal", "x") == 2.5
    for value in (0, -1, float("nan"), float("inf")):
        with pytest.raises(DatasetError, match="'focal' of x is .*; it must be a finite positive number"):
            check_positive(value, "focal", "x")
    with pytest.raises(DatasetError, match="'focal' of x is 'wide', not a number"):
        check_positive("wide", "focal", "x")
    assert check_field_of_view(0.69, "camera_angle_x", "x") == 0.69
    with pytest.raises(DatasetError, match="is 40 radians; .* below pi .* Is it in degrees"):
        check_field_of_view(40, "camera_angle_x", "x")


def edit_transforms(scene: str, split: str, edit) -> str:
    path = os.path.join(scene, f"transforms_{split}.json")
    with open(path, encoding="utf-8") as handle:
        meta = json.load(handle)
    edit(meta)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(meta, handle)
    return path


def test_blender_refuses_a_nan_in_one_training_frame(tiny_scene, tmp_path):
    scene = str(tmp_path / "scene")
    shutil.copytree(tiny_scene, scene)

    def nan_in_frame_3(meta):
        meta["frames"][3]["transform_matrix"][1][3] = float("nan")

    path = edit_transforms(scene, "train", nan_in_frame_3)
    with pytest.raises(DatasetError, match=rf"The camera pose of frame 3 \('./train/r_3'\) of '{path}' holds NaN or "
                                           r"infinity \(at \[1\]\[3\]\)"):
        BlenderDataset(scene, "train")

    def scaled_frame_0(meta):
        meta["frames"][3]["transform_matrix"][1][3] = 0.5
        scaled = np.diag([2.0, 2.0, 2.0, 1.0]) @ meta["frames"][0]["transform_matrix"]
        meta["frames"][0]["transform_matrix"] = scaled.tolist()

    edit_transforms(scene, "train", scaled_frame_0)
    with pytest.raises(DatasetError, match=r"frame 0 \('./train/r_0'\) .* is not a rigid transform"):
        BlenderDataset(scene, "train")
    edit_transforms(scene, "test", lambda meta: meta.update(camera_angle_x=39.6))
    with pytest.raises(DatasetError, match=r"'camera_angle_x' of '.*transforms_test.json' is 39.6 radians"):
        BlenderDataset(scene, "test")


def test_other_formats_refuse_bad_cameras(tmp_path):
    llff = make_llff(str(tmp_path / "llff"))
    poses_bounds = np.load(os.path.join(llff, "poses_bounds.npy"))
    poses_bounds[4, :3] *= 1.5  # first row of image 4's rotation scaled
    np.save(os.path.join(llff, "poses_bounds.npy"), poses_bounds)
    with pytest.raises(DatasetError, match=r"The camera pose of image 4 \(row 4\) of '.*poses_bounds.npy' is not a "
                                           "rigid"):
        LLFFDataset(llff)

    nsvf = make_nsvf(str(tmp_path / "nsvf"))
    with open(os.path.join(nsvf, "pose", "0_0001.txt"), "w", encoding="utf-8") as handle:
        handle.write("1 0 0 0\n0 1 0 nan\n0 0 1 0\n0 0 0 1\n")
    with pytest.raises(DatasetError, match=r"The camera pose of pose file '.*0_0001.txt' holds NaN"):
        NSVFDataset(nsvf, "train")
    with open(os.path.join(nsvf, "intrinsics.txt"), "w", encoding="utf-8") as handle:
        handle.write("nan 8.5 6.0\n")
    with pytest.raises(DatasetError, match=r"'fx' of intrinsics file '.*intrinsics.txt' is nan"):
        NSVFDataset(nsvf, "test")

    own = make_own_data(str(tmp_path / "own"))

    def mirrored(meta):
        flipped = np.diag([-1.0, 1.0, 1.0, 1.0]) @ meta["frames"][1]["transform_matrix"]
        meta["frames"][1]["transform_matrix"] = flipped.tolist()

    edit_transforms(own, "train", mirrored)
    with pytest.raises(DatasetError, match=r"frame 1 \(.*\) of '.*transforms_train.json' is a reflection"):
        OwnDataDataset(own, "train")
