"""Splats optimised to look like the checkpoint: from each camera, the rasterised splats against
the checkpoint's own render (RadSplat's supervision, arXiv 2403.13806) in mean squared error
(what PSNR measures; it beat the reference 3DGS's L1 on held-out views, docs/BENCHMARKS.md),
Adam with the reference 3DGS's learning rates (positions scaled by the cameras' extent and
decaying a hundredfold), and at the end the splats too faint to matter are dropped.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import jittor as jt
from tqdm.auto import tqdm

from tensorf_jt.splats.camera import PinholeCamera
from tensorf_jt.splats.params import SplatParameters
from tensorf_jt.splats.rasterizer import render_splats

# The reference 3DGS's rates: positions (times the scene's extent, decaying to 1 %), scales,
# rotations, opacities, the constant colour term and the others (20 times slower).
LEARNING_RATES = {"means": 1.6e-4, "log_scales": 5e-3, "quats": 1e-3, "logits": 5e-2, "sh_dc": 2.5e-3,
                  "sh_rest": 2.5e-3 / 20.0}
MEANS_DECAY = 0.01
PRUNE_OPACITY = 0.005


@dataclass(frozen=True)
class RefineOptions:
    """``iterations``: optimisation steps (one camera each); ``seed`` picks the cameras."""

    iterations: int = 4000
    seed: int = 0
    kernels: str = "fused"


@dataclass
class RefineReport:
    iterations: int
    seconds: float
    pruned: int
    final_loss: float


def scene_extent(cameras: list[PinholeCamera]) -> float:
    """1.1 times the largest distance of a camera from the cameras' mean (the reference's scale)."""
    centres = np.stack([camera.centre for camera in cameras])
    return 1.1 * float(np.linalg.norm(centres - centres.mean(0), axis=1).max(initial=0.0)) or 1.0


def refine(params: SplatParameters, cameras: list[PinholeCamera], targets: np.ndarray, background: np.ndarray,
           options: RefineOptions = RefineOptions(), show_progress: bool = True) -> tuple[SplatParameters, RefineReport]:
    """Optimise ``params`` so that from ``cameras`` they render ``targets`` [V, H, W, 3] over
    ``background`` [3]; returns the refined splats (the faintest pruned) and a report."""
    started = time.time()
    extent = scene_extent(cameras)
    groups = params.groups()
    rates = dict(LEARNING_RATES, means=LEARNING_RATES["means"] * extent)
    optimizer = jt.optim.Adam([{"params": [var], "lr": rates[name]} for name, var in groups.items()],
                              lr=rates["means"], eps=1e-15)
    rng = np.random.default_rng(options.seed)
    background_var = jt.array(np.asarray(background, np.float32))
    target_vars = [jt.array(np.ascontiguousarray(view, dtype=np.float32)) for view in targets]
    loss_value = float("nan")
    progress = tqdm(range(options.iterations), desc="refining splats", leave=False, disable=not show_progress)
    for iteration in progress:
        view = int(rng.integers(len(cameras)))
        image, _, _ = render_splats(params, cameras[view], background_var, options.kernels)
        loss = jt.sqr(image - target_vars[view]).mean()
        optimizer.step(loss)
        fraction = (iteration + 1) / max(options.iterations, 1)
        optimizer.param_groups[0]["lr"] = rates["means"] * MEANS_DECAY ** fraction
        if iteration % 100 == 0 or iteration == options.iterations - 1:
            loss_value = float(loss.item())
            progress.set_postfix(loss=f"{loss_value:.4f}")
    keep = params.logits.numpy() > np.log(PRUNE_OPACITY / (1.0 - PRUNE_OPACITY))
    refined = params if keep.all() else params.subset(keep)
    return refined, RefineReport(options.iterations, time.time() - started, int((~keep).sum()), loss_value)
