"""The browser viewer of a training run (``--viewer 1``): served between steps, from the loop's thread.

After every step the viewer is told the model changed (with new boxes after a grid event), may
render within its share of the step's time, and holds the loop while a browser has paused
training (``tensorf_jt.viewer``).
"""
from __future__ import annotations

import os
import time
from typing import Callable

from tensorf_jt.config import RunConfig
from tensorf_jt.models import TensoRFModel


class LiveViewer:
    """The viewer of one run, on its main rank."""

    def __init__(self, config: RunConfig, dataset, model: TensoRFModel, white_bg: bool, logfolder: str,
                 n_events: int) -> None:
        from tensorf_jt.viewer.frames import RenderSettings
        from tensorf_jt.viewer.scene import model_boxes, scene_view
        from tensorf_jt.viewer.server import Viewer

        scene = scene_view(dataset)
        settings = RenderSettings(white_bg=white_bg, chunk=min(config.render.chunk_size, 4096),
                                  near_far=scene.near_far)
        model_box, mask_box = model_boxes(model)
        self.viewer = Viewer(scene, settings, os.path.join(logfolder, "viewer"), host=config.viewer.viewer_host,
                             port=config.viewer.viewer_port, training=True, model_box=model_box, mask_box=mask_box)
        self.url = self.viewer.url
        self._events = n_events  # grid events the viewer's boxes reflect

    def after_step(self, trainer, stopping: Callable[[], bool]) -> None:
        """After a step of ``trainer`` (``training.trainer.Trainer``): tell the viewer the model
        changed (new boxes if there were grid events since), let it render within its share of
        the step's time, and hold here while it is paused."""
        from tensorf_jt.viewer.scene import model_boxes

        viewer, model = self.viewer, trainer.model
        if len(trainer.progress.events) != self._events:
            self._events = len(trainer.progress.events)
            viewer.model_changed(*model_boxes(model))
        else:
            viewer.model_changed()
        if viewer.client_count:
            viewer.show_status(status(trainer))
        viewer.after_step(model, trainer.step_times[-1] if trainer.step_times else 0.0)
        while viewer.paused and not stopping():
            viewer.show_status(status(trainer) + "\n\n**paused**")
            if not viewer.service(model, 0.05):
                time.sleep(0.02)

    def close(self) -> None:
        self.viewer.close()


def status(trainer) -> str:
    """The viewer panel's words on the run: iteration, loss and PSNRs, grid, training rays."""
    progress, grid = trainer.progress, "x".join(str(int(n)) for n in trainer.model.gridSize)
    return (f"iteration **{trainer.iteration}** / {trainer.config.schedule.n_iters}  \n"
            f"loss (MSE) {10 ** (-progress.last_psnr / 10):.5f}, train PSNR {progress.last_psnr:.2f} dB, "
            f"test PSNR {progress.test_psnr:.2f} dB  \n"
            f"grid {grid}, {trainer.ray_batches.n_rays} training rays")
