"""What a training run renders: test views now and then, and the final renders the flags ask for."""
from __future__ import annotations

import os

from tensorf_jt.config import RunConfig
from tensorf_jt.dataLoader import load_split
from tensorf_jt.evaluation.renders import evaluate, evaluate_path
from tensorf_jt.models import TensoRFModel


def render_test_views(config: RunConfig, test_dataset, model: TensoRFModel, logfolder: str, white_bg: bool,
                      iteration: int, n_samples: int) -> float:
    """``N_vis`` test views into ``imgs_vis/`` (prefixed with the iteration), PSNR only; their mean PSNR."""
    summary = evaluate(test_dataset, model, os.path.join(logfolder, "imgs_vis"), N_vis=config.render.N_vis,
                       prefix=f"{iteration:06d}_", N_samples=n_samples, white_bg=white_bg, compute_extra_metrics=False,
                       chunk=config.render.chunk_size, show_progress=False)
    return summary.get("psnr", 0.0)


def render_after_training(config: RunConfig, test_dataset, model: TensoRFModel, logfolder: str,
                          white_bg: bool) -> dict | None:
    """Training views, test views and the camera path, as ``render_train``, ``render_test`` and
    ``render_path`` ask; returns the test views' summary (None when they were not rendered)."""
    render, chunk = config.render, config.render.chunk_size
    if render.render_train:
        evaluate(load_split(config.data, "train", is_stack=True), model, os.path.join(logfolder, "imgs_train_all"),
                 white_bg=white_bg, chunk=chunk, compute_extra_metrics=render.compute_extra_metrics)
    summary = None
    if render.render_test:
        summary = evaluate(test_dataset, model, os.path.join(logfolder, "imgs_test_all"), white_bg=white_bg,
                           chunk=chunk, compute_extra_metrics=render.compute_extra_metrics)
    if render.render_path:
        evaluate_path(test_dataset, model, os.path.join(logfolder, "imgs_path_all"), white_bg=white_bg, chunk=chunk)
    return summary
