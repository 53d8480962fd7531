"""An independent numpy renderer of 3D Gaussian splats, written from the reference 3DGS's
conventions (EWA projection with the perspective Jacobian clamped at 1.3 times the half field of
view, 0.3-pixel dilation, 3-sigma tile bounds on 16 x 16 tiles, depth order, alpha clamped at
0.99 and skipped below 1/255, stopping before the transmittance falls below 1e-4, colour
0.5 + SH clamped at 0 along the camera-to-splat direction), pixel by pixel in float64."""
from __future__ import annotations

import math

import numpy as np

from tensorf_jt.splats.sh import sh_basis

TILE = 16


def project(splats, camera) -> dict:
    """Per splat: screen mean, conic, depth, colour, opacity, tile rectangle, visibility."""
    rotation, translation = camera.world_to_camera()
    p = splats.means.astype(np.float64) @ rotation.T + translation
    n = len(p)
    out = {"uv": np.zeros((n, 2)), "conic": np.zeros((n, 3)), "depth": p[:, 2], "rgb": np.zeros((n, 3)),
           "opacity": 1.0 / (1.0 + np.exp(-splats.opacity_logits.astype(np.float64))), "rect": np.zeros((n, 4), int),
           "visible": np.zeros(n, bool)}
    covariances = splats.covariances()
    gx, gy = math.ceil(camera.width / TILE), math.ceil(camera.height / TILE)
    lim_x, lim_y = 1.3 * 0.5 * camera.width / camera.fx, 1.3 * 0.5 * camera.height / camera.fy
    for i in range(n):
        x, y, z = p[i]
        if z <= 0.2:
            continue
        tx = min(lim_x, max(-lim_x, x / z)) * z
        ty = min(lim_y, max(-lim_y, y / z)) * z
        jacobian = np.array([[camera.fx / z, 0.0, -camera.fx * tx / z ** 2], [0.0, camera.fy / z, -camera.fy * ty / z ** 2]])
        t = jacobian @ rotation
        cov = t @ covariances[i] @ t.T + 0.3 * np.eye(2)
        det = cov[0, 0] * cov[1, 1] - cov[0, 1] ** 2
        if det <= 0:
            continue
        mid = 0.5 * (cov[0, 0] + cov[1, 1])
        spread = math.sqrt(max(0.1, mid * mid - det))
        radius = math.ceil(3.0 * math.sqrt(max(mid + spread, mid - spread)))
        u, v = camera.fx * x / z + camera.cx, camera.fy * y / z + camera.cy
        px, py = u - 0.5, v - 0.5
        rect = [min(gx, max(0, int((px - radius) / TILE))), min(gx, max(0, int((px + radius + TILE - 1) / TILE))),
                min(gy, max(0, int((py - radius) / TILE))), min(gy, max(0, int((py + radius + TILE - 1) / TILE)))]
        if (rect[1] - rect[0]) * (rect[3] - rect[2]) == 0:
            continue
        direction = splats.means[i].astype(np.float64) - camera.centre
        direction /= np.linalg.norm(direction)
        colour = 0.5 + sh_basis(direction, splats.sh_degree) @ splats.sh[i].astype(np.float64)
        out["uv"][i] = (u, v)
        out["conic"][i] = (cov[1, 1] / det, -cov[0, 1] / det, cov[0, 0] / det)
        out["rgb"][i] = np.maximum(colour, 0.0)
        out["rect"][i] = rect
        out["visible"][i] = True
    return out


def render(splats, camera, background, window: tuple[int, int, int, int] | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image [H, W, 3], depth [H, W] (camera-space z composited like the colours), transmittance
    [H, W]) in float64; with ``window`` (row0, row1, col0, col1) only those pixels, the rest zero."""
    projected = project(splats, camera)
    order = [i for i in np.argsort(projected["depth"], kind="stable") if projected["visible"][i]]
    image = np.zeros((camera.height, camera.width, 3))
    transmittance = np.ones((camera.height, camera.width))
    depth = np.zeros((camera.height, camera.width))
    row0, row1, col0, col1 = window if window is not None else (0, camera.height, 0, camera.width)
    for row in range(row0, row1):
        for col in range(col0, col1):
            tile_x, tile_y = col // TILE, row // TILE
            T, colour, z = 1.0, np.zeros(3), 0.0
            for i in order:
                x0, x1, y0, y1 = projected["rect"][i]
                if not (x0 <= tile_x < x1 and y0 <= tile_y < y1):
                    continue
                dx, dy = projected["uv"][i] - (col + 0.5, row + 0.5)
                a, b, c = projected["conic"][i]
                power = -0.5 * (a * dx * dx + c * dy * dy) - b * dx * dy
                if power > 0:
                    continue
                alpha = min(0.99, projected["opacity"][i] * math.exp(power))
                if alpha < 1.0 / 255.0:
                    continue
                if T * (1 - alpha) < 1e-4:
                    break
                colour += projected["rgb"][i] * alpha * T
                z += projected["depth"][i] * alpha * T
                T *= 1 - alpha
            image[row, col] = colour + T * np.asarray(background)
            transmittance[row, col] = T
            depth[row, col] = z
    return image, depth, transmittance
