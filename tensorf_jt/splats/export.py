"""A checkpoint to a splat file: render the training cameras with the checkpoint, place splats on
its surfaces (``placement``), optimise them against those renders and renders from cameras
halfway between neighbouring training cameras (``refine``; the extra views keep the splats
true between the photos), write the reference 3DGS layout (``formats.gaussian_ply``).

The splats hold what the model holds; a renderer composites them over the scene's background
(white for NeRF-synthetic scenes, as their checkpoints render). Large images are sampled every
``stride``-th pixel, so that at most ``MAX_RAYS`` rays are rendered; the splats are then
optimised at that reduced size.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace

import numpy as np

from tensorf_jt.formats.gaussian_ply import MAX_SH_DEGREE, write_splats
from tensorf_jt.splats.camera import PinholeCamera, between_cameras, dataset_cameras
from tensorf_jt.splats.params import SplatParameters
from tensorf_jt.splats.placement import PlacementOptions, place_splats, render_views
from tensorf_jt.splats.refine import RefineOptions, RefineReport, refine

MAX_RAYS = 4_000_000  # pixels rendered to place and supervise the splats (training and halfway cameras)


@dataclass(frozen=True)
class ExportOptions:
    """``sh_degree`` 0 to 3; ``max_splats``; ``iterations`` of refinement (0: the placed splats)."""

    sh_degree: int = 3
    max_splats: int = 200_000
    iterations: int = 4000
    seed: int = 0
    kernels: str = "fused"


@dataclass
class ExportReport:
    path: str
    splats: int
    placed: int
    file_bytes: int
    stride: int
    views: int
    place_seconds: float
    refinement: RefineReport | None


def pixel_stride(cameras: list[PinholeCamera]) -> int:
    """Every how many pixels (each way) a ray is cast, so that at most ``MAX_RAYS`` are (for the
    cameras and as many halfway between them)."""
    pixels = 2 * sum(camera.width * camera.height for camera in cameras)
    return max(1, math.ceil(math.sqrt(pixels / MAX_RAYS)))


def scaled(camera: PinholeCamera, stride: int) -> PinholeCamera:
    """``camera`` seeing every ``stride``-th pixel: the image ``render_views`` renders."""
    if stride == 1:
        return camera
    return replace(camera, fx=camera.fx / stride, fy=camera.fy / stride, cx=camera.cx / stride,
                   cy=camera.cy / stride, width=-(-camera.width // stride), height=-(-camera.height // stride))


def export_splats(model, dataset, white_bg: bool, out_path: str, options: ExportOptions = ExportOptions(),
                  show_progress: bool = True) -> ExportReport:
    """Splats of ``model`` seen through ``dataset``'s training cameras, written to ``out_path``."""
    if not 0 <= options.sh_degree <= MAX_SH_DEGREE:
        raise ValueError(f"sh_degree must be 0 to {MAX_SH_DEGREE}")
    started = time.time()
    cameras = dataset_cameras(dataset)
    stride = pixel_stride(cameras)
    renders = render_views(model, dataset, cameras, stride, white_bg)
    placement = PlacementOptions(stride=stride, max_splats=options.max_splats, sh_degree=options.sh_degree)
    splats = place_splats(model, dataset, cameras, renders, placement)
    placed, place_seconds = splats.count, time.time() - started
    report = None
    if options.iterations > 0:
        between = between_cameras(cameras)
        targets = np.concatenate([renders.rgb, render_views(model, dataset, between, stride, white_bg).rgb])
        background = np.ones(3) if white_bg else np.zeros(3)
        params, report = refine(SplatParameters.from_splats(splats), [scaled(c, stride) for c in cameras + between],
                                targets, background, RefineOptions(options.iterations, options.seed, options.kernels),
                                show_progress)
        splats = params.to_splats()
    write_splats(out_path, splats)
    return ExportReport(out_path, splats.count, placed, os.path.getsize(out_path), stride, len(cameras),
                        place_seconds, report)
