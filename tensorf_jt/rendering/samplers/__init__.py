"""Where along each ray the field is evaluated: the samplers, one per kind of scene space.

- ``BoxSampler``: the reference TensoRF's bounded scenes, fixed steps through the grid's box.
- ``NDCSampler``: forward-facing scenes in normalised device coordinates.
- ``UnboundedSampler``: scenes that go on beyond a foreground box, contracted into a cube.

Each meets ``Sampler`` (``protocol``); ``models.factory`` picks one per run or checkpoint.
"""
from tensorf_jt.rendering.samplers.box import BoxSampler, NDCSampler
from tensorf_jt.rendering.samplers.protocol import DenseSamples, Sampler, flat_indices
from tensorf_jt.rendering.samplers.unbounded import UnboundedSampler

__all__ = ["BoxSampler", "DenseSamples", "NDCSampler", "Sampler", "UnboundedSampler", "flat_indices"]
