"""Writing frame sequences as videos: H.264 MP4 through ffmpeg, or an animated GIF without it.

The MP4 settings are the reference's: 30 fps, imageio quality 8 (its camera-path videos; it
uses 10 for the videos of rendered test views). The ffmpeg binary comes from the
``imageio-ffmpeg`` package; where it is missing (or ships no binary for the platform) the
frames are written as a GIF instead, which needs nothing but Pillow.
"""
from __future__ import annotations

import os

import imageio.v3 as iio
import numpy as np

FPS = 30
QUALITY = 8  # imageio's 0-10 scale for ffmpeg, as the reference passes it for camera paths


def ffmpeg_available() -> bool:
    """True when imageio can find an ffmpeg executable to encode MP4 with."""
    try:
        import imageio_ffmpeg
        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        return False
    return True


def pad_to_even(frames: np.ndarray) -> np.ndarray:
    """Frames [T, H, W, C] with one replicated row/column added where H or W is odd.

    H.264 in yuv420p needs even sizes; padding keeps every pixel where it was, whereas
    imageio's own fix rescales the whole frame.
    """
    pad_h, pad_w = frames.shape[1] % 2, frames.shape[2] % 2
    if not (pad_h or pad_w):
        return frames
    return np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")


def write_video(stem: str, frames: np.ndarray, use_ffmpeg: bool | None = None, quality: float = QUALITY) -> str:
    """Write uint8 frames [T, H, W, 3] to ``stem + '.mp4'`` (or ``'.gif'`` without ffmpeg).

    ``use_ffmpeg`` None means: use it when available; ``quality`` is imageio's MP4 quality
    (0-10), unused for GIFs. Returns the path written.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.dtype != np.uint8:
        raise ValueError(f"expected uint8 frames [T, H, W, C], got {frames.dtype} {frames.shape}")
    if use_ffmpeg is None:
        use_ffmpeg = ffmpeg_available()
    os.makedirs(os.path.dirname(os.path.abspath(stem)), exist_ok=True)
    if use_ffmpeg:
        path = f"{stem}.mp4"
        iio.imwrite(path, pad_to_even(frames), plugin="FFMPEG", fps=FPS, quality=quality, macro_block_size=1)
    else:
        path = f"{stem}.gif"
        iio.imwrite(path, frames, extension=".gif", duration=1000.0 / FPS, loop=0)
    return path
