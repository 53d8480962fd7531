"""Independent, loop-based numpy versions of the grid formulas, used as test oracles."""
import numpy as np


def corners_1d(coord: float, size: int) -> list[tuple[int, float]]:
    """Texels around a normalised coordinate (align_corners=True) with their weights; outside ones dropped."""
    pixel = (coord + 1) / 2 * (size - 1)
    lower = int(np.floor(pixel))
    frac = pixel - lower
    return [(i, w) for i, w in ((lower, 1 - frac), (lower + 1, frac)) if 0 <= i < size]


def bilinear(plane_chw: np.ndarray, u: float, v: float) -> np.ndarray:
    """grid_sample of a [C, H, W] plane at one point (u along W, v along H) -> [C]."""
    channels, height, width = plane_chw.shape
    out = np.zeros(channels)
    for y, wy in corners_1d(v, height):
        for x, wx in corners_1d(u, width):
            out += wx * wy * plane_chw[:, y, x]
    return out


def linear(line_cl: np.ndarray, t: float) -> np.ndarray:
    """Sample a [C, L] line at one point -> [C]."""
    out = np.zeros(line_cl.shape[0])
    for i, w in corners_1d(t, line_cl.shape[1]):
        out += w * line_cl[:, i]
    return out


def resize_align_corners(grid: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Bilinear resize of [C, H, W] with align_corners=True."""
    channels, height, width = grid.shape
    out = np.zeros((channels, out_h, out_w))
    for j in range(out_h):
        src_y = j * (height - 1) / (out_h - 1) if out_h > 1 else 0.0
        for i in range(out_w):
            src_x = i * (width - 1) / (out_w - 1) if out_w > 1 else 0.0
            y0, x0 = min(int(np.floor(src_y)), height - 1), min(int(np.floor(src_x)), width - 1)
            y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
            fy, fx = src_y - y0, src_x - x0
            out[:, j, i] = ((1 - fy) * (1 - fx) * grid[:, y0, x0] + (1 - fy) * fx * grid[:, y0, x1]
                            + fy * (1 - fx) * grid[:, y1, x0] + fy * fx * grid[:, y1, x1])
    return out
