"""Splats as trainable Jittor Vars, and back to the file's arrays (``formats.gaussian_ply.Splats``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import jittor as jt

from tensorf_jt.formats.gaussian_ply import Splats


@dataclass
class SplatParameters:
    """Trainable splats: ``means`` [N, 3], ``log_scales`` [N, 3], ``quats`` [N, 4] (w, x, y, z;
    any length), ``logits`` [N] opacity logits, ``sh_dc`` [N, 1, 3] and ``sh_rest`` [N, K - 1, 3]
    colour coefficients (apart, since the reference trains the higher terms 20 times slower)."""

    means: jt.Var
    log_scales: jt.Var
    quats: jt.Var
    logits: jt.Var
    sh_dc: jt.Var
    sh_rest: jt.Var

    @classmethod
    def from_splats(cls, splats: Splats) -> "SplatParameters":
        def var(array: np.ndarray) -> jt.Var:
            return jt.array(np.ascontiguousarray(array, dtype=np.float32)).start_grad()

        return cls(var(splats.means), var(splats.log_scales), var(splats.quats), var(splats.opacity_logits),
                   var(splats.sh[:, :1]), var(splats.sh[:, 1:]))

    def sh(self) -> jt.Var:
        """[N, K, 3] all colour coefficients."""
        return jt.concat([self.sh_dc, self.sh_rest], dim=1) if self.sh_rest.shape[1] else self.sh_dc

    @property
    def count(self) -> int:
        return int(self.means.shape[0])

    def groups(self) -> dict[str, jt.Var]:
        return {"means": self.means, "log_scales": self.log_scales, "quats": self.quats, "logits": self.logits,
                "sh_dc": self.sh_dc, "sh_rest": self.sh_rest}

    def to_splats(self) -> Splats:
        quats = self.quats.numpy().astype(np.float64)
        quats /= np.maximum(np.linalg.norm(quats, axis=1, keepdims=True), 1e-12)
        return Splats(self.means.numpy(), self.log_scales.numpy(), quats.astype(np.float32), self.logits.numpy(),
                      self.sh().numpy())

    def subset(self, keep: np.ndarray) -> "SplatParameters":
        """The splats where ``keep`` [N] (bool) is true, as new trainable Vars."""
        return SplatParameters.from_splats(Splats(*(array[keep] for array in (
            self.means.numpy(), self.log_scales.numpy(), self.quats.numpy(), self.logits.numpy(), self.sh().numpy()))))
