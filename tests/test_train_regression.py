"""End to end on CPU: train a tiny demo scene, check its quality, reload and re-render it."""
import json
import os

import numpy as np
import pytest

from tensorf_jt.cli.render import render_checkpoint
from tensorf_jt.config import parse_args
from tensorf_jt.trainer import train

# Measured on the development machine (2 CPU cores): test PSNR 26.69 dB, SSIM 0.937, mean
# depth error 0.228 after 300 iterations in ~55 s. Thresholds leave ~2 dB of margin.
MIN_TEST_PSNR = 24.5


@pytest.mark.slow
def test_tiny_demo_trains_and_reloads(tmp_path):
    args = parse_args([
        "--config", "configs/demo.txt", "--datadir", str(tmp_path / "scene"), "--basedir", str(tmp_path / "log"),
        "--expname", "tiny", "--demo_image_size", "32", "--demo_n_train", "16", "--demo_n_test", "2",
        "--n_iters", "300", "--batch_size", "512", "--N_voxel_init", "4096", "--N_voxel_final", "110592",
        "--upsamp_list", "60", "--upsamp_list", "120", "--upsamp_list", "180",
        "--update_AlphaMask_list", "100", "--update_AlphaMask_list", "200",
        "--vis_every", "150", "--N_vis", "1", "--render_test", "1", "--seed", "7",
    ])
    result = train(args)
    metrics = result.test_metrics
    print(f"tiny demo: test PSNR {metrics['psnr']:.2f}, SSIM {metrics['ssim']:.4f}, "
          f"depth error {metrics['depth_abs_error']:.4f}, {result.wall_time_s:.1f} s")
    assert metrics["psnr"] >= MIN_TEST_PSNR
    assert metrics["depth_abs_error"] < 0.4
    events = [event.split(" ")[0] for _, event in result.events]
    assert events.count("upsample") == 3 and events.count("alpha") == 2
    assert "shrink" in events and "ray" in events

    folder = os.path.join(tmp_path, "log", "tiny")
    assert os.path.isfile(os.path.join(folder, "tiny.th"))
    for name in ("000.png", "001.png", "rgbd/000.png", "mean.txt", "metrics.json"):
        assert os.path.isfile(os.path.join(folder, "imgs_test_all", name)), name
    mean_txt = np.loadtxt(os.path.join(folder, "imgs_test_all", "mean.txt"))
    assert np.isclose(mean_txt[0], metrics["psnr"]) and np.isclose(mean_txt[1], metrics["ssim"])
    assert os.listdir(os.path.join(folder, "imgs_vis")), "periodic test views were rendered"

    os.rename(os.path.join(folder, "imgs_test_all"), os.path.join(folder, "imgs_test_first"))
    rendered = render_checkpoint(parse_args(["--ckpt", os.path.join(folder, "tiny.th"), "--render_test", "1"]))
    assert abs(rendered["test"]["psnr"] - metrics["psnr"]) < 1e-4, "the reloaded model renders the same"
    assert json.load(open(os.path.join(folder, "imgs_test_all", "metrics.json")))["views"][0]["view"] == 0
