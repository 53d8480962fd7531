"""Real spherical harmonics up to degree 3, in the reference 3DGS's basis and signs.

A splat's colour seen along the unit direction ``d`` from the camera to the splat is
``max(0.5 + sum_k Y_k(d) c_k, 0)`` per channel, ``Y_k`` below (graphdeco-inria's ``eval_sh``
constants, degree by degree). ``fit_coefficients`` finds the coefficients whose colours are
closest, in least squares, to colours sampled over many directions.
"""
from __future__ import annotations

import numpy as np

from tensorf_jt.formats.gaussian_ply import SH_C0, sh_coefficients

SH_C1 = 0.4886025119029199
SH_C2 = (1.0925484305920792, -1.0925484305920792, 0.31539156525252005, -1.0925484305920792, 0.5462742152960396)
SH_C3 = (-0.5900435899266435, 2.890611442640554, -0.4570457994644658, 0.3731763325901154, -0.4570457994644658,
         1.445305721320277, -0.5900435899266435)


def sh_basis(directions: np.ndarray, degree: int) -> np.ndarray:
    """[..., K] the K = (degree + 1)^2 basis functions at unit ``directions`` [..., 3]."""
    d = np.asarray(directions, np.float64)
    x, y, z = d[..., 0], d[..., 1], d[..., 2]
    columns = [np.full(x.shape, SH_C0)]
    if degree >= 1:
        columns += [-SH_C1 * y, SH_C1 * z, -SH_C1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        columns += [SH_C2[0] * x * y, SH_C2[1] * y * z, SH_C2[2] * (2 * zz - xx - yy), SH_C2[3] * x * z,
                    SH_C2[4] * (xx - yy)]
    if degree >= 3:
        columns += [SH_C3[0] * y * (3 * xx - yy), SH_C3[1] * x * y * z, SH_C3[2] * y * (4 * zz - xx - yy),
                    SH_C3[3] * z * (2 * zz - 3 * xx - 3 * yy), SH_C3[4] * x * (4 * zz - xx - yy),
                    SH_C3[5] * z * (xx - yy), SH_C3[6] * x * (xx - 3 * yy)]
    return np.stack(columns, axis=-1)


def sh_colours(coefficients: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """[N, M, 3] colours of N splats' ``coefficients`` [N, K, 3] along ``directions`` [N, M, 3]
    (or [M, 3], the same for all): 0.5 plus the harmonics, clamped at 0."""
    degree = int(round(np.sqrt(coefficients.shape[1]))) - 1
    basis = sh_basis(directions, degree)
    if basis.ndim == 2:
        basis = np.broadcast_to(basis, (coefficients.shape[0], *basis.shape))
    return np.maximum(0.5 + np.einsum("nmk,nkc->nmc", basis, coefficients), 0.0)


def fit_coefficients(colours: np.ndarray, directions: np.ndarray, degree: int, ridge: float = 1e-3) -> np.ndarray:
    """[N, K, 3] coefficients whose unclamped colours best match ``colours`` [N, M, 3] seen along
    ``directions`` [N, M, 3] (or [M, 3] shared), in least squares; ``ridge`` (relative to the
    mean of the normal equations' diagonal) keeps the higher terms small where few directions
    constrain them."""
    basis = sh_basis(directions, degree)
    targets = np.asarray(colours, np.float64) - 0.5
    k = sh_coefficients(degree)
    if basis.ndim == 2:
        gram = basis.T @ basis
        gram += ridge * np.trace(gram) / k * np.eye(k)
        right = np.einsum("mk,nmc->knc", basis, targets).reshape(k, -1)
        return np.linalg.solve(gram, right).reshape(k, -1, 3).transpose(1, 0, 2).astype(np.float32)
    gram = np.einsum("nmk,nml->nkl", basis, basis)
    gram += ridge * (np.trace(gram, axis1=1, axis2=2) / k)[:, None, None] * np.eye(k)
    return np.linalg.solve(gram, np.einsum("nmk,nmc->nkc", basis, targets)).astype(np.float32)
