"""Which samples get a colour: the shading step's selection, and the pixel sums built from it.

The reference shades every sample whose compositing weight exceeds ``rayMarch_weight_thres``
and treats the rest as black. Shading (appearance features, the MLP and their backward pass)
is most of a training step, and an unbounded model spreads part of each ray's weight thinly:
on the built-in room (docs/UNBOUNDED.md) a ray carries about 57 samples of weight between
1e-4 and 1e-2, which hold 16 % of its colour, each shaded at full cost.

*Shading roulette* (unbounded training only, ``--shading_roulette TAU``) shades those faint
samples at random instead: a sample of weight w with threshold < w < TAU is picked with
probability w / TAU and its colour then counts TAU / w times (a constant). Samples of weight
TAU or more are always shaded. A ray's colour is then right in expectation, with about
sum(w) / TAU of its faint samples shaded.

The photometric loss squares the colour, so the noise of one draw would also enter its
gradient: E[(C + e - C*) grad(C + e)] = (C - C*) grad C + E[e grad e], a pull that darkens and
thins the faint samples. Two independent draws per ray avoid it: the pixel's value comes from
the first (``value``), its gradient from the second (``gradient``), so the noise of the one
multiplies the gradient of the other and averages out. Samples picked by the first draw only
are shaded without a gradient. (What each form measured: docs/UNBOUNDED.md.)

Each draw is u = frac(u_ray + ordinal * PHI): one uniform number per ray, stepped along the ray
by the golden ratio's fraction, so that the dense and packed paths, which number their samples
alike, draw the same numbers for the same samples. Rendering outside training shades as the
reference does.
"""
from __future__ import annotations

from dataclasses import dataclass

import jittor as jt

from tensorf_jt.rendering.samplers import flat_indices

PHI = 0.6180339887498949  # fractional part of the golden ratio


def roulette_draws(ray_draws: jt.Var, ordinal: jt.Var) -> jt.Var:
    """Uniform numbers [N] in [0, 1) for samples: ray_draws [N] (their ray's uniform number),
    ordinal [N] (their place along the ray, int or float)."""
    stepped = ((ordinal.float32() * PHI).stop_fuse() + ray_draws).stop_fuse()
    return stepped - jt.floor(stepped)


@dataclass
class ShadingPlan:
    """The samples to shade and how their colours count.

    graded [M] int32: flat positions of the samples shaded with gradients; value_scale and
    grad_scale [M] (None: all 1): the factors their colours count with in the pixel's value
    and in its gradient; value_only [K] int32 (None: none): samples shaded for the value only,
    counted value_only_scale [K] times.
    """

    graded: jt.Var
    value_scale: jt.Var | None = None
    grad_scale: jt.Var | None = None
    value_only: jt.Var | None = None
    value_only_scale: jt.Var | None = None

    @property
    def has_value_only(self) -> bool:
        return self.value_only is not None and self.value_only.shape[0] > 0


def plan_shading(weights: jt.Var, threshold: float, roulette_weight: float = 0.0,
                 value_draws: jt.Var | None = None, grad_draws: jt.Var | None = None) -> ShadingPlan:
    """The shading plan for samples of weights [N].

    Without draws (or with ``roulette_weight`` at or below ``threshold``): every sample above
    ``threshold``, as the reference. With value_draws and grad_draws [N] (``roulette_draws`` of
    two independent per-ray numbers): the roulette of the module's docstring.
    """
    if value_draws is None or grad_draws is None or roulette_weight <= threshold:
        return ShadingPlan(flat_indices(weights > threshold))
    weights = weights.detach()
    strong = weights > roulette_weight
    eligible = weights > threshold
    in_value = strong | (eligible & (value_draws * roulette_weight < weights))
    in_grad = strong | (eligible & (grad_draws * roulette_weight < weights))
    factor = jt.maximum(roulette_weight / jt.maximum(weights, threshold), jt.ones_like(weights)).stop_grad()
    graded = flat_indices(in_grad)
    value_only = flat_indices(in_value & jt.logical_not(in_grad))
    if graded.shape[0] == 0:
        return ShadingPlan(graded, value_only=value_only, value_only_scale=factor[value_only])
    grad_scale = factor[graded]
    value_scale = jt.ternary(in_value[graded], grad_scale, jt.zeros_like(grad_scale))
    return ShadingPlan(graded, value_scale, grad_scale, value_only, factor[value_only])


def weighted_colours(weights: jt.Var, colours: jt.Var, value_scale: jt.Var | None,
                     grad_scale: jt.Var | None) -> jt.Var:
    """Each shaded sample's share of its pixel, w * colour [M, 3], counted value_scale times in
    value and grad_scale times in gradient (weights [M], colours [M, 3])."""
    shares = weights.unsqueeze(1) * colours
    if value_scale is None:
        return shares
    graded = shares * grad_scale.unsqueeze(1)
    return graded + (shares * (value_scale - grad_scale).unsqueeze(1)).stop_grad()
