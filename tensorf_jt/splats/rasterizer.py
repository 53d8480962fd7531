"""Rendering splats: the fused tile rasteriser (``kernels.splat_raster``) or the same math in
plain Jittor (``reference_rasterize``), which differentiates through Jittor's own operators and
holds every pixel against every splat, so it serves small scenes and the tests.

Both follow the reference 3DGS conventions that ``kernels/csrc/splat_common.h`` lists: EWA
projection with a 0.3-pixel dilation, 16 x 16 tiles bounding each splat at three standard
deviations, a depth order, alpha clamped at 0.99 and skipped below 1/255, and compositing that
stops before the transmittance would fall below 1e-4.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import jittor as jt

from tensorf_jt.kernels import check_kernels
from tensorf_jt.kernels.splat_raster import TILE, rasterize
from tensorf_jt.splats.camera import PinholeCamera
from tensorf_jt.splats.params import SplatParameters

NEAR, DILATION, MAX_ALPHA, MIN_ALPHA, MIN_TRANSMITTANCE, FOV_CLAMP = 0.2, 0.3, 0.99, 1.0 / 255.0, 1e-4, 1.3
SH_C0, SH_C1 = 0.28209479177387814, 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658,
         1.445305721320277, -0.5900435899266435)


def render_splats(params: SplatParameters, camera: PinholeCamera, background: np.ndarray | jt.Var,
                  kernels: str = "fused") -> tuple[jt.Var, jt.Var, jt.Var]:
    """(image [H, W, 3], depth [H, W], transmittance [H, W]) of ``params`` seen by ``camera``
    over ``background`` [3]; ``kernels`` 'fused' or 'reference'. The depth is the splats'
    camera-space z composited as their colours are (no gradient)."""
    check_kernels(kernels)
    background = jt.array(np.asarray(background, np.float32)) if not isinstance(background, jt.Var) else background
    vector = jt.array(camera.vector())
    if kernels == "fused":
        return rasterize(params.means, params.log_scales, params.quats, params.logits, params.sh(), vector,
                         camera.width, camera.height, background)
    return reference_rasterize(params.means, params.log_scales, params.quats, params.logits, params.sh(), camera,
                               background)


def view_renderer(params: SplatParameters, cameras: list[PinholeCamera], background: np.ndarray,
                  kernels: str = "fused") -> Callable[[int], tuple[np.ndarray, np.ndarray]]:
    """view -> (rgb [H*W, 3], depth [H*W]) of the splats from ``cameras[view]``, without gradients
    (what ``evaluation.renders.score_views`` renders a split with)."""
    def render(view: int) -> tuple[np.ndarray, np.ndarray]:
        with jt.no_grad():
            image, depth, _ = render_splats(params, cameras[view], background, kernels)
        return image.numpy().reshape(-1, 3), depth.numpy().reshape(-1)

    return render


def _quaternion_matrices(quats: jt.Var) -> jt.Var:
    q = quats / jt.sqrt((quats * quats).sum(1, keepdims=True))
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    rows = [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
            2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
            2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]
    return jt.stack(rows, dim=1).reshape(-1, 3, 3)


def _sh_colours(sh: jt.Var, directions: jt.Var) -> jt.Var:
    """[N, 3] 0.5 + sum_k Y_k(d) sh_k, unclamped."""
    degree = int(round(sh.shape[1] ** 0.5)) - 1
    x, y, z = directions[:, 0:1], directions[:, 1:2], directions[:, 2:3]
    basis = [jt.full_like(x, SH_C0)]
    if degree >= 1:
        basis += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        basis += [SH_C2[0] * x * y, SH_C2[1] * y * z, SH_C2[2] * (2 * zz - xx - yy), SH_C2[3] * x * z,
                  SH_C2[4] * (xx - yy)]
    if degree >= 3:
        basis += [SH_C3[0] * y * (3 * xx - yy), SH_C3[1] * x * y * z, SH_C3[2] * y * (4 * zz - xx - yy),
                  SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy), SH_C3[4] * x * (4 * zz - xx - yy),
                  SH_C3[5] * z * (xx - yy), SH_C3[6] * x * (xx - 3 * yy)]
    return 0.5 + sum(b * sh[:, k, :] for k, b in enumerate(basis))


def reference_project(means: jt.Var, log_scales: jt.Var, quats: jt.Var, logits: jt.Var, sh: jt.Var,
                      camera: PinholeCamera) -> dict[str, jt.Var]:
    """The projection in plain Jittor: screen means ``uv``, ``conic`` (A, B, C), ``depth``,
    ``rgb``, ``opacity``, tile rectangles ``rect`` [N, 4] (x0, x1, y0, y1) and ``visible``."""
    rotation, translation = camera.world_to_camera()
    R = jt.array(rotation.astype(np.float32))
    p = jt.matmul(means, R.transpose()) + jt.array(translation.astype(np.float32))
    z = p[:, 2]
    front = z > NEAR
    z_safe = jt.ternary(front, z, jt.ones_like(z))
    M = _quaternion_matrices(quats) * jt.exp(log_scales).unsqueeze(1)
    sigma = jt.matmul(M, M.transpose(0, 2, 1))
    lim_x = FOV_CLAMP * 0.5 * camera.width / camera.fx
    lim_y = FOV_CLAMP * 0.5 * camera.height / camera.fy
    tx = (p[:, 0] / z_safe).clamp(min_v=-lim_x, max_v=lim_x) * z_safe
    ty = (p[:, 1] / z_safe).clamp(min_v=-lim_y, max_v=lim_y) * z_safe
    zeros = jt.zeros_like(z_safe)
    J = jt.stack([jt.stack([camera.fx / z_safe, zeros, -camera.fx * tx / (z_safe * z_safe)], dim=1),
                  jt.stack([zeros, camera.fy / z_safe, -camera.fy * ty / (z_safe * z_safe)], dim=1)], dim=1)
    T = jt.matmul(J, R.unsqueeze(0).broadcast((J.shape[0], 3, 3)))
    cov = jt.matmul(jt.matmul(T, sigma), T.transpose(0, 2, 1))
    a, b, c = cov[:, 0, 0] + DILATION, cov[:, 0, 1], cov[:, 1, 1] + DILATION
    det = a * c - b * b
    ok = front & (det > 0)
    det_safe = jt.ternary(ok, det, jt.ones_like(det))
    conic = jt.stack([c / det_safe, -b / det_safe, a / det_safe], dim=1)
    mid = 0.5 * (a + c)
    spread = jt.sqrt(jt.maximum(mid * mid - det, jt.full_like(mid, 0.1)))
    radius = jt.ceil(3.0 * jt.sqrt(jt.maximum(mid + spread, mid - spread))).stop_grad()
    u = camera.fx * p[:, 0] / z_safe + camera.cx
    v = camera.fy * p[:, 1] / z_safe + camera.cy
    gx, gy = -(-camera.width // TILE), -(-camera.height // TILE)
    px, py = (u - 0.5).stop_grad(), (v - 0.5).stop_grad()
    rect = jt.stack([((px - radius) / TILE).int32().clamp(0, gx), ((px + radius + TILE - 1) / TILE).int32().clamp(0, gx),
                     ((py - radius) / TILE).int32().clamp(0, gy), ((py + radius + TILE - 1) / TILE).int32().clamp(0, gy)],
                    dim=1)
    ok = ok & ((rect[:, 1] - rect[:, 0]) * (rect[:, 3] - rect[:, 2]) > 0)
    offset = means - jt.array(camera.centre.astype(np.float32))
    directions = offset / jt.sqrt((offset * offset).sum(1, keepdims=True))
    rgb = jt.maximum(_sh_colours(sh, directions), jt.zeros((1, 3)))
    return {"uv": jt.stack([u, v], dim=1), "conic": conic, "depth": z, "rgb": rgb, "opacity": jt.sigmoid(logits),
            "rect": rect, "visible": ok}


def reference_rasterize(means: jt.Var, log_scales: jt.Var, quats: jt.Var, logits: jt.Var, sh: jt.Var,
                        camera: PinholeCamera, background: jt.Var) -> tuple[jt.Var, jt.Var, jt.Var]:
    """``render_splats`` in plain Jittor: every pixel against every visible splat, in depth order."""
    projected = reference_project(means, log_scales, quats, logits, sh, camera)
    visible = np.flatnonzero(projected["visible"].numpy())
    width, height = camera.width, camera.height
    if len(visible) == 0:
        image = background.reshape(1, 1, 3).broadcast((height, width, 3))
        return image, jt.zeros((height, width)), jt.ones((height, width))
    index = jt.array(visible.astype(np.int32))
    order = index[jt.argsort(projected["depth"][index])[0]]
    uv, conic, rgb = projected["uv"][order], projected["conic"][order], projected["rgb"][order]
    opacity, rect, depth = projected["opacity"][order], projected["rect"][order], projected["depth"][order]
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    px = jt.array((cols.reshape(-1, 1) + 0.5).astype(np.float32))
    py = jt.array((rows.reshape(-1, 1) + 0.5).astype(np.float32))
    tile_x = jt.array((cols.reshape(-1, 1) // TILE).astype(np.int32))
    tile_y = jt.array((rows.reshape(-1, 1) // TILE).astype(np.int32))
    dx, dy = uv[:, 0].unsqueeze(0) - px, uv[:, 1].unsqueeze(0) - py
    power = -0.5 * (conic[:, 0] * dx * dx + conic[:, 2] * dy * dy) - conic[:, 1] * dx * dy
    in_tiles = ((tile_x >= rect[:, 0]) & (tile_x < rect[:, 1]) & (tile_y >= rect[:, 2]) & (tile_y < rect[:, 3]))
    alpha = jt.minimum(opacity * jt.exp(jt.minimum(power, jt.zeros_like(power))), jt.full_like(power, MAX_ALPHA))
    valid = in_tiles & (power <= 0) & (alpha >= MIN_ALPHA)
    alpha = jt.ternary(valid, alpha, jt.zeros_like(alpha))
    after = jt.cumprod(1.0 - alpha, dim=1)
    taken = (after >= MIN_TRANSMITTANCE).float32()
    alpha = alpha * taken
    after = jt.cumprod(1.0 - alpha, dim=1)
    before = jt.concat([jt.ones((after.shape[0], 1)), after[:, :-1]], dim=1)
    weights = alpha * before
    colour = jt.matmul(weights, rgb)
    transmittance = after[:, -1]
    image = colour + transmittance.unsqueeze(1) * background.reshape(1, 3)
    depth_image = (weights * depth.unsqueeze(0)).sum(1).stop_grad()
    return image.reshape(height, width, 3), depth_image.reshape(height, width), transmittance.reshape(height, width)
