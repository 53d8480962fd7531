"""Viewer frames rendered a chunk at a time, so that rendering can stop at a deadline and go
on later (between training steps) without holding up the caller for a whole image."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import jittor as jt

from tensorf_jt.evaluation.visualize import depth_to_rgb

OUTPUTS = ("RGB", "Depth", "Opacity")


@dataclass(frozen=True)
class RenderSettings:
    """How the model renders for the viewer: background, chunk size, and the depth range the
    depth colour map spans (the dataset's near/far, as the saved renders use)."""

    white_bg: bool
    chunk: int
    near_far: tuple[float, float]


class FrameJob:
    """One image being rendered: rays [H*W, 6], filled a chunk at a time by ``advance``."""

    def __init__(self, rays: np.ndarray, width: int, height: int, output: str, tag: object = None) -> None:
        if output not in OUTPUTS:
            raise ValueError(f"unknown viewer output {output!r}; choose one of {', '.join(OUTPUTS)}")
        self.rays, self.width, self.height, self.output, self.tag = rays, width, height, output, tag
        self._next = 0
        self._rgb = np.zeros((rays.shape[0], 3), np.float32)
        self._depth = np.zeros(rays.shape[0], np.float32)
        self._opacity = np.zeros(rays.shape[0], np.float32)
        self.render_seconds = 0.0

    @property
    def done(self) -> bool:
        return self._next >= self.rays.shape[0]

    def advance(self, model, settings: RenderSettings, deadline: float | None = None) -> bool:
        """Render chunks until the frame is done or ``deadline`` (``time.perf_counter()``) has
        passed; at least one chunk is rendered. Returns whether the frame is done."""
        with jt.no_grad():
            while not self.done:
                start = time.perf_counter()
                end = min(self._next + settings.chunk, self.rays.shape[0])
                output = model(jt.array(self.rays[self._next:end]), white_bg=settings.white_bg)
                self._rgb[self._next:end] = output.rgb.numpy()
                self._depth[self._next:end] = output.depth.numpy()
                self._opacity[self._next:end] = output.opacity.numpy()
                self._next = end
                finished = time.perf_counter()
                self.render_seconds += finished - start
                if deadline is not None and finished >= deadline:
                    break
        return self.done

    def image(self, near_far: tuple[float, float]) -> np.ndarray:
        """The finished frame as uint8 [H, W, 3] in the chosen output."""
        shape = (self.height, self.width)
        if self.output == "RGB":
            return np.round(np.clip(self._rgb, 0.0, 1.0).reshape(*shape, 3) * 255).astype(np.uint8)
        if self.output == "Depth":
            return depth_to_rgb(self._depth.reshape(shape), near_far)
        grey = np.round(np.clip(self._opacity, 0.0, 1.0).reshape(shape) * 255).astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=2)
