"""Rendering whole images in chunks, writing them out, and scoring them.

Output layout is the reference's, so scripts written for it keep working: for a folder
``out`` and prefix ``p``, ``out/p{idx:03d}.png`` (RGB), ``out/rgbd/p{idx:03d}.png`` (RGB next
to the colour-mapped depth), ``out/pmean.txt`` (mean PSNR, then mean SSIM), and the rendered
views as videos, ``out/pvideo.mp4`` (RGB) and ``out/pdepthvideo.mp4`` (colour-mapped depth),
30 fps, one frame per view. ``mean.txt`` holds the reference's lines: mean PSNR, then with the
extra metrics mean SSIM, LPIPS-Alex and LPIPS-VGG (``nan`` where the LPIPS weights are not
installed). Ours adds ``out/pmetrics.json`` with per-view figures, and mean absolute depth
error where the dataset has ground-truth depth (the demo scene does).

A camera path (``evaluate_path``) has no ground truth: ``out/{idx:03d}.png``,
``out/rgbd/{idx:03d}.png``, and the frames as ``out/video.mp4`` and ``out/depthvideo.mp4``.

Videos are H.264 through the ``imageio-ffmpeg`` package's ffmpeg (``tensorf_jt.evaluation.video``;
imageio quality 10 for views as the reference's ``evaluation``, 8 for the path as its
``evaluation_path``); without ffmpeg they are animated GIFs (``video.gif``, ...) and a note
says so once per call.

PNGs and video frames are rounded to 8 bits (``round(rgb * 255)``); the reference truncates
(``(rgb * 255).astype(uint8)``), so its images are on average half a level darker. PSNR and
SSIM here are computed on the float renders, as the reference computes them; figures
recomputed from the saved PNGs (e.g. by the reference's ``extra/compute_metrics.py``) differ
slightly between the two.
"""
from __future__ import annotations

import json
import os
from typing import Callable, Iterable

import imageio.v3 as iio
import numpy as np
import jittor as jt
from tqdm.auto import tqdm

from tensorf_jt.errors import ConfigError
from tensorf_jt.evaluation.lpips import MIN_SIZE as LPIPS_MIN_SIZE, lpips_distance
from tensorf_jt.evaluation.metrics import mean_abs_depth_error, psnr, ssim
from tensorf_jt.formats.lpips_weights import INSTALL_COMMAND, weights_folder
from tensorf_jt.models import TensoRFModel
from tensorf_jt.evaluation.video import ffmpeg_available, write_video
from tensorf_jt.evaluation.visualize import depth_to_rgb


def render_rays(model: TensoRFModel, rays: np.ndarray, chunk: int = 4096, N_samples: int = -1,
                white_bg: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Render rays [N, 6] in chunks without gradients -> rgb [N, 3], depth [N] (numpy float32)."""
    rgbs, depths = [], []
    with jt.no_grad():
        for start in range(0, rays.shape[0], chunk):
            output = model(jt.array(rays[start:start + chunk]), white_bg=white_bg, n_samples=N_samples)
            rgbs.append(output.rgb.numpy())
            depths.append(output.depth.numpy())
    if not rgbs:
        return np.zeros((0, 3), np.float32), np.zeros((0,), np.float32)
    return np.concatenate(rgbs), np.concatenate(depths)


def write_videos(save_dir: str, prefix: str, rgb_frames: list, depth_frames: list, what: str,
                 quality: float) -> tuple[str, str]:
    """Write ``{prefix}video`` and ``{prefix}depthvideo`` (uint8 frames [H, W, 3] each) into
    ``save_dir``: MP4 through ffmpeg, GIF without it, after a note. Returns both paths."""
    use_ffmpeg = ffmpeg_available()
    if not use_ffmpeg:
        print(f"note: no ffmpeg found (pip install imageio-ffmpeg); writing the {what} as animated GIFs.")
    return (write_video(os.path.join(save_dir, f"{prefix}video"), np.stack(rgb_frames), use_ffmpeg, quality),
            write_video(os.path.join(save_dir, f"{prefix}depthvideo"), np.stack(depth_frames), use_ffmpeg, quality))


LPIPS_NETS = ("alex", "vgg")
# The summary's and mean.txt's order of the metrics, as the reference writes them.
MEAN_TXT_KEYS = ("psnr", "ssim", "lpips_alex", "lpips_vgg")


def lpips_unavailable(image_size: tuple[int, int]) -> str | None:
    """Why LPIPS cannot score images of ``image_size`` (W, H) here, or None when it can."""
    folder = weights_folder()
    if folder is None or not all((folder / name).is_file() for name in ("alexnet.ckpt", "vgg16.ckpt")):
        return f"the LPIPS weights are not installed ({INSTALL_COMMAND})"
    if min(image_size) < LPIPS_MIN_SIZE:
        return f"the images are smaller than the {LPIPS_MIN_SIZE} pixels a side LPIPS's networks need"
    return None


def extra_metrics(rgb: np.ndarray, gt_rgb: np.ndarray, with_lpips: bool) -> dict:
    """SSIM and, with the weights at hand, LPIPS-Alex and LPIPS-VGG of one view."""
    record = {"ssim": ssim(rgb, gt_rgb)}
    if with_lpips:
        record.update({f"lpips_{net}": lpips_distance(rgb, gt_rgb, net) for net in LPIPS_NETS})
    return record


def evaluate(dataset, model: TensoRFModel, save_dir: str, N_vis: int = -1, prefix: str = "",
             N_samples: int = -1, white_bg: bool = True, compute_extra_metrics: bool = True,
             chunk: int = 4096, show_progress: bool = True) -> dict:
    """Render views of a stacked dataset split with ``model``, save them, and score them against
    its images (``score_views``)."""
    return score_views(dataset, lambda view: render_rays(model, dataset.view_rays(view), chunk, N_samples, white_bg),
                       save_dir, N_vis, prefix, compute_extra_metrics, show_progress)


def score_views(dataset, render_view: Callable[[int], tuple[np.ndarray, np.ndarray]], save_dir: str,
                N_vis: int = -1, prefix: str = "", compute_extra_metrics: bool = True,
                show_progress: bool = True) -> dict:
    """Render views of a stacked dataset split with ``render_view`` (view -> rgb [H*W, 3] and
    depth [H*W]), save them, and score them against its images.

    ``N_vis`` > 0 renders every (len // N_vis)-th view only, as the reference does for its
    periodic checks. ``compute_extra_metrics`` adds SSIM, LPIPS-Alex and LPIPS-VGG (the
    reference's ``compute_extra_metrics``). Returns {'views': [per-view dicts], 'psnr': mean,
    and the means of 'ssim', 'lpips_alex', 'lpips_vgg' and 'depth_abs_error' when computed}
    (what ``{prefix}metrics.json`` holds; 'lpips' says why LPIPS is missing, if it is), plus
    the paths of the two videos as 'video' and 'depth_video' when there was a view to render.
    """
    os.makedirs(os.path.join(save_dir, "rgbd"), exist_ok=True)
    width, height = dataset.img_wh
    n_views = dataset.n_views
    stride = 1 if N_vis < 0 else max(n_views // max(N_vis, 1), 1)
    view_ids = list(range(0, n_views, stride))
    has_depth = getattr(dataset, "all_depths", None) is not None
    lpips_missing = lpips_unavailable(dataset.img_wh) if compute_extra_metrics else None
    with_lpips = compute_extra_metrics and lpips_missing is None
    if lpips_missing:
        print(f"note: LPIPS is not computed: {lpips_missing}.")
    views, rgb_frames, depth_frames = [], [], []
    for idx, view in enumerate(tqdm(view_ids, desc="rendering", leave=False, disable=not show_progress)):
        rgb, depth = render_view(view)
        rgb = np.clip(rgb.reshape(height, width, 3), 0.0, 1.0)
        depth = depth.reshape(height, width)
        gt_rgb = dataset.view_rgbs(view).reshape(height, width, 3)
        record = {"view": int(view), "psnr": psnr(rgb, gt_rgb)}
        if compute_extra_metrics:
            record.update(extra_metrics(rgb, gt_rgb, with_lpips))
        if has_depth:
            record["depth_abs_error"] = mean_abs_depth_error(depth, dataset.all_depths[view])
        views.append(record)

        rgb8 = np.round(rgb * 255).astype(np.uint8)
        iio.imwrite(os.path.join(save_dir, f"{prefix}{idx:03d}.png"), rgb8)
        depth_rgb = depth_to_rgb(depth, dataset.near_far)
        iio.imwrite(os.path.join(save_dir, "rgbd", f"{prefix}{idx:03d}.png"), np.concatenate([rgb8, depth_rgb], axis=1))
        rgb_frames.append(rgb8)
        depth_frames.append(depth_rgb)

    summary = {"views": views}
    for key in (*MEAN_TXT_KEYS, "depth_abs_error"):
        if views and key in views[0]:
            summary[key] = float(np.mean([v[key] for v in views]))
    if lpips_missing:
        summary["lpips"] = f"not computed: {lpips_missing}"
    if views:
        lines = MEAN_TXT_KEYS if compute_extra_metrics else MEAN_TXT_KEYS[:1]
        means = [summary.get(key, float("nan")) for key in lines]
        np.savetxt(os.path.join(save_dir, f"{prefix}mean.txt"), np.asarray(means))
        with open(os.path.join(save_dir, f"{prefix}metrics.json"), "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=2)
        summary["video"], summary["depth_video"] = write_videos(save_dir, prefix, rgb_frames, depth_frames,
                                                                "videos", quality=10)
    return summary


def evaluate_path(dataset, model: TensoRFModel, save_dir: str, N_samples: int = -1, white_bg: bool = True,
                  chunk: int = 4096, show_progress: bool = True) -> dict:
    """Render the dataset's camera path and save its frames and videos.

    ``dataset.render_path`` holds the camera-to-world poses [K, 4, 4]; ``dataset.rays_for_pose``
    turns one into rays [H*W, 6]. Returns {'frames': K, 'video': path, 'depth_video': path}.
    """
    poses = getattr(dataset, "render_path", None)
    if poses is None or len(poses) == 0:
        raise ConfigError(f"The {type(dataset).__name__} dataset defines no camera path to render; "
                          "set render_path = 0.")
    frames = (dataset.rays_for_pose(c2w) for c2w in tqdm(poses, desc="rendering path", leave=False,
                                                           disable=not show_progress))
    return render_frames(model, frames, dataset.img_wh, dataset.near_far, save_dir, "path videos", N_samples=N_samples,
                         white_bg=white_bg, chunk=chunk)


def render_frames(model: TensoRFModel, frame_rays: Iterable[np.ndarray], size_wh: tuple[int, int], near_far,
                  save_dir: str, what: str, N_samples: int = -1, white_bg: bool = True,
                  chunk: int = 4096) -> dict:
    """Render a camera path given as each frame's rays [W*H, 6] into ``save_dir``, as the reference
    lays out its path: ``{idx:03d}.png``, ``rgbd/{idx:03d}.png`` (RGB beside the depth coloured
    over ``near_far``), ``video`` and ``depthvideo`` (``what`` names them in the GIF note).
    Returns {'frames': count, 'video': path, 'depth_video': path}."""
    os.makedirs(os.path.join(save_dir, "rgbd"), exist_ok=True)
    width, height = size_wh
    rgb_frames, depth_frames = [], []
    for idx, rays in enumerate(frame_rays):
        rgb, depth = render_rays(model, rays, chunk, N_samples, white_bg)
        rgb8 = np.round(np.clip(rgb.reshape(height, width, 3), 0.0, 1.0) * 255).astype(np.uint8)
        depth_rgb = depth_to_rgb(depth.reshape(height, width), near_far)
        iio.imwrite(os.path.join(save_dir, f"{idx:03d}.png"), rgb8)
        iio.imwrite(os.path.join(save_dir, "rgbd", f"{idx:03d}.png"), np.concatenate([rgb8, depth_rgb], axis=1))
        rgb_frames.append(rgb8)
        depth_frames.append(depth_rgb)

    video, depth_video = write_videos(save_dir, "", rgb_frames, depth_frames, what, quality=8)
    return {"frames": len(rgb_frames), "video": video, "depth_video": depth_video}
