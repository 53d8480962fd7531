"""The tile rasteriser of 3D Gaussian splats as fused kernels (``csrc/splat_*``), with
hand-written backward passes: projection (EWA, 0.3-pixel dilation, colour from spherical
harmonics), binning into 16 x 16 tiles, a depth sort per tile, and front-to-back compositing.

``rasterize`` is the whole pipeline for one camera; ``splats.rasterizer`` composes it with
the plain-Jittor reference of the same math. The number of (tile, splat) pairs decides the
size of the sort, so it is read back once per image (one wait for the device).
"""
from __future__ import annotations

import jittor as jt

from tensorf_jt.kernels.source import device_code

_PROJECT_GLUE = """
    tensorf_kernels::splat_project_forward_$device(means_p, log_scales_p, quats_p, logits_p, sh_p, means_shape0,
        $degree, camera_p, $width, $height, uv_p, conic_p, depth_p, radius_p, rect_p, rgb_p, opacity_p, tiles_p);
"""
_PROJECT_BACKWARD_GLUE = """
    tensorf_kernels::splat_project_backward_$device(means_p, log_scales_p, quats_p, logits_p, sh_p, means_shape0,
        $degree, camera_p, $width, $height, g_uv_p, g_conic_p, g_rgb_p, g_opacity_p, g_means_p, g_log_scales_p,
        g_quats_p, g_sh_p, g_logits_p);
"""
_BIN_GLUE = """
    tensorf_kernels::splat_bin_$device(rect_p, depth_p, tiles_p, offsets_p, rect_shape0, $width, keys_p, ids_p);
"""
_RANGES_GLUE = """
    tensorf_kernels::splat_tile_ranges_$device(keys_p, keys_shape0, $n_tiles, tile_offsets_p);
"""
_RENDER_GLUE = """
    tensorf_kernels::splat_render_forward_$device(uv_p, conic_p, rgb_p, opacity_p, depth_p, ids_p, tile_offsets_p,
        background_p, $width, $height, uv_shape0, image_p, depth_image_p, transmittance_p, n_contrib_p);
"""
_RENDER_BACKWARD_GLUE = """
    tensorf_kernels::splat_render_backward_$device(uv_p, conic_p, rgb_p, opacity_p, ids_p, tile_offsets_p,
        background_p, $width, $height, transmittance_p, n_contrib_p, g_image_p, uv_shape0, g_uv_p, g_conic_p,
        g_rgb_p, g_opacity_p);
"""
TILE = 16


def _sizes(width: int, height: int, degree: int) -> dict:
    return {"width": str(int(width)), "height": str(int(height)), "degree": str(int(degree))}


class _Project(jt.Function):
    """Splat parameters -> screen means, conics, colours, opacities (differentiable), and the
    depths, tile rectangles and tile counts the binning needs."""

    def execute(self, means, log_scales, quats, logits, sh, camera, width, height, degree):
        n = means.shape[0]
        inputs = {"means": means, "log_scales": log_scales, "quats": quats, "logits": logits, "sh": sh,
                  "camera": camera}
        outputs = device_code([("uv", (n, 2), "float32"), ("conic", (n, 3), "float32"), ("depth", (n,), "float32"),
                               ("radius", (n,), "int32"), ("rect", (n, 4), "int32"), ("rgb", (n, 3), "float32"),
                               ("opacity", (n,), "float32"), ("tiles", (n,), "int32")],
                              inputs, "splat", _PROJECT_GLUE, **_sizes(width, height, degree))
        uv, conic, depth, _, rect, rgb, opacity, tiles = outputs
        self.saved = inputs
        self.sizes = _sizes(width, height, degree)
        return uv, conic, rgb, opacity, depth.stop_grad(), rect.stop_grad(), tiles.stop_grad()

    def grad(self, g_uv, g_conic, g_rgb, g_opacity, *_):
        saved = self.saved
        n, k = saved["means"].shape[0], saved["sh"].shape[1]
        inputs = dict(saved, g_uv=_dense(g_uv, (n, 2)), g_conic=_dense(g_conic, (n, 3)), g_rgb=_dense(g_rgb, (n, 3)),
                      g_opacity=_dense(g_opacity, (n,)))
        g_means, g_log_scales, g_quats, g_sh, g_logits = device_code(
            [("g_means", (n, 3), "float32"), ("g_log_scales", (n, 3), "float32"), ("g_quats", (n, 4), "float32"),
             ("g_sh", (n, k, 3), "float32"), ("g_logits", (n,), "float32")],
            inputs, "splat", _PROJECT_BACKWARD_GLUE, **self.sizes)
        return g_means, g_log_scales, g_quats, g_logits, g_sh, None


class _Composite(jt.Function):
    """Screen-space splats, sorted per tile -> the image over ``background``, its depth (the
    splats' depths composited like their colours; no gradient) and its transmittance."""

    def execute(self, uv, conic, rgb, opacity, depth, ids, tile_offsets, background, width, height):
        inputs = {"uv": uv, "conic": conic, "rgb": rgb, "opacity": opacity, "depth": depth, "ids": ids,
                  "tile_offsets": tile_offsets, "background": background}
        sizes = {"width": str(int(width)), "height": str(int(height))}
        image, depth_image, transmittance, n_contrib = device_code(
            [("image", (height, width, 3), "float32"), ("depth_image", (height, width), "float32"),
             ("transmittance", (height, width), "float32"), ("n_contrib", (height, width), "int32")],
            inputs, "splat", _RENDER_GLUE, **sizes)
        self.saved = dict(inputs, transmittance=transmittance, n_contrib=n_contrib)
        self.sizes = sizes
        return image, depth_image.stop_grad(), transmittance.stop_grad()

    def grad(self, g_image, *_):
        saved = self.saved
        n = saved["uv"].shape[0]
        height, width = int(self.sizes["height"]), int(self.sizes["width"])
        inputs = dict(saved, g_image=_dense(g_image, (height, width, 3)))
        grads = device_code([("g_uv", (n, 2), "float32"), ("g_conic", (n, 3), "float32"),
                             ("g_rgb", (n, 3), "float32"), ("g_opacity", (n,), "float32")],
                            inputs, "splat", _RENDER_BACKWARD_GLUE, **self.sizes)
        return (*grads, None, None, None, None)


def _dense(grad, shape) -> jt.Var:
    """An incoming gradient, or zeros where the output took no part in the loss."""
    return jt.zeros(shape, dtype="float32") if grad is None else grad.float32()


def sort_by_tile(rect: jt.Var, depth: jt.Var, tiles: jt.Var, width: int, height: int) -> tuple[jt.Var, jt.Var]:
    """(splat of each (tile, splat) pair, ordered by tile and then depth [M] int32; where each of
    the image's tiles starts among them [n_tiles + 1] int32)."""
    n_tiles = ((width + TILE - 1) // TILE) * ((height + TILE - 1) // TILE)
    counts = tiles.int32()
    ends = jt.cumsum(counts, dim=0) if counts.shape[0] else counts
    total = int(ends[-1].item()) if counts.shape[0] else 0
    if total == 0:
        return jt.zeros((0,), dtype="int32"), jt.zeros((n_tiles + 1,), dtype="int32")
    offsets = (ends - counts).int32()
    keys, ids = device_code([("keys", (total,), "float64"), ("ids", (total,), "int32")],
                            {"rect": rect, "depth": depth, "tiles": counts, "offsets": offsets}, "splat", _BIN_GLUE,
                            width=str(int(width)))
    order, sorted_keys = jt.argsort(keys)
    tile_offsets, = device_code([("tile_offsets", (n_tiles + 1,), "int32")], {"keys": sorted_keys}, "splat",
                                _RANGES_GLUE, n_tiles=str(n_tiles))
    return ids[order].stop_grad(), tile_offsets.stop_grad()


def rasterize(means: jt.Var, log_scales: jt.Var, quats: jt.Var, logits: jt.Var, sh: jt.Var, camera: jt.Var,
              width: int, height: int, background: jt.Var) -> tuple[jt.Var, jt.Var, jt.Var]:
    """The image [H, W, 3] of the splats seen by ``camera`` (``PinholeCamera.vector``) over
    ``background`` [3], its depth [H, W] (camera-space z composited as the colours are) and its
    transmittance [H, W] (1 - the splats' opacity)."""
    degree = int(round(sh.shape[1] ** 0.5)) - 1
    uv, conic, rgb, opacity, depth, rect, tiles = _Project()(means, log_scales, quats, logits, sh, camera, width,
                                                             height, degree)
    ids, tile_offsets = sort_by_tile(rect, depth, tiles, width, height)
    return _Composite()(uv, conic, rgb, opacity, depth, ids, tile_offsets, background, width, height)
