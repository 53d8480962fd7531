"""A converted COLMAP capture trains as well as the same views in the blender layout.

The capture (``synthetic_capture``) has lens distortion, pose noise and an arbitrary world
frame; after one conversion command it trains with ``dataset_name = own_data`` and no other
scene setting. The blender scene holds the same views rendered through an exact pinhole
camera with exact poses, in the demo scene's fixed box. Both train with the same tiny
schedule, and the converted one must come within 1 dB of the blender one's test PSNR.
"""
from __future__ import annotations

import os
import sys

import pytest

import synthetic_capture as capture_lib
from tensorf_jt.config import load_run_config
from tensorf_jt.training.run import train

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import colmap_to_transforms  # noqa: E402

SCHEDULE = ["--n_iters", "150", "--batch_size", "256", "--N_voxel_init", "4096", "--N_voxel_final", "64000",
            "--upsamp_list", "30", "--upsamp_list", "60", "--upsamp_list", "90",
            "--update_AlphaMask_list", "50", "--update_AlphaMask_list", "100",
            "--N_vis", "0", "--render_test", "1", "--compute_extra_metrics", "0", "--tensorboard", "0", "--seed", "7"]


@pytest.mark.slow
def test_converted_capture_trains_within_1db_of_the_blender_scene(tmp_path):
    capture = capture_lib.make_capture(str(tmp_path / "capture"), image_size=32, n_views=24, seed=5,
                                       points_per_view=120)
    assert colmap_to_transforms.main([capture.root]) == 0
    blender = capture_lib.make_blender_scene(str(tmp_path / "blender"), capture)
    common = ["--config", "configs/demo.txt", "--basedir", str(tmp_path / "log"), *SCHEDULE]
    converted = train(load_run_config([*common, "--dataset_name", "own_data", "--datadir", capture.root,
                                       "--expname", "converted"])).test_metrics["psnr"]
    reference = train(load_run_config([*common, "--dataset_name", "blender", "--datadir", blender,
                                       "--expname", "blender"])).test_metrics["psnr"]
    print(f"test PSNR: converted COLMAP capture {converted:.2f} dB, blender layout {reference:.2f} dB")
    assert converted >= reference - 1.0, (converted, reference)
